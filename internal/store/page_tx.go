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
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// pageTx is one page slice's transaction (applyTx) and what its steps found
// and wrote. Everything is set-based, never one statement per row: keys
// and derived positions go into temporary tables and each write is one
// statement over them; the retained trades and order rows are read by a range
// scan of the window and probes for the rest (page_trades_check.go) and
// compared in Go, and the missing ones are COPYed.
type pageTx struct {
	tx    pgx.Tx
	scope string
	p     *prepared

	existing      map[string]bool  // page trade ids already retained
	missingOrders []*wire.Order    // order versions to insert (COPY)
	orderRows     map[string]int64 // version of the current orders row of each page order id that has one
	lockIDs       []int64          // the key locks the slice holds (KeyLocks)
	rows          []posRow
	inserted      int64
	orderEvents   int64
	changed       int
	newer         int64  // retained legs newer than the page folded into its keys (R1)
	noDefer       bool   // every key is folded in full: a flush slice, or one that makes the scope CURRENT (deferred.go)
	deferred      int    // keys whose derivation the slice deferred (deferFold)
	probeAll      bool   // probe every page row the window did not show (page_unprobed.go)
	keysRead      bool   // unprobed read the catalog's keys for this slice
	skipped       bool   // a probe that could only have found a refusal was skipped
	hooks         *hooks // the store's test hooks (zero in production)
}

// applyTx runs ApplyPage's steps 3 to 8 in w's transaction, which holds the
// projection write lock of the slice's keys (step 2, lockKeys). Besides the
// result it returns the cursor's commit points before and after the slice,
// which resolveCommit compares with a re-read when the COMMIT's outcome is
// unknown. Any error leaves the transaction to be rolled back.
func (w *pageTx) applyTx(ctx context.Context, l Lease, run Run) (PageResult, commitPoints, error) {
	if err := w.lockLease(ctx, l); err != nil {
		return PageResult{}, commitPoints{}, err
	}
	if err := w.checkRun(ctx, run); err != nil {
		return PageResult{}, commitPoints{}, err
	}
	cur, err := w.checkCursor(ctx)
	if err != nil {
		return PageResult{}, commitPoints{}, err
	}
	if err := w.checkRows(ctx); err != nil {
		return PageResult{}, commitPoints{}, err
	}
	if err := w.deriveAndWrite(ctx); err != nil {
		return PageResult{}, commitPoints{}, err
	}
	res := w.result(run, cur)
	if res.Current() {
		if err := w.checkComplete(ctx); err != nil {
			return PageResult{}, commitPoints{}, err
		}
	}
	points, err := w.advanceCursor(ctx, run, cur, &res)
	if err != nil {
		return PageResult{}, commitPoints{}, err
	}
	return res, points, nil
}

// lockKeys is step 2: the slice's temporary tables are filled (loadKeys),
// then the projection write lock of its keys is taken (KeyLocks: the
// scope's lock shared, each key's exclusively), so no live write on those
// keys interleaves with what follows. locked is when the lock was granted.
func (w *pageTx) lockKeys(ctx context.Context) (locked time.Time, _ error) {
	if err := w.loadKeys(ctx); err != nil {
		return time.Time{}, err
	}
	accts, instrs := make([]string, len(w.p.lockKeys)), make([]string, len(w.p.lockKeys))
	for i, k := range w.p.lockKeys {
		accts[i], instrs[i] = k.account, k.instrument
	}
	ids, err := keyLocks(ctx, w.tx, w.scope, accts, instrs)
	if err != nil {
		return time.Time{}, err
	}
	w.lockIDs = ids
	return time.Now(), nil
}

// lockLease is step 3: the lease row re-read FOR UPDATE must hold our owner
// and fence, unexpired (FR-APR08); a takeover then waits for this COMMIT.
func (w *pageTx) lockLease(ctx context.Context, l Lease) error {
	if err := w.hooks.beforeLeaseLock.run(ctx, w.tx); err != nil {
		return err
	}
	if err := lockLease(ctx, w.tx, l); err != nil {
		return err
	}
	return w.hooks.afterLeaseLocked.run(ctx, w.tx)
}

// checkRun is step 4: the selected run, re-read without a row lock, must be
// the run the page was prepared against, else SUPERSEDED (FR-APR09). It is
// read again FOR SHARE as the last read before the cursor moves
// (advanceCursor): see sameRun for why not FOR SHARE here.
func (w *pageTx) checkRun(ctx context.Context, run Run) error {
	if err := sameRun(ctx, w.tx, run, false); err != nil {
		return err
	}
	return w.hooks.afterRunRead.run(ctx, w.tx)
}

