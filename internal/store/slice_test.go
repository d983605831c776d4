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
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

func TestNextSliceSize(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name        string
		cur, events int
		held        time.Duration
		want        int
	}{
		{"on budget stays", 1000, 1000, 20 * ms, 1000},
		{"twice the budget: down to half at once", 1000, 1000, 40 * ms, 500},
		{"a whole page far over the budget: straight to the budget's size", 10_000, 10_000, 150 * ms, 1333},
		{"half the budget: halfway up to double", 1000, 1000, 10 * ms, 1500},
		{"a slice extended past its size to end a command counts its events", 100, 300, 20 * ms, 200},
		{"no measurable hold: halfway up to double", 400, 400, 0, 600},
		{"never below the floor", 60, 60, 2 * time.Second, minSliceEvents},
		{"never above the longest slice (merged pages)", 9000, 9000, ms, maxSliceEvents},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextSliceSize(tc.cur, tc.events, tc.held, 20*ms); got != tc.want {
				t.Fatalf("nextSliceSize(%d, %d, %v) = %d, want %d", tc.cur, tc.events, tc.held, got, tc.want)
			}
		})
	}
}

func TestQuietGrowth(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cur, quiet int
		want       int
	}{
		{"doubles", 250, quietSlices, 500},
		{"up to a page's worth while the quiet run is short", 8000, quietSlicesBeyondPage - 1, wholeSliceEvents},
		{"a page's worth stays a page's worth while the quiet run is short", wholeSliceEvents, quietSlicesBeyondPage - 1, wholeSliceEvents},
		{"past a page's worth after a long quiet run", wholeSliceEvents, quietSlicesBeyondPage, 2 * wholeSliceEvents},
		{"never past a merged unit", 30_000, 40, maxSliceEvents},
		{"never below the size reached", maxSliceEvents, quietSlices, maxSliceEvents},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quietGrowth(tc.cur, tc.quiet); got != tc.want {
				t.Fatalf("quietGrowth(%d, %d) = %d, want %d", tc.cur, tc.quiet, got, tc.want)
			}
		})
	}
}

