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
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/codes"

	"github.com/projection-recovery/projection-recovery/internal/source"
)

// PageResult is what one page proved and wrote. A page commits in write
// slices (see ApplyPrepared); the result sums the slices that committed.
type PageResult struct {
	Scope              string
	AfterSeq           int64
	VerifiedThroughSeq int64  // new cursor
	ChainDigest        string // digest through VerifiedThroughSeq
	EventCount         int64  // total events verified since genesis
	BoundarySeq        int64  // the page's source boundary
	Applied            int    // events of this page applied (a DRAINING run may keep a prefix)
	InsertedTrades     int64  // trades the live feed had lost
	OrderEvents        int64  // order versions newly persisted
	TouchedKeys        int    // position keys re-derived (a key counts once per slice that touched it)
	ChangedKeys        int    // keys whose position differs from the pre-slice value (outbox rows, R2)
	NewerLegs          int64  // retained trade legs newer than their slice re-folded into its keys (R1), summed over slices
	DeferredKeys       int    // keys whose full re-derivation a slice deferred (deferred.go), summed over slices
	LockWaited         bool   // a transaction was waiting for the projection write lock when the last slice finished
	State              string // CURRENT or CATCHING_UP
	// VerifiedAt is the cursor's new last_verified_at, PostgreSQL's clock at
	// the last committed slice: what a later read of the cursor returns, so
	// status shows the same instant before and after (no status write on
	// the next idle cycle just because two clocks differ).
	VerifiedAt time.Time
	Slices     int // write slices committed: each moved the cursor in its own transaction
	// LockHeld is how long each committed slice held the projection write
	// lock (granted to committed): how long a live write could have waited.
	LockHeld []time.Duration
}

// Current reports whether the cursor reached the source boundary (or the frozen seq).
func (r PageResult) Current() bool { return r.State == StateCurrent }

// Committed reports whether at least one slice of the page committed: on an
// error, the cursor then stands at VerifiedThroughSeq, not at AfterSeq.
func (r PageResult) Committed() bool { return r.Slices > 0 }

// SetAfterCommit registers f to run after each committed write slice that
// wrote notifications (e.g. notify.Publisher.Kick), before the page's next
// slice starts, and after each committed repair that wrote one
// (AfterCommit). Never called on rollback.
func (s *Store) SetAfterCommit(f func(scope string)) { s.afterCommit = f }

// ApplyPage verifies one fetched page and applies it (FR-APR06). The page
// was fetched before (never hold a transaction across HTTP). In order:
//
//  1. decode, hash and order-check the WHOLE page, outside any transaction,
//     and cut it into write slices at command boundaries (prepare);
//  2. per slice, in ONE transaction: COPY the slice's trades and keys into
//     session-private temporary tables, then take the projection write lock
//     of the slice's keys (KeyLocks: the scope's lock shared, each key's
//     exclusively), so no live write on those keys interleaves with what
//     follows;
//  3. re-read the lease row FOR UPDATE: owner, fence, unexpired (FR-APR08);
//  4. re-read the selected run: changed since the caller read it → SUPERSEDED,
//     nothing written (FR-APR09; runs are read, never written); read again
//     FOR SHARE just before step 8 (sameRun);
//  5. re-read the cursor: the slice's after and digestAfter must be its
//     verified-through and digest; descriptor and protocol must match
//     (FR-APR05/07); a cursor at genesis bootstraps: every retained row is
//     re-verified (FR-APR07);
//  6. refuse unknown legacy history, orphans, immutable/provenance conflicts,
//     rejected bookings, order rows differing from their source event,
//     unproven openings and unexplained balances of every touched key;
//  7. insert missing trades set-based; persist order versions without
//     rewinding newer ones; re-derive every touched key from all retained
//     trades in (seq, tradeSeq) order (R1); write outbox rows for keys whose
//     final position differs from the pre-slice value (R2);
//  8. advance the cursor by compare-and-set on the old verified-through,
//     digest and boundary.
//
// A slice is a page in every respect FR-APR06 names (its own window and
// chain digests at both ends, verified before any slice writes); a fetched
// page is the fetch unit. Any refusal or error rolls its slice back: a
// *codes.Refusal (see codes.Of) means that slice wrote nothing; the slices
// before it stay committed, each a verified step of the cursor, and the
// result reports them (Committed, VerifiedThroughSeq).
func (s *Store) ApplyPage(ctx context.Context, l Lease, run Run, page *source.Page) (PageResult, error) {
	pp, err := s.PreparePage(run, page)
	if err != nil {
		return PageResult{}, err
	}
	return s.ApplyPrepared(ctx, l, run, pp)
}

