/*
Copyright 2026 The projection-recovery Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package store

import (
	"context"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/position"
)

// Deferred derivation (FR-APR06 R1; docs/reverification.md): a key whose
// last full fold still holds (derivedHolds) takes it without re-reading its
// retained legs, and is marked deferred. Invariant: no slice makes the scope
// CURRENT while a key of it is deferred; flushDeferred re-derives every
// deferred key in full first, and the CURRENT slice checks none is left
// (deferredLeft). Without it a trade written without its position (a lost
// update, a hand edit) could be certified instead of refused.

// derivedHolds reports whether the page may take r's last full fold as its
// derivation (see above): the key's row exists with a proven opening, its
// basis records the position the last full fold derived and the row still
// holds exactly that, and the slice neither inserts a trade of the key nor
// holds an opening of it. Everything else is folded in full.
func (w *pageTx) derivedHolds(r *posRow) bool {
	if !r.exists || !r.openProven || r.basisSeq == nil || r.derived == nil || w.p.openings[r.k] != nil {
		return false
	}
	for _, f := range w.p.fills[r.k] {
		if !w.existing[f.t.TradeID] {
			return false
		}
	}
	return r.pre.Equal(*r.derived)
}

// deferFold derives a deferred key: its position stays what its row holds
// (the last full fold), and its basis moves over the slice's legs of the
// key, taken from the verified source events in authoritative order, to the
// slice's through. Nothing of the key's position changes, so nothing is
// published (R2).
func (w *pageTx) deferFold(r *posRow) {
	fills := make([]position.NumFill, 0, len(w.p.fills[r.k]))
	for _, f := range w.p.fills[r.k] {
		fills = append(fills, f.num())
	}
	position.SortNum(fills)
	s := position.NumStateOf(r.basis)
	for _, f := range fills {
		s = position.ApplyNum(s, f.Quantity, f.Price)
	}
	r.newBasis = s.State()
	r.final, r.changed = r.pre, false
	w.deferred++
}

// deferredLeft refuses when a deferred key of the scope remains after the
// slice's writes: the slice would make the scope CURRENT over a position not
// re-derived from its retained trades. ApplyPrepared re-derives every
// deferred key before such a slice (flushDeferred) and only the lease holder
// defers keys, so this is a guard, not a path: CURSOR_MOVED (transient), the
// next cycle re-derives what is left.
func (w *pageTx) deferredLeft(ctx context.Context) error {
	left, err := basisDeferredCount(ctx, w.tx, w.scope)
	if err != nil {
		return dbErr("store: deferred keys", err)
	}
	if left > 0 {
		return refuse(codes.CursorMoved, "%d keys of %q still wait for their full re-derivation; the scope cannot be CURRENT before it", left, w.scope)
	}
	return nil
}

// readLegs reads the retained BOOKED trade legs of the keys (accounts[i],
// instruments[i]) after each key's basis (all of them without a basis): the
// trades of the page already retained and live trades newer than the page,
// which R1 keeps. LATERAL forces one index range probe per key
// (trades_buy_key / trades_sell_key: scope, account, instrument, seq >
// basis). Without it, stale statistics during a bulk catch-up made the
// planner scan every trade of the scope per page, turning catch-up quadratic.
func (w *pageTx) readLegs(ctx context.Context, accounts, instruments []string) (map[key][]position.NumFill, error) {
	rows, err := w.tx.Query(ctx, retainedLegsSQL, w.scope, accounts, instruments)
	if err != nil {
		return nil, dbErr("store: read retained trades", err)
	}
	return w.scanLegs(rows)
}

// deferredKeys lists up to limit keys of scope whose derivation is deferred.
func (s *Store) deferredKeys(ctx context.Context, scope string, limit int) ([]key, error) {
	keys, err := basisDeferredKeys(ctx, s.pool, scope, limit)
	if err != nil {
		return nil, dbErr("store: deferred keys", err)
	}
	return keys, nil
}

// flushDeferred re-derives, before next (a slice that would make the scope
// CURRENT), every deferred key of the scope in full: slices of at most
// maxSliceKeys keys and no event, at the cursor next starts from, each under
// its keys' locks and the fenced lease like any slice (a refusal there is the
// refusal the key's next page would have met without deferral). Each such
// slice moves only the cursor's last_verified_at, as an idle page does.
// A key a flush slice re-derived is never deferred again before next (only
// next's predecessors defer, and they have committed), so a key listed
// twice means the flush did not clear it: an internal error, never a loop.
func (s *Store) flushDeferred(ctx context.Context, l Lease, run Run, next *prepared, total *PageResult) error {
	flushed := map[key]bool{}
	for {
		keys, err := s.deferredKeys(ctx, run.Scope, maxSliceKeys)
		if err != nil || len(keys) == 0 {
			return err
		}
		fl := newSlice(next.page, next.after, next.digestAfter, nil)
		fl.through, fl.digest, fl.flush = next.after, next.digestAfter, true
		for _, k := range keys {
			if flushed[k] {
				return refuse(codes.Internal, "deferred key %s/%s of %q was re-derived and is still deferred", k.account, k.instrument, run.Scope)
			}
			flushed[k] = true
			fl.addKey(k)
		}
		res, held, err := s.applySlice(ctx, l, run, fl)
		if err != nil {
			return err
		}
		*total = total.plus(res)
		total.LockHeld = append(total.LockHeld, held)
	}
}

// makesCurrent reports whether committing p makes the scope CURRENT: it ends
// at its page's source boundary, or at a DRAINING run's frozen seq.
func (p *prepared) makesCurrent(run Run) bool {
	return p.through == p.page.BoundarySeq || (run.Phase == PhaseDraining && run.FrozenSeq != nil && p.through == *run.FrozenSeq)
}