func TestSliceSizer(t *testing.T) {
	ms := time.Millisecond
	waited := func(events int, held time.Duration) sliceObservation {
		return sliceObservation{events: events, held: held, waited: true}
	}
	t.Run("while live writes wait, sized to the budget, per scope", func(t *testing.T) {
		var z sliceSizer
		if got := z.size("a"); got != firstSliceEvents {
			t.Fatalf("first size %d", got)
		}
		z.observe("a", 250, waited(250, 5*ms)) // 4x under the default budget
		if got, other := z.size("a"), z.size("b"); got != (250+1000)/2 || other != firstSliceEvents {
			t.Fatalf("after a fast slice: a %d, b %d", got, other)
		}
	})
	t.Run("while nobody waits, slices grow to whole pages; a waiter brings them down at once", func(t *testing.T) {
		var z sliceSizer
		quiet := func(n int) {
			z.observe("a", n, sliceObservation{events: n, held: time.Duration(n) * 40 * time.Microsecond})
		}
		n := z.size("a")
		for i := 1; i < quietSlices; i++ {
			quiet(n)
		}
		if got := z.size("a"); got != firstSliceEvents {
			t.Fatalf("grew to %d after %d quiet slices, want only after %d in a row", got, quietSlices-1, quietSlices)
		}
		z.observe("a", n, waited(n, 20*ms)) // a waiter resets the count
		for i := 1; i < quietSlices; i++ {
			quiet(n)
		}
		if got := z.size("a"); got != n {
			t.Fatalf("grew to %d though a waiter broke the quiet run", got)
		}
		for i := 0; i < 20; i++ {
			quiet(n)
			n = z.size("a")
		}
		if n != maxSliceEvents {
			t.Fatalf("uncontended size %d, want %d", n, maxSliceEvents)
		}
		z.observe("a", n, waited(n, 400*ms))
		if got, want := z.size("a"), maxSliceEvents/20; got != want {
			t.Fatalf("after a waiter behind a 400 ms slice: %d, want %d (the budget's share)", got, want)
		}
	})
	t.Run("a page's short tail slice teaches nothing", func(t *testing.T) {
		var z sliceSizer
		z.observe("a", 250, waited(12, 5*ms))
		if got := z.size("a"); got != firstSliceEvents {
			t.Fatalf("size %d after a tail slice", got)
		}
	})
	t.Run("a scope whose slices re-fold far more newer trades than they hold commits a page's worth per slice until it no longer does", func(t *testing.T) {
		var z sliceSizer
		z.observe("a", 250, sliceObservation{events: 250, held: 400 * ms, newer: 250*newerFactor + 1, waited: true})
		if got := z.size("a"); got != wholeSliceEvents {
			t.Fatalf("after a slice dominated by newer trades: %d, want a page's worth, %d (never a merged unit)", got, wholeSliceEvents)
		}
		z.observe("a", wholeSliceEvents, sliceObservation{events: 10_000, held: time.Second, newer: 10_000*newerFactor + 1, waited: true})
		if got := z.size("a"); got != wholeSliceEvents {
			t.Fatalf("still dominated: %d", got)
		}
		z.observe("a", wholeSliceEvents, waited(10_000, 200*ms))
		if got := z.size("a"); got != 1000 {
			t.Fatalf("no longer dominated, a waiter: %d, want the budget's size", got)
		}
	})
	t.Run("a fixed size wins, a negative budget commits whole pages", func(t *testing.T) {
		z := sliceSizer{fixed: 7}
		if got := z.size("a"); got != 7 {
			t.Fatalf("fixed: %d", got)
		}
		z = sliceSizer{budget: -1}
		if got := z.size("a"); got != 0 {
			t.Fatalf("no slicing: %d", got)
		}
	})
}

// sliceLedger: seqs 1..6, where seq 2 is one command of three events (an
// order, its counter-order, their trade) and seq 4 has no outputs (the
// page's throughSeq covers it).
func sliceLedger(t *testing.T) *storetest.Ledger {
	t.Helper()
	return storetest.NewLedger(t, 6,
		storetest.Opening(1, "A", "ACME", "5", "10"),
		storetest.Order(2, "o1", 1, "A", "ACME", wire.SideBuy, "100", "10", "0", wire.StatusFilled),
		storetest.Order(2, "o2", 1, "B", "ACME", wire.SideSell, "100", "10", "0", wire.StatusFilled),
		storetest.Trade(2, 1, "t1", "ACME", "100", "10", "A", "B"),
		storetest.Trade(3, 2, "t2", "ACME", "120", "2", "B", "A"),
		storetest.Trade(5, 3, "t3", "ACME", "90", "1", "A", "C"),
		storetest.Trade(6, 4, "t4", "ACME", "95", "3", "C", "B"),
	)
}

// Slices end only between commands, chain on from one another, and the
// last one ends at the page's throughSeq.
func TestNextSlice_CutsBetweenCommands(t *testing.T) {
	src := sliceLedger(t)
	run := Run{RunID: 1, Scope: "s", Phase: PhaseActive, Selected: true, Managed: true, Epoch: 1, DescriptorHash: testDescriptor, ProtocolVersion: 1}
	for _, tc := range []struct {
		n       int
		through []int64
		events  []int
	}{
		{0, []int64{6}, []int{7}},
		{1, []int64{1, 2, 3, 5, 6}, []int{1, 3, 1, 1, 1}},
		{2, []int64{2, 5, 6}, []int{4, 2, 1}},
		{3, []int64{2, 6}, []int{4, 3}},
		{100, []int64{6}, []int{7}},
	} {
		t.Run("", func(t *testing.T) {
			pp, err := prepare(run, src.Page(0, 100))
			if err != nil {
				t.Fatal(err)
			}
			after, digest := int64(0), chain.Genesis
			var through []int64
			var events []int
			for !pp.done() {
				sl := pp.nextSlice(tc.n)
				if sl.after != after || sl.digestAfter != digest {
					t.Fatalf("slice starts at %d/%s, the previous ended at %d/%s", sl.after, sl.digestAfter, after, digest)
				}
				if want := src.DigestThrough(sl.through); sl.digest != want {
					t.Fatalf("slice through %d: digest %s, chain %s", sl.through, sl.digest, want)
				}
				through, events = append(through, sl.through), append(events, sl.applied)
				after, digest = sl.through, sl.digest
			}
			if !slices.Equal(through, tc.through) || !slices.Equal(events, tc.events) {
				t.Fatalf("n=%d: slices through %v with %v events, want %v with %v", tc.n, through, events, tc.through, tc.events)
			}
		})
	}
}