// checkCursor is step 5: the cursor, read FOR UPDATE, must stand at the
// slice's after and digestAfter, with the page's descriptor and protocol
// (FR-APR05/07). A cursor at genesis bootstraps: it trusts nothing derived
// before, so every basis of the scope is dropped and every key re-derived
// from its opening (FR-APR07).
func (w *pageTx) checkCursor(ctx context.Context) (Cursor, error) {
	p, pg := w.p, w.p.page
	cur, err := cursorForUpdate(ctx, w.tx, w.scope)
	if err != nil {
		return Cursor{}, dbErr("store: re-read cursor", err)
	}
	switch {
	case cur.DescriptorHash != "" && cur.DescriptorHash != pg.DescriptorHash:
		return Cursor{}, refuse(codes.DescriptorMismatch, "cursor descriptor %s, page %s", cur.DescriptorHash, pg.DescriptorHash)
	case cur.ProtocolVersion != 0 && cur.ProtocolVersion != pg.ProtocolVersion:
		return Cursor{}, refuse(codes.ProtocolMismatch, "cursor protocol %d, page %d", cur.ProtocolVersion, pg.ProtocolVersion)
	case p.after != cur.VerifiedThroughSeq:
		return Cursor{}, refuse(codes.CursorMoved, "page starts at %d, cursor is at %d", p.after, cur.VerifiedThroughSeq)
	case p.digestAfter != cur.ChainDigest:
		return Cursor{}, refuse(codes.ChainMismatch, "page digestAfter %s, cursor digest %s at seq %d", p.digestAfter, cur.ChainDigest, cur.VerifiedThroughSeq)
	}
	if cur.VerifiedThroughSeq == 0 {
		if err := basisDeleteScope(ctx, w.tx, w.scope); err != nil {
			return Cursor{}, dbErr("store: reset basis", err)
		}
	}
	return cur, nil
}

// checkRows is step 6: the retained rows the slice's window and events
// reach must be what the verified source says (checkLegacy, checkTrades,
// checkOrders); the first refusal rolls the slice back.
func (w *pageTx) checkRows(ctx context.Context) error {
	if err := w.checkLegacy(ctx); err != nil {
		return err
	}
	if err := w.checkTrades(ctx); err != nil {
		return err
	}
	return w.checkOrders(ctx)
}

// deriveAndWrite is step 7: derive checks every touched key's opening and
// balance and re-derives it from all its retained trades (R1), while the
// write streams are encoded beside it (encodeWrites); write then inserts
// the missing trades and order versions, moves current order rows forward
// and writes positions, bases and outbox rows (R2).
func (w *pageTx) deriveAndWrite(ctx context.Context) error {
	ws := w.encodeWrites()
	defer ws.release()
	if err := w.derive(ctx); err != nil {
		return err
	}
	return w.write(ctx, ws)
}

// result is what the slice proves once written: CURRENT when it reaches the
// page's source boundary (or a DRAINING run's frozen seq), else CATCHING_UP.
func (w *pageTx) result(run Run, cur Cursor) PageResult {
	p, pg := w.p, w.p.page
	state := StateCatchingUp
	if p.makesCurrent(run) {
		state = StateCurrent
	}
	return PageResult{
		Scope: w.scope, AfterSeq: p.after, VerifiedThroughSeq: p.through, ChainDigest: p.digest,
		EventCount: cur.EventCount + int64(p.applied), BoundarySeq: pg.BoundarySeq, Applied: p.applied,
		InsertedTrades: w.inserted, OrderEvents: w.orderEvents, TouchedKeys: len(p.keys), ChangedKeys: w.changed, NewerLegs: w.newer,
		DeferredKeys: w.deferred, State: state,
	}
}

// checkComplete runs, in step 7, only in a slice that makes the scope
// CURRENT: before completeness is claimed no balance may exist that no page
// ever explained (checkPhantomBalances, FR-APR07 "re-verifies every
// retained row") and every key must be re-derived from its retained trades
// (deferredLeft, R1).
func (w *pageTx) checkComplete(ctx context.Context) error {
	if err := w.checkPhantomBalances(ctx); err != nil {
		return err
	}
	return w.deferredLeft(ctx)
}