// PreparedPage is a page decoded, hashed and checked against a run, outside
// any transaction (see PreparePage). It is applied once: ApplyPrepared
// consumes it slice by slice.
type PreparedPage struct {
	run   Run
	prep  *pagePrep
	pages int // fetched pages in the unit (Merge)
}

// PreparePage does the transaction-free half of ApplyPage: identity, ordering,
// decoding and chain verification (a *codes.Refusal on failure). A caller may
// prepare the next page while the previous one is being applied; Go decoding
// then overlaps with PostgreSQL work.
func (s *Store) PreparePage(run Run, page *source.Page) (*PreparedPage, error) {
	p, err := prepare(run, page)
	if err != nil {
		return nil, err
	}
	return &PreparedPage{run: run, prep: p, pages: 1}, nil
}

// ApplyPrepared commits a prepared page slice by slice (ApplyPage from step
// 2 on). run must be the run the page was prepared against. The projection
// write lock is released between slices, and while live writes wait for it
// each slice is sized to hold it for about the store's slice budget
// (slice.go), so a live write waits for one short slice, never for a whole
// page (docs/live-writes.md). A PreparedPage is applied once.
func (s *Store) ApplyPrepared(ctx context.Context, l Lease, run Run, pp *PreparedPage) (PageResult, error) {
	if l.Scope != run.Scope {
		return PageResult{}, fmt.Errorf("store: lease is for scope %q, run for %q", l.Scope, run.Scope)
	}
	if pp == nil || !pp.run.SameBarrier(run) {
		return PageResult{}, refuse(codes.Superseded, "page was prepared against another run")
	}
	if pp.prep.cut > 0 {
		return PageResult{}, fmt.Errorf("store: page (%d, %d] of %q was already applied", pp.prep.page.AfterSeq, pp.prep.page.ThroughSeq, run.Scope)
	}
	var total PageResult
	for !pp.prep.done() {
		n := s.slices.size(run.Scope)
		mark := pp.prep.mark()
		sl := pp.prep.nextSlice(n)
		if sl.makesCurrent(run) {
			// No slice makes the scope CURRENT over a deferred key.
			if err := s.flushDeferred(ctx, l, run, sl, &total); err != nil {
				return total, err
			}
		}
		res, held, err := s.applySlice(ctx, l, run, sl)
		if err != nil && sl.spans && !pp.prep.bounded && refusesContent(err) {
			// A slice across merged pages was refused: cut it again page
			// by page, so the pages before the one refused commit and the
			// cursor stops where applying the pages one by one stops it
			// (page_merge.go).
			pp.prep.rewind(mark)
			pp.prep.bounded = true
			continue
		}
		if err != nil {
			return total, err
		}
		s.slices.observe(run.Scope, n, sliceObservation{events: sl.applied, held: held, newer: res.NewerLegs, waited: res.LockWaited})
		total = total.plus(res)
		total.LockHeld = append(total.LockHeld, held)
	}
	return total, nil
}

// applySlice runs one slice's transaction and its after-commit work. held is
// how long the slice held the projection write lock (granted to committed).
// The first attempt skips the probes that can only find a refusal; when it
// skipped one and was refused or collided on a key, the slice runs again with
// every probe, which names the refusal (page_unprobed.go).
func (s *Store) applySlice(ctx context.Context, l Lease, run Run, p *prepared) (PageResult, time.Duration, error) {
	res, held, skipped, err := s.attemptSlice(ctx, l, run, p, s.hooks.probeAll)
	if reprobe(skipped, err) {
		res, held, _, err = s.attemptSlice(ctx, l, run, p, true)
	}
	return res, held, err
}

