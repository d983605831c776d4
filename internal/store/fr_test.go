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
	"strings"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/codes"

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/reference/enginetest"
	. "github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// FR-APR05: a high projection_runs.checkpoint_seq (maximum observed sequence)
// never makes a scope CURRENT; only the verified cursor does, and it starts
// at genesis.
func TestFRAPR05_CheckpointSeqIsNeverCompleteness(t *testing.T) {
	f := setup(t)
	mustExec(t, f.s, `UPDATE projection_runs SET checkpoint_seq = 1000000`)
	run, _ := f.s.SelectedRun(ctxb, "s")
	c, err := f.s.ReadCursor(ctxb, "s")
	if err != nil || c.Exists || c.VerifiedThroughSeq != 0 || c.ChainDigest != chain.Genesis || c.State != StateCatchingUp {
		t.Fatalf("absent cursor must read as genesis, got %+v %v", c, err)
	}
	// A page starting at checkpoint_seq is not accepted.
	refused(t, f.s, f.l, run, f.src.Page(3, 100), codes.CursorMoved)
	res, err := f.s.ApplyPage(ctxb, f.l, run, f.src.Page(0, 3))
	if err != nil {
		t.Fatal(err)
	}
	if res.State != StateCatchingUp || res.VerifiedThroughSeq != 2 {
		t.Fatalf("after a partial page: %+v", res)
	}
	c, _ = f.s.ReadCursor(ctxb, "s")
	if c.State != StateCatchingUp || c.VerifiedThroughSeq != 2 || c.DescriptorHash != Descriptor || c.ProtocolVersion != 1 ||
		c.EventCount != 3 || c.LastObservedBoundarySeq != 4 || c.ChainDigest != f.src.DigestThrough(2) || c.LastVerifiedAt == nil {
		t.Fatalf("cursor %+v", c)
	}
	res = catchUp(t, f.s, f.l, run, f.src, 100)
	if res.State != StateCurrent || res.VerifiedThroughSeq != 4 {
		t.Fatalf("%+v", res)
	}
}

// FR-APR05: RecordOutcome is fenced, keeps the verified-through and digest,
// and never moves the observed boundary backwards.
func TestFRAPR05_RecordOutcome(t *testing.T) {
	f := setup(t)
	catchUp(t, f.s, f.l, f.run, f.src, 2)
	if err := f.s.RecordOutcome(ctxb, f.l, "s", StateBlocked, codes.OrphanTrade, 1); err != nil {
		t.Fatal(err)
	}
	c, _ := f.s.ReadCursor(ctxb, "s")
	if c.State != StateBlocked || c.BlockedReason != string(codes.OrphanTrade) || c.VerifiedThroughSeq != 4 || c.LastObservedBoundarySeq != 4 {
		t.Fatalf("%+v", c)
	}
	if err := f.s.RecordOutcome(ctxb, f.l, "s", StateCurrent, "", 9); err != nil {
		t.Fatal(err)
	}
	c, _ = f.s.ReadCursor(ctxb, "s")
	if c.State != StateCurrent || c.BlockedReason != "" || c.LastObservedBoundarySeq != 9 {
		t.Fatalf("%+v", c)
	}
}

// FR-APR07: a new cursor starts at genesis and re-verifies every retained row;
// an explicit-recovery checkpoint on the run is not a starting point.
func TestFRAPR07_NewCursorReverifiesEveryRetainedRow(t *testing.T) {
	f := setup(t)
	mustExec(t, f.s, `UPDATE projection_runs SET recovery_checkpoint_seq = 4, recovery_checkpoint_digest = $1,
    recovery_checkpoint_descriptor_hash = $2, recovery_checkpoint_protocol_version = 1`, f.src.DigestThrough(4), Descriptor)
	run, _ := f.s.SelectedRun(ctxb, "s")
	// An old orphan far below the checkpoint: only a genesis re-verification finds it.
	seedTrade(t, f.s, "s", Trade(1, 99, "old-orphan", "ACME", "1", "1", "X", "Y"), i64(1), "BOOKED")
	refused(t, f.s, f.l, run, f.src.Page(4, 100), codes.CursorMoved) // no starting at the checkpoint
	refused(t, f.s, f.l, run, f.src.Page(0, 100), codes.OrphanTrade)
}