// A slice holds one lock per key (KeyLocks): it ends after the command that
// brings its keys to maxSliceKeys, whatever the event count asks, and all
// events still land in exactly one slice, in order.
func TestNextSlice_CapsKeys(t *testing.T) {
	var evs []wire.Event
	for i := 1; i <= 700; i++ { // one trade per command, each between two new accounts
		evs = append(evs, storetest.Trade(int64(i), int64(i), fmt.Sprintf("t%d", i), "ACME", "100", "1", fmt.Sprintf("b%d", i), fmt.Sprintf("s%d", i)))
	}
	src := storetest.NewLedger(t, 700, evs...)
	run := Run{RunID: 1, Scope: "s", Phase: PhaseActive, Selected: true, Managed: true, Epoch: 1, DescriptorHash: testDescriptor, ProtocolVersion: 1}
	for _, n := range []int{0, 100, 400, 10_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			pp, err := prepare(run, src.Page(0, 1000))
			if err != nil {
				t.Fatal(err)
			}
			var sizes []int
			for !pp.done() {
				sl := pp.nextSlice(n)
				if len(sl.lockKeys) > maxSliceKeys {
					t.Fatalf("a slice locks %d keys, more than %d", len(sl.lockKeys), maxSliceKeys)
				}
				sizes = append(sizes, sl.applied)
			}
			// Each trade brings two new keys: the cap is reached after
			// maxSliceKeys/2 of them, before 400 events.
			want := []int{maxSliceKeys / 2, maxSliceKeys / 2, 700 - maxSliceKeys}
			if n == 100 {
				want = []int{100, 100, 100, 100, 100, 100, 100}
			}
			if !slices.Equal(sizes, want) {
				t.Fatalf("n=%d: slices of %v events, want %v", n, sizes, want)
			}
		})
	}
}

