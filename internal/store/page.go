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

// ApplyPage verifies one fetched page and applies it (FR-APR06), in order:
//
//  1. prepare: decode, hash and order-check the whole page outside any transaction, cut into slices;
//  2. lockKeys: per slice, in ONE transaction (applyTx), the projection write lock of its keys;
//  3. lockLease: the lease row FOR UPDATE holds our owner and fence, unexpired (FR-APR08);
//  4. checkRun: the selected run is the one prepared against, else SUPERSEDED (FR-APR09);
//  5. checkCursor: the cursor stands at the slice's start; at genesis, bootstrap (FR-APR05/07);
//  6. checkRows: the retained rows the slice reaches are what the verified source says;
//  7. deriveAndWrite: balances explained, keys re-derived (R1), rows and outbox written (R2);
//  8. advanceCursor: compare-and-set on the cursor checkCursor read.
//
// A refusal or error rolls its slice back (a *codes.Refusal: that slice wrote
// nothing); the slices before it stay committed, each a verified step of the
// cursor (Committed, VerifiedThroughSeq). docs/design/page-transaction.md.
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
	w := &pageTx{tx: tx, scope: run.Scope, p: p, probeAll: probeAll, hooks: &s.hooks,
		noDefer: s.hooks.foldAll || p.flush || p.makesCurrent(run)}
	locked, err := w.lockKeys(ctx)
	var res PageResult
	var points commitPoints
	if err == nil {
		res, points, err = w.applyTx(ctx, l, run)
	}
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