// FR-APR07: a matching checkpoint is only an identity cross-check: catch-up
// still runs from genesis and passes.
func TestFRAPR07_ExplicitCheckpointIsIdentityCrossCheck(t *testing.T) {
	f := setup(t)
	mustExec(t, f.s, `UPDATE projection_runs SET recovery_checkpoint_seq = 2, recovery_checkpoint_digest = $1,
    recovery_checkpoint_descriptor_hash = $2, recovery_checkpoint_protocol_version = 1`, f.src.DigestThrough(2), Descriptor)
	run, _ := f.s.SelectedRun(ctxb, "s")
	res := catchUp(t, f.s, f.l, run, f.src, 2)
	if res.VerifiedThroughSeq != 4 {
		t.Fatalf("%+v", res)
	}
	AssertPositions(t, f.s.pool, "s", f.src.Decoded)
}

// FR-APR07: a cursor verified against one descriptor or protocol refuses a
// page of another, even if the run now names it.
func TestFRAPR07_DifferentDescriptorOrProtocolRefuses(t *testing.T) {
	f := setup(t)
	catchUp(t, f.s, f.l, f.run, f.src, 100)
	other := strings.Repeat("f", 64)
	mustExec(t, f.s, `UPDATE projection_runs SET selected = false`)
	mustExec(t, f.s, `INSERT INTO projection_runs (scope, selected, phase, descriptor_hash, protocol_version) VALUES ('s', true, 'ACTIVE', $1, 1)`, other)
	run, _ := f.s.SelectedRun(ctxb, "s")
	p := f.src.Page(4, 100)
	p.DescriptorHash = other
	refused(t, f.s, f.l, run, p, codes.DescriptorMismatch)

	mustExec(t, f.s, `UPDATE projection_catchup_cursor SET protocol_version = 2`)
	refused(t, f.s, f.l, f.run, f.src.Page(4, 100), codes.Superseded) // the old run is no longer selected
	mustExec(t, f.s, `DELETE FROM projection_runs WHERE descriptor_hash = $1`, other)
	mustExec(t, f.s, `UPDATE projection_runs SET selected = true`)
	run, _ = f.s.SelectedRun(ctxb, "s")
	refused(t, f.s, f.l, run, f.src.Page(4, 100), codes.ProtocolMismatch)
}

// FR-APR07: deleting the cursor (operator reset) re-verifies from genesis and
// rebuilds the basis; the result is the same projection and, since no key
// changes, no notification.
func TestFRAPR07_ResetCursorRebootstraps(t *testing.T) {
	f := setup(t)
	src := enginetest.Ledger(t, 3, 300, 4)
	catchUp(t, f.s, f.l, f.run, src, 40)
	mustExec(t, f.s, `DELETE FROM projection_catchup_outbox`)
	mustExec(t, f.s, `DELETE FROM projection_catchup_cursor`)
	mustExec(t, f.s, `UPDATE projection_catchup_basis SET quantity = 12345`) // must not be trusted
	catchUp(t, f.s, f.l, f.run, src, 40)
	AssertPositions(t, f.s.pool, "s", src.Decoded)
	if n := len(outbox(t, f.s)); n != 0 {
		t.Fatalf("re-bootstrap changed %d keys", n)
	}
}