// attemptSlice is one attempt at a slice (applySlice); skipped reports that
// it failed before COMMIT having skipped a probe.
func (s *Store) attemptSlice(ctx context.Context, l Lease, run Run, p *prepared, probeAll bool) (_ PageResult, held time.Duration, skipped bool, _ error) {
	// READ COMMITTED, whatever the database's default: every statement after
	// the key locks must see what the live projector committed before they
	// were granted. Under REPEATABLE READ the snapshot would date from the
	// transaction's first statement (the temporary-table COPY, or the lock
	// request itself), and a live trade committed while the slice waited
	// would be invisible to its orphan and balance checks and to R1.
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return PageResult{}, 0, false, dbErr("store: begin page", err)
	}
	w := &pageTx{tx: tx, scope: run.Scope, p: p, probeAll: probeAll, currentProbes: s.hooks.currentProbes}
	res, points, locked, err := s.lockAndApply(ctx, w, l, run)
	if err != nil {
		_ = tx.Rollback(ctx) // a failed rollback closes the connection: the server rolls back
		return PageResult{}, 0, w.skipped, dbErr("store: apply page", err)
	}
	commit := tx.Commit
	if h := s.hooks.commit; h != nil {
		commit = func(ctx context.Context) error { return h(ctx, tx) }
	}
	if err := commit(ctx); err != nil {
		if !codes.DatabaseUnavailableError(err) {
			// The server answered COMMIT with an error: it rolled back.
			return PageResult{}, 0, false, dbErr("store: commit page", err)
		}
		// The connection failed while COMMIT was in flight: only the
		// cursor can tell whether the page committed (see resolveCommit).
		if err := s.resolveCommit(ctx, res, points, err); err != nil {
			return PageResult{}, 0, false, err
		}
	}
	held = time.Since(locked)
	if res.ChangedKeys > 0 && s.afterCommit != nil {
		s.afterCommit(run.Scope)
	}
	return res, held, false, nil
}

// lockAndApply fills the slice's temporary tables, takes the projection
// write lock and runs the slice (applyTx); locked is when the lock was
// granted. The temporary tables are session-private: nothing another
// transaction can see or change, so filling them needs no lock, and the lock
// is held only for what reads or writes the projection.
func (s *Store) lockAndApply(ctx context.Context, w *pageTx, l Lease, run Run) (PageResult, commitPoints, time.Time, error) {
	if err := w.load(ctx); err != nil {
		return PageResult{}, commitPoints{}, time.Time{}, err
	}
	accts, instrs := make([]string, len(w.p.lockKeys)), make([]string, len(w.p.lockKeys))
	for i, k := range w.p.lockKeys {
		accts[i], instrs[i] = k.account, k.instrument
	}
	ids, err := keyLocks(ctx, w.tx, run.Scope, accts, instrs)
	if err != nil {
		return PageResult{}, commitPoints{}, time.Time{}, err
	}
	w.lockIDs = ids
	locked := time.Now()
	res, points, err := s.applyTx(ctx, w, l, run)
	return res, points, locked, err
}