// A page commits slice by slice: every slice moves the cursor, the positions
// end as the replay says, and a page that fails in a later slice keeps the
// earlier ones (each a verified page of its own) and reports them; the
// failing slice writes nothing.
func TestApplyPage_CommitsInSlices(t *testing.T) {
	t.Parallel()
	t.Run("every slice commits and the page ends in the replay", func(t *testing.T) {
		t.Parallel()
		s, run, l := slicedStore(t, 1)
		src := sliceLedger(t)
		var afterCommits int
		s.SetAfterCommit(func(string) { afterCommits++ })
		res, err := s.ApplyPage(ctxb, l, run, src.Page(0, 100))
		if err != nil {
			t.Fatal(err)
		}
		if res.Slices != 5 || len(res.LockHeld) != 5 || res.Applied != 7 || res.VerifiedThroughSeq != 6 || !res.Current() || res.EventCount != 7 || res.AfterSeq != 0 {
			t.Fatalf("%+v", res)
		}
		if afterCommits != 5 {
			t.Fatalf("after-commit ran %d times, want once per slice", afterCommits)
		}
		storetest.AssertPositions(t, s.Pool(), "s", src.Decoded)
		c, err := s.ReadCursor(ctxb, "s")
		if err != nil || c.VerifiedThroughSeq != 6 || c.ChainDigest != src.DigestThrough(6) || c.EventCount != 7 {
			t.Fatalf("cursor %+v %v", c, err)
		}
	})
	t.Run("a refused slice keeps the slices before it", func(t *testing.T) {
		t.Parallel()
		s, run, l := slicedStore(t, 2)
		src := sliceLedger(t)
		// An orphan in the second slice's window (2, 5].
		seedTrade(t, s, "s", storetest.Trade(4, 9, "ghost", "ACME", "1", "1", "X", "Y"), i64(4), "BOOKED")
		var afterFirst string
		s.SetAfterCommit(func(string) { afterFirst = snapshotWhere(t, s, 2) })
		res, err := s.ApplyPage(ctxb, l, run, src.Page(0, 100))
		wantCode(t, err, codes.OrphanTrade)
		if !res.Committed() || res.Slices != 1 || res.VerifiedThroughSeq != 2 || res.ChainDigest != src.DigestThrough(2) || res.Applied != 4 || res.Current() {
			t.Fatalf("%+v", res)
		}
		c, err := s.ReadCursor(ctxb, "s")
		if err != nil || c.VerifiedThroughSeq != 2 || c.ChainDigest != src.DigestThrough(2) {
			t.Fatalf("cursor %+v %v", c, err)
		}
		if after := snapshotWhere(t, s, 2); afterFirst == "" || after != afterFirst {
			t.Fatalf("the refused slice wrote:\nafter the first slice %s\nafter the page        %s", afterFirst, after)
		}
	})
	t.Run("a page refused as a whole writes nothing", func(t *testing.T) {
		t.Parallel()
		s, run, l := slicedStore(t, 1)
		page := sliceLedger(t).Page(0, 100)
		page.Events[len(page.Events)-1].Wire = append([]byte(nil), page.Events[len(page.Events)-1].Wire...)
		page.Events[len(page.Events)-1].Wire[10] ^= 1 // the last event no longer hashes to digestThrough
		before := snapshot(t, s)
		res, err := s.ApplyPage(ctxb, l, run, page)
		wantCode(t, err, codes.ChainMismatch)
		if res.Committed() || snapshot(t, s) != before {
			t.Fatalf("a page whose chain fails wrote its first slices: %+v", res)
		}
	})
}

// slicedStore is a store cutting slices of n events, with scope s's run
// and a lease on it.
func slicedStore(t *testing.T, n int) (*Store, Run, Lease) {
	t.Helper()
	s := newStore(t)
	s.SetSliceEvents(n)
	return s, addRun(t, s, "s", PhaseActive, nil), lease(t, s, "s", "w")
}