// advanceCursor is step 8: the run is re-read FOR SHARE (sameRun), then the
// cursor moves by compare-and-set on the verified-through, digest and
// boundary checkCursor read (cursorAdvance); anything that moved it refuses
// CURSOR_MOVED. It fills res's VerifiedAt and LockWaited.
func (w *pageTx) advanceCursor(ctx context.Context, run Run, cur Cursor, res *PageResult) (commitPoints, error) {
	if err := sameRun(ctx, w.tx, run, true); err != nil {
		return commitPoints{}, err
	}
	pg := w.p.page
	verifiedAt, lockWaited, err := cursorAdvance(ctx, w.tx, w.scope, cur, cursorStep{descriptorHash: pg.DescriptorHash,
		protocolVersion: pg.ProtocolVersion, through: res.VerifiedThroughSeq, digest: res.ChainDigest, eventCount: res.EventCount,
		boundary: pg.BoundarySeq, state: res.State}, w.lockIDs)
	if errors.Is(err, pgx.ErrNoRows) {
		return commitPoints{}, refuse(codes.CursorMoved, "cursor of %q moved during the page", w.scope)
	}
	if err != nil {
		return commitPoints{}, dbErr("store: advance cursor", err)
	}
	res.LockWaited = lockWaited
	if verifiedAt != nil {
		res.VerifiedAt = *verifiedAt
	}
	if err := w.hooks.beforeCommit.run(ctx, w.tx); err != nil {
		return commitPoints{}, err
	}
	return commitPoints{
		pre:  commitPoint{through: cur.VerifiedThroughSeq, digest: cur.ChainDigest, verifiedAt: cur.LastVerifiedAt},
		post: commitPoint{through: res.VerifiedThroughSeq, digest: res.ChainDigest, verifiedAt: verifiedAt},
	}, nil
}

// tempTables are created once per connection and emptied at every commit
// (ON COMMIT DELETE ROWS; a rollback discards their rows anyway), so a page
// pays no catalog churn for them. The same script forces custom plans (a
// generic plan ignores the window bounds and scans the scope per slice) and
// turns JIT off (never-analyzed temporary tables cross jit_above_cost and
// compiling costs far more than the statements): docs/design/page-transaction.md,
// "Planner and driver guards".
const tempTables = `
CREATE TEMP TABLE IF NOT EXISTS page_keys (account text, instrument text) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS page_positions (account text, instrument text, quantity numeric, avg_cost numeric,
    opening_quantity numeric, opening_avg_cost numeric, opening_proven boolean, opening_seq bigint,
    basis_quantity numeric, basis_avg_cost numeric, changed boolean, deferred boolean) ON COMMIT DELETE ROWS;
SET LOCAL plan_cache_mode = force_custom_plan;
SET LOCAL jit = off;`

// copyPagePositionsSQL streams a slice's derived positions into
// page_positions, its columns in the order copyPagePositions writes them.
const copyPagePositionsSQL = `COPY page_positions (account, instrument, quantity, avg_cost, opening_quantity, opening_avg_cost,
    opening_proven, opening_seq, basis_quantity, basis_avg_cost, changed, deferred) FROM STDIN (FORMAT binary)`

// loadKeys fills the slice's session-private temporary tables (tempTables,
// page_keys) before any lock: nothing another transaction sees.
func (w *pageTx) loadKeys(ctx context.Context) error {
	if _, err := w.tx.Exec(ctx, tempTables, pgx.QueryExecModeSimpleProtocol); err != nil {
		return dbErr("store: temp tables", err)
	}
	accts := make([]string, len(w.p.keys))
	instrs := make([]string, len(w.p.keys))
	for i, k := range w.p.keys {
		accts[i], instrs[i] = k.account, k.instrument
	}
	if _, err := w.tx.Exec(ctx, `INSERT INTO page_keys SELECT * FROM unnest($1::text[], $2::text[])`, accts, instrs); err != nil {
		return dbErr("store: page keys", err)
	}
	// No ANALYZE: the planner sizes never-analyzed temp tables from their
	// actual block count, and the queries over them are shaped (LATERAL per
	// key) so that index probes win regardless.
	return nil
}

// checkLegacy refuses a scope holding rows without consensus provenance
// (seq NULL): they can be neither verified nor placed in authoritative order,
// so no cursor may claim completeness over them (UNKNOWN_LEGACY_HISTORY).
func (w *pageTx) checkLegacy(ctx context.Context) error {
	var t, e, o bool
	err := w.tx.QueryRow(ctx, legacyRowsSQL, w.scope).Scan(&t, &e, &o)
	if err != nil {
		return dbErr("store: legacy check", err)
	}
	if t || e || o {
		return refuse(codes.UnknownLegacyHistory, "scope %q has rows without consensus provenance (trades %v, order_events %v, orders %v)", w.scope, t, e, o)
	}
	return nil
}