// applyTx runs the slice in w's transaction, which holds the projection
// write lock. Besides the result it returns the cursor's commit points before
// and after the slice, which resolveCommit compares with a re-read when the
// COMMIT's outcome is unknown.
func (s *Store) applyTx(ctx context.Context, w *pageTx, l Lease, run Run) (PageResult, commitPoints, error) {
	tx, p, scope := w.tx, w.p, run.Scope
	if h := s.hooks.beforeLeaseLock; h != nil {
		if err := h(ctx, tx); err != nil {
			return PageResult{}, commitPoints{}, err
		}
	}
	if err := lockLease(ctx, tx, l); err != nil {
		return PageResult{}, commitPoints{}, err
	}
	if h := s.hooks.afterLeaseLocked; h != nil {
		if err := h(ctx, tx); err != nil {
			return PageResult{}, commitPoints{}, err
		}
	}
	// The run is read here to refuse early, and again, FOR SHARE, just
	// before the cursor moves (sameRun): see there why not FOR SHARE here.
	if err := sameRun(ctx, tx, run, false); err != nil {
		return PageResult{}, commitPoints{}, err
	}
	if h := s.hooks.afterRunRead; h != nil {
		if err := h(ctx, tx); err != nil {
			return PageResult{}, commitPoints{}, err
		}
	}

	cur, err := cursorForUpdate(ctx, tx, scope)
	if err != nil {
		return PageResult{}, commitPoints{}, dbErr("store: re-read cursor", err)
	}
	pg := p.page
	switch {
	case cur.DescriptorHash != "" && cur.DescriptorHash != pg.DescriptorHash:
		return PageResult{}, commitPoints{}, refuse(codes.DescriptorMismatch, "cursor descriptor %s, page %s", cur.DescriptorHash, pg.DescriptorHash)
	case cur.ProtocolVersion != 0 && cur.ProtocolVersion != pg.ProtocolVersion:
		return PageResult{}, commitPoints{}, refuse(codes.ProtocolMismatch, "cursor protocol %d, page %d", cur.ProtocolVersion, pg.ProtocolVersion)
	case p.after != cur.VerifiedThroughSeq:
		return PageResult{}, commitPoints{}, refuse(codes.CursorMoved, "page starts at %d, cursor is at %d", p.after, cur.VerifiedThroughSeq)
	case p.digestAfter != cur.ChainDigest:
		return PageResult{}, commitPoints{}, refuse(codes.ChainMismatch, "page digestAfter %s, cursor digest %s at seq %d", p.digestAfter, cur.ChainDigest, cur.VerifiedThroughSeq)
	}
	if cur.VerifiedThroughSeq == 0 {
		// FR-APR07 bootstrap: a cursor at genesis trusts nothing derived
		// before; drop any basis so every key is re-derived from its opening.
		if err := basisDeleteScope(ctx, tx, scope); err != nil {
			return PageResult{}, commitPoints{}, dbErr("store: reset basis", err)
		}
	}

	w.noDefer = s.hooks.foldAll || p.flush || p.makesCurrent(run)
	if err := w.checkLegacy(ctx); err != nil {
		return PageResult{}, commitPoints{}, err
	}
	if err := w.checkTrades(ctx); err != nil {
		return PageResult{}, commitPoints{}, err
	}
	if err := w.checkOrders(ctx); err != nil {
		return PageResult{}, commitPoints{}, err
	}
	// The write streams are encoded while derive reads and folds the keys
	// (encodeWrites); the buffers go back once the slice is done with them.
	ws := w.encodeWrites()
	defer ws.release()
	if err := w.derive(ctx); err != nil {
		return PageResult{}, commitPoints{}, err
	}
	if err := w.write(ctx, ws); err != nil {
		return PageResult{}, commitPoints{}, err
	}

	state := StateCatchingUp
	if p.through == pg.BoundarySeq || (run.Phase == PhaseDraining && p.through == *run.FrozenSeq) {
		state = StateCurrent
		// Before claiming completeness, no balance may exist that no page
		// ever explained (FR-APR07 "re-verifies every retained row"), and
		// every key must be re-derived from its retained trades (R1).
		if err := w.checkPhantomBalances(ctx); err != nil {
			return PageResult{}, commitPoints{}, err
		}
		if err := w.deferredLeft(ctx); err != nil {
			return PageResult{}, commitPoints{}, err
		}
	}
	res := PageResult{
		Scope: scope, AfterSeq: p.after, VerifiedThroughSeq: p.through, ChainDigest: p.digest,
		EventCount: cur.EventCount + int64(p.applied), BoundarySeq: pg.BoundarySeq, Applied: p.applied,
		InsertedTrades: w.inserted, OrderEvents: w.orderEvents, TouchedKeys: len(p.keys), ChangedKeys: w.changed, NewerLegs: w.newer,
		DeferredKeys: w.deferred, State: state,
	}
	if err := sameRun(ctx, tx, run, true); err != nil {
		return PageResult{}, commitPoints{}, err
	}
	// Compare-and-set on the cursor we read: if anything moved it, refuse.
	// RETURNING the new last_verified_at: with verified-through and digest it
	// is the commit point resolveCommit recognises (an idle page keeps both
	// and moves only this timestamp).
	// RETURNING also says whether a live write is waiting for the lock
	// now: the slice sizer keeps slices short only while someone waits.
	verifiedAt, lockWaited, err := cursorAdvance(ctx, tx, scope, cur, cursorStep{descriptorHash: pg.DescriptorHash,
		protocolVersion: pg.ProtocolVersion, through: res.VerifiedThroughSeq, digest: res.ChainDigest, eventCount: res.EventCount,
		boundary: pg.BoundarySeq, state: state}, w.lockIDs)
	res.LockWaited = lockWaited
	if errors.Is(err, pgx.ErrNoRows) {
		return PageResult{}, commitPoints{}, refuse(codes.CursorMoved, "cursor of %q moved during the page", scope)
	}
	if err != nil {
		return PageResult{}, commitPoints{}, dbErr("store: advance cursor", err)
	}
	if verifiedAt != nil {
		res.VerifiedAt = *verifiedAt
	}
	if h := s.hooks.beforeCommit; h != nil {
		if err := h(ctx, tx); err != nil {
			return PageResult{}, commitPoints{}, err
		}
	}
	return res, commitPoints{
		pre:  commitPoint{through: cur.VerifiedThroughSeq, digest: cur.ChainDigest, verifiedAt: cur.LastVerifiedAt},
		post: commitPoint{through: res.VerifiedThroughSeq, digest: res.ChainDigest, verifiedAt: verifiedAt},
	}, nil
}