// snapshotWhere dumps the rows a page could write past seq (trades and order
// versions beyond it, positions, the cursor), to prove a refused slice wrote
// nothing.
func snapshotWhere(t *testing.T, s *Store, seq int64) string {
	t.Helper()
	var out string
	err := adminOf(t, s).QueryRow(ctxb, `SELECT concat_ws(' | ',
  (SELECT string_agg(trade_id, ',' ORDER BY trade_id) FROM trades WHERE seq > $1 AND written_by = 'recovery'),
  (SELECT string_agg(order_id || 'v' || version, ',' ORDER BY order_id, version) FROM order_events WHERE seq > $1),
  (SELECT string_agg(account || '/' || instrument || '=' || quantity || '@' || avg_cost, ',' ORDER BY account, instrument) FROM positions),
  (SELECT string_agg(verified_through_seq || ':' || chain_digest, ',') FROM projection_catchup_cursor))`, seq).Scan(&out)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every slice runs READ COMMITTED whatever the database's default (under
// REPEATABLE READ its snapshot would predate the projection write lock and
// miss what the live projector committed while the slice waited), with
// custom plans (a generic plan of the window queries, chosen after a few
// executions on a pooled connection, scanned the whole scope per slice) and
// without JIT (compiling cost ~400 ms per statement on a large scope).
func TestApplyPage_ReadCommittedWithCustomPlans(t *testing.T) {
	t.Parallel()
	base := newStore(t)
	cfg := base.Pool().Config().Copy()
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
	pool, err := pgxpool.NewWithConfig(ctxb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := New(pool)
	admins.Store(s, adminOf(t, base))
	t.Cleanup(func() { admins.Delete(s) })
	s.SetSliceEvents(2)
	run := addRun(t, s, "s", PhaseActive, nil)
	l := lease(t, s, "s", "w")
	var seen []string
	s.hooks.beforeCommit = func(ctx context.Context, tx pgx.Tx) error {
		var iso, plans string
		var jit string
		if err := tx.QueryRow(ctx, `SELECT current_setting('transaction_isolation'), current_setting('plan_cache_mode'), current_setting('jit')`).Scan(&iso, &plans, &jit); err != nil {
			return err
		}
		seen = append(seen, iso+"/"+plans+"/jit "+jit)
		return nil
	}
	if _, err := s.ApplyPage(ctxb, l, run, sliceLedger(t).Page(0, 100)); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 3 {
		t.Fatalf("slices seen %v", seen)
	}
	for _, v := range seen {
		if v != "read committed/force_custom_plan/jit off" {
			t.Fatalf("a slice ran as %s (want read committed/force_custom_plan/jit off)", v)
		}
	}
}

// A slice reports whether a transaction was waiting for the projection
// write lock of its scope or of one of its keys when it finished (the sizer
// keeps slices short only then); the runtime role can see it (pg_locks
// needs no privilege). A writer holding the per-key lock of keys the slice
// does not touch neither waits nor counts (docs/live-writes.md): it commits while the
// slice is still open.
func TestApplyPage_ReportsAWaitingLiveWrite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		lock   func(tx pgx.Tx) error // the other writer's lock
		waits  bool
		counts bool
	}{
		{name: "nobody waits"},
		{name: "a writer of the whole scope waits", waits: true, counts: true,
			lock: func(tx pgx.Tx) error { _, err := tx.Exec(ctxb, WriteLockSQL, "s"); return err }},
		{name: "a writer of a key of the slice waits", waits: true, counts: true,
			lock: func(tx pgx.Tx) error { return KeyLocks(ctxb, tx, "s", []string{"C"}, []string{"ACME"}) }},
		{name: "a writer of other keys goes through",
			lock: func(tx pgx.Tx) error { return KeyLocks(ctxb, tx, "s", []string{"A", "Z"}, []string{"OTHER", "ACME"}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			s.SetSliceBudget(-1)
			run := addRun(t, s, "s", PhaseActive, nil)
			l := lease(t, s, "s", "w")
			admin := adminOf(t, s)
			done := make(chan error, 1)
			if tc.lock != nil {
				s.hooks.afterLeaseLocked = func(ctx context.Context, tx pgx.Tx) error {
					go func() {
						done <- pgx.BeginFunc(ctxb, admin, func(tx pgx.Tx) error { return tc.lock(tx) })
					}()
					if !tc.waits {
						// The slice holds its locks until it commits: a
						// writer that does not share them is done first.
						select {
						case err := <-done:
							return err
						case <-time.After(10 * time.Second):
							return errors.New("a writer of keys the slice does not lock waited for the slice")
						}
					}
					for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
						var n int
						if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&n); err != nil {
							return err
						}
						if n > 0 {
							return nil
						}
					}
					return errors.New("the writer never queued on the lock")
				}
			}
			res, err := s.ApplyPage(ctxb, l, run, sliceLedger(t).Page(0, 100))
			if err != nil {
				t.Fatal(err)
			}
			if res.LockWaited != tc.counts {
				t.Fatalf("LockWaited %v, want %v", res.LockWaited, tc.counts)
			}
			if tc.waits {
				if err := <-done; err != nil {
					t.Fatalf("the waiting writer: %v", err)
				}
			}
		})
	}
}