// FR-APR08 (deterministic interleaving on two connections): a replaced
// owner's in-flight page cannot commit. Owner a's page holds the projection
// lock but has not locked the lease row yet when a's lease expires and b
// takes over (fence+1); a's page then fails its fence check and writes nothing.
func TestFRAPR08_ReplacedOwnerCannotCommit(t *testing.T) {
	f := setup(t)
	la, err := f.s.AcquireLease(ctxb, "s", "a", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var lb Lease
	before := snapshot(t, f.s)
	f.s.hooks.beforeLeaseLock = func(ctx context.Context, _ pgx.Tx) error {
		time.Sleep(time.Until(la.ExpiresAt) + 50*time.Millisecond)
		var err error
		lb, err = f.s.AcquireLease(ctx, "s", "b", time.Minute) // another connection of the pool
		return err
	}
	_, err = f.s.ApplyPage(ctxb, la, f.run, f.page())
	wantCode(t, err, codes.LeaseLost)
	if lb.Fence != la.Fence+1 || lb.Owner != "b" {
		t.Fatalf("takeover lease %+v after %+v", lb, la)
	}
	if snapshot(t, f.s) != before {
		t.Fatal("replaced owner wrote")
	}
	f.s.hooks.beforeLeaseLock = nil
	if _, err := f.s.ApplyPage(ctxb, lb, f.run, f.page()); err != nil {
		t.Fatalf("new owner: %v", err)
	}
}

// FR-APR08: a takeover waits for the in-flight page. Owner a's page has locked
// the lease row; a's lease then expires and b tries to take over on another
// connection: b blocks on the row lock (observed in pg_stat_activity) until
// a's page commits, and only then gets fence+1. a's next page is refused.
func TestFRAPR08_TakeoverWaitsForInFlightPage(t *testing.T) {
	f := setup(t)
	la, err := f.s.AcquireLease(ctxb, "s", "a", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   Lease
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	var pageCommittedBefore time.Time
	f.s.hooks.afterLeaseLocked = func(ctx context.Context, _ pgx.Tx) error {
		time.Sleep(time.Until(la.ExpiresAt) + 50*time.Millisecond) // a's lease is now expired
		go func() {
			l, err := f.s.AcquireLease(context.Background(), "s", "b", time.Minute)
			done <- result{l, err, time.Now()}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for {
			var waiting bool
			if err := f.s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
  WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO projection_catchup_lease%')`).Scan(&waiting); err != nil {
				return err
			}
			if waiting {
				break
			}
			select {
			case r := <-done:
				t.Errorf("takeover did not wait for the in-flight page: %+v", r)
				return nil
			default:
			}
			if time.Now().After(deadline) {
				t.Error("takeover never blocked")
				return nil
			}
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	}
	f.s.hooks.beforeCommit = func(context.Context, pgx.Tx) error { pageCommittedBefore = time.Now(); return nil }
	res, err := f.s.ApplyPage(ctxb, la, f.run, f.page())
	if err != nil {
		t.Fatalf("in-flight page holding the lease row must commit: %v", err)
	}
	r := <-done
	if r.err != nil || r.l.Fence != la.Fence+1 || r.at.Before(pageCommittedBefore) {
		t.Fatalf("takeover %+v (page committed at %v)", r, pageCommittedBefore)
	}
	if res.VerifiedThroughSeq != 4 {
		t.Fatalf("%+v", res)
	}
	f.s.hooks = hooks{}
	refused(t, f.s, la, f.run, f.src.Page(4, 100), codes.LeaseLost)
	if _, err := f.s.ApplyPage(ctxb, r.l, f.run, f.src.Page(4, 100)); err != nil {
		t.Fatal(err)
	}
}

// FR-APR08: acquire/renew/release semantics and the fence counter.
func TestFRAPR08_LeaseFence(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a1, err := s.AcquireLease(ctxb, "s", "a", time.Minute)
	if err != nil || a1.Fence != 1 {
		t.Fatalf("%+v %v", a1, err)
	}
	a2, err := s.AcquireLease(ctxb, "s", "a", time.Minute) // same owner, unexpired: same fence
	if err != nil || a2.Fence != 1 {
		t.Fatalf("%+v %v", a2, err)
	}
	if a3, err := s.RenewLease(ctxb, a2, 2*time.Minute); err != nil || !a3.ExpiresAt.After(a2.ExpiresAt) {
		t.Fatalf("%+v %v", a3, err)
	}
	if err := s.ReleaseLease(ctxb, a2); err != nil {
		t.Fatal(err)
	}
	a4, err := s.AcquireLease(ctxb, "s", "a", time.Minute) // same owner after expiry: new fence
	if err != nil || a4.Fence != 2 {
		t.Fatalf("%+v %v", a4, err)
	}
	if _, err := s.AcquireLease(ctxb, "s2", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseAll(ctxb, "a"); err != nil {
		t.Fatal(err)
	}
	b, err := s.AcquireLease(ctxb, "s", "b", time.Minute) // new owner: new fence
	if err != nil || b.Fence != 3 {
		t.Fatalf("%+v %v", b, err)
	}
	if b2, err := s.AcquireLease(ctxb, "s2", "b", time.Minute); err != nil || b2.Fence != 2 {
		t.Fatalf("%+v %v", b2, err)
	}
	// A manager's per-namespace identities (owner/<namespace>) go with it at
	// shutdown; another owner whose name merely starts the same stays.
	for scope, owner := range map[string]string{"s3": "m/ns-a", "s4": "m/ns-b", "s5": "mm/ns-a"} {
		if _, err := s.AcquireLease(ctxb, scope, owner, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ReleaseAll(ctxb, "m"); err != nil {
		t.Fatal(err)
	}
	for scope, freed := range map[string]bool{"s3": true, "s4": true, "s5": false} {
		_, err := s.AcquireLease(ctxb, scope, "c", time.Minute)
		if (err == nil) != freed {
			t.Fatalf("after ReleaseAll(m), a new owner of %s: %v; want released %t", scope, err, freed)
		}
	}
}

// FR-APR09: a DRAINING scope is caught up only to its frozen sequence: later
// events are hashed (the page must still be authentic) but never applied.
func TestFRAPR09_DrainingCaughtUpOnlyToFrozenSeq(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	run := addRun(t, s, "s", PhaseDraining, i64(2))
	l := lease(t, s, "s", "a")
	src := baseLedger(t)
	res, err := s.ApplyPage(ctxb, l, run, src.Page(0, 100))
	if err != nil {
		t.Fatal(err)
	}
	if res.VerifiedThroughSeq != 2 || res.State != StateCurrent || res.ChainDigest != src.DigestThrough(2) || res.Applied != 3 {
		t.Fatalf("%+v", res)
	}
	var n int
	s.pool.QueryRow(ctxb, `SELECT count(*) FROM trades WHERE trade_id = 't2'`).Scan(&n)
	if n != 0 {
		t.Fatal("a trade after frozen_seq was applied")
	}
	AssertPositions(t, s.pool, "s", src.Decoded[:3])
}

// FR-APR09: the worker reads runs and never writes them.
func TestFRAPR09_RunsAreNeverWritten(t *testing.T) {
	f := setup(t)
	var before, after string
	q := `SELECT string_agg(r::text, '|') FROM projection_runs r`
	f.s.pool.QueryRow(ctxb, q).Scan(&before)
	catchUp(t, f.s, f.l, f.run, f.src, 2)
	f.s.pool.QueryRow(ctxb, q).Scan(&after)
	if before != after {
		t.Fatalf("runs changed:\n%s\n%s", before, after)
	}
}

// FR-APR06: order versions are persisted without rewinding a newer version
// the live feed already wrote (beyond the page).
func TestFRAPR06_OrderVersionsNeverRewound(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	run := addRun(t, s, "s", PhaseActive, nil)
	l := lease(t, s, "s", "a")
	v1 := Order(2, "o1", 1, "A", "ACME", wire.SideBuy, "10", "5", "5", wire.StatusNew)
	v2 := Order(5, "o1", 2, "A", "ACME", wire.SideBuy, "10", "5", "0", wire.StatusCancelled)
	src := NewLedger(t, 5, v1, v2)
	seedOrder(t, s, "s", v2, i64(5)) // live got v2, lost v1
	if _, err := s.ApplyPage(ctxb, l, run, src.Page(0, 1)); err != nil {
		t.Fatal(err)
	}
	var version int64
	var n int
	s.pool.QueryRow(ctxb, `SELECT version FROM orders WHERE order_id = 'o1'`).Scan(&version)
	s.pool.QueryRow(ctxb, `SELECT count(*) FROM order_events WHERE order_id = 'o1'`).Scan(&n)
	if version != 2 || n != 2 {
		t.Fatalf("orders at v%d, %d versions", version, n)
	}
	if _, err := s.ApplyPage(ctxb, l, run, src.Page(4, 10)); err != nil {
		t.Fatal(err)
	}
}

// FR-APR06: a page moves each order's current row forward to the latest
// version of its window and never back: created when missing (COPY),
// updated from an older version, left alone at the same or a newer one.
// Every retained row is whatever the source says at that version.
func TestFRAPR06_CurrentOrderRowMovesForwardOnly(t *testing.T) {
	t.Parallel()
	v1 := Order(2, "o1", 1, "A", "ACME", wire.SideBuy, "10", "5", "5", wire.StatusNew)
	v2 := Order(3, "o1", 2, "A", "ACME", wire.SideBuy, "10", "5", "2", wire.StatusPartiallyFilled)
	v3 := Order(6, "o1", 3, "A", "ACME", wire.SideBuy, "10", "5", "0", wire.StatusCancelled)
	other := Order(4, "o2", 1, "B", "ACME", wire.SideSell, "11", "1", "1", wire.StatusNew)
	for _, tc := range []struct {
		name string
		seed []wire.Event // retained in order_events and orders, in this order
		want int64        // o1's current version after the page (0, 4]
	}{
		{name: "no current row", want: 2},
		{name: "older current row", seed: []wire.Event{v1}, want: 2},
		{name: "same version", seed: []wire.Event{v1, v2}, want: 2},
		{name: "newer version from the live feed", seed: []wire.Event{v3}, want: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			run := addRun(t, s, "s", PhaseActive, nil)
			l := lease(t, s, "s", "a")
			src := NewLedger(t, 6, v1, v2, other, v3)
			for _, e := range tc.seed {
				mustExec(t, s, `DELETE FROM orders WHERE scope = 's' AND order_id = $1`, e.Order.OrderID) // one current row per order
				seedOrder(t, s, "s", e, i64(e.Order.Seq))
			}
			if _, err := s.ApplyPage(ctxb, l, run, src.Page(0, 3)); err != nil {
				t.Fatal(err)
			}
			want := map[string]wire.Event{"o1": map[int64]wire.Event{2: v2, 3: v3}[tc.want], "o2": other}
			for id, e := range want {
				var got wire.Order
				var side, status string
				err := s.pool.QueryRow(ctxb, `SELECT version, seq, account, instrument, side, price, quantity, remaining, status, ts
  FROM orders WHERE scope = 's' AND order_id = $1`, id).Scan(&got.Version, &got.Seq, &got.Account, &got.Instrument, &side,
					&got.Price, &got.Quantity, &got.Remaining, &status, &got.TS)
				if err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				if got.Version != e.Order.Version || got.Seq != e.Order.Seq || !sameOrder(&got, wire.Side(side), wire.OrderStatus(status), e.Order) {
					t.Errorf("%s: current row v%d at seq %d (%+v), want the source's v%d at seq %d", id, got.Version, got.Seq, got, e.Order.Version, e.Order.Seq)
				}
			}
			var versions int
			s.pool.QueryRow(ctxb, `SELECT count(*) FROM order_events WHERE scope = 's' AND order_id = 'o1' AND seq <= 4`).Scan(&versions)
			if versions != 2 {
				t.Fatalf("o1 has %d versions in the window, want 2", versions)
			}
		})
	}
}

// FR-APR04/05: an idle page (afterSeq == boundary) re-verifies identity and
// chain, refreshes the observed boundary and last verification, writes no data.
func TestFRAPR05_IdlePageRefreshesVerification(t *testing.T) {
	f := setup(t)
	catchUp(t, f.s, f.l, f.run, f.src, 100)
	c1, _ := f.s.ReadCursor(ctxb, "s")
	res, err := f.s.ApplyPage(ctxb, f.l, f.run, f.src.Page(4, 100))
	if err != nil || res.State != StateCurrent || res.Applied != 0 || res.ChangedKeys != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	c2, _ := f.s.ReadCursor(ctxb, "s")
	if c2.VerifiedThroughSeq != 4 || c2.ChainDigest != c1.ChainDigest || !c2.LastVerifiedAt.After(*c1.LastVerifiedAt) {
		t.Fatalf("%+v", c2)
	}
}

// A shutdown (cancelled context) mid-page is transient, never BLOCKED.
func TestStore_CancelledContextIsTransient(t *testing.T) {
	f := setup(t)
	ctx, cancel := context.WithCancel(ctxb)
	cancel()
	_, err := f.s.ApplyPage(ctx, f.l, f.run, f.page())
	if c := codes.Of(err); !c.Transient() {
		t.Fatalf("cancelled page: %s (%v)", c, err)
	}
}

// A scheduled dry run waits while a catch-up is under way in its database
// (recon.ScheduledWait): a CATCHING_UP cursor moved recently is one, a
// CURRENT one or a CATCHING_UP one nobody moved for longer is not.
func TestCursorCatchingUp(t *testing.T) {
	f := setup(t)
	got := func(within time.Duration) string {
		t.Helper()
		s, err := CursorCatchingUp(ctxb, f.s.pool, within)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("no cursor yet", func(t *testing.T) {
		if s := got(time.Minute); s != "" {
			t.Fatalf("no cursor: %q", s)
		}
	})
	if _, err := f.s.ApplyPage(ctxb, f.l, f.run, f.src.Page(0, 3)); err != nil {
		t.Fatal(err)
	}
	t.Run("a page short of the boundary", func(t *testing.T) {
		if s := got(time.Minute); s != "s" {
			t.Fatalf("catching up: %q", s)
		}
	})
	t.Run("not moved within the window", func(t *testing.T) {
		mustExec(t, f.s, `UPDATE projection_catchup_cursor SET updated_at = clock_timestamp() - interval '3 minutes'`)
		if s := got(2 * time.Minute); s != "" {
			t.Fatalf("stale cursor counted: %q", s)
		}
		if s := got(5 * time.Minute); s != "s" {
			t.Fatalf("within 5 minutes: %q", s)
		}
	})
	t.Run("current", func(t *testing.T) {
		catchUp(t, f.s, f.l, f.run, f.src, 100)
		if s := got(time.Minute); s != "" {
			t.Fatalf("current cursor counted: %q", s)
		}
	})
}
