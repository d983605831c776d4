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

package live_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/reference/enginetest"
	"github.com/projection-recovery/projection-recovery/internal/reference/live"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// liveRate is the live projector's steady arrival rate (events/s) and
// liveAlone how long it runs with no catch-up, for the baseline.
const (
	liveRate  = 2000
	liveAlone = 5 * time.Second
)

// BenchmarkLiveDuringCatchUp (docs/live-writes.md, "What it costs,
// measured"): the live projector writes the scope at a steady liveRate, one
// transaction (under the key locks) per batch of whatever queued, at most
// live.MaxBatch, exactly as live.Run does; each write's latency runs from its
// scheduled arrival to its commit, so a stall counts against every write
// queued behind it. It runs alone for liveAlone, then beside the same
// catch-up in another database of the same server (the control: shared cores
// and disk, no shared lock), then during a catch-up of
// PROJECTION_BENCH_EVENTS events from genesis (pages of 10,000 events, the
// contract's maximum) in its own scope. A second, identical catch-up without
// live traffic gives the rate to compare with. It runs twice: committing each
// page in one transaction ("whole-pages", the lock held for a whole page),
// and in write slices sized to the default lock budget ("slices") and to
// 50 ms.
//
// The live events are newer than the catch-up's boundary (seqs beyond it, as
// a live feed running while recovery catches up produces) and on accounts the
// catch-up does not touch, so each side does exactly its own work and the
// figures measure waiting for the lock, not extra R1 folding. Both take the
// projection write lock per key (store.KeyLocks), so with disjoint keys no
// live write waits for a slice: this is the protocol's case where live
// traffic and the backlog do not share keys.
//
// Then the case where they do ("samekeys", a fourth catch-up, in a fresh
// database): the live traffic trades the backlog's own accounts and
// instruments, as a platform's live flow does. A live write on a key a slice
// holds waits for that slice, whose size the budget bounds, and every slice
// re-folds the live trades newer than it on its keys (R1), whose number grows
// while the catch-up runs. After it, every position must equal an independent
// replay of the pages and the live events together (storetest.Replay).
//
//	PROJECTION_BENCH_EVENTS=1000000 go test -run '^$' -bench LiveDuringCatchUp -benchtime 1x ./internal/reference/live
func BenchmarkLiveDuringCatchUp(b *testing.B) {
	n := 40_000 // `go test -bench` sized; `make bench` sets PROJECTION_BENCH_EVENTS=1000000
	if v, err := strconv.Atoi(os.Getenv("PROJECTION_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	pages := enginetest.StreamPages(b, 42, n)
	for _, mode := range []struct {
		name   string
		budget time.Duration
	}{{"whole-pages", -1}, {"slices", store.DefaultSliceBudget}, {"slices-50ms", 50 * time.Millisecond}} {
		b.Run(mode.name, func(b *testing.B) { benchLive(b, pages, mode.budget) })
	}
}

func benchLive(b *testing.B, pages []*source.Page, budget time.Duration) {
	for i := 0; i < b.N; i++ {
		r := liveRun(b, pages, budget, liveAlone)
		quietRate, busyRate := float64(r.events)/r.quietTook.Seconds(), float64(r.events)/r.busyTook.Seconds()
		alone, shared, during, holds := r.alone, r.shared, r.during, r.holds
		b.ReportMetric(float64(r.events), "events")
		b.ReportMetric(ms(alone.pct(50)), "alone_p50_ms")
		b.ReportMetric(ms(alone.pct(99)), "alone_p99_ms")
		b.ReportMetric(ms(alone.max()), "alone_max_ms")
		b.ReportMetric(ms(shared.pct(50)), "shared_p50_ms")
		b.ReportMetric(ms(shared.pct(99)), "shared_p99_ms")
		b.ReportMetric(ms(shared.max()), "shared_max_ms")
		b.ReportMetric(ms(during.pct(50)), "during_p50_ms")
		b.ReportMetric(ms(during.pct(99)), "during_p99_ms")
		b.ReportMetric(ms(during.max()), "during_max_ms")
		b.ReportMetric(float64(during.pct(99))/float64(alone.pct(99)), "p99_during/alone")
		b.ReportMetric(ms(holds.pct(50)), "hold_p50_ms")
		b.ReportMetric(ms(holds.pct(99)), "hold_p99_ms")
		b.ReportMetric(ms(holds.max()), "hold_max_ms")
		b.ReportMetric(quietRate, "catchup_events/s")
		b.ReportMetric(busyRate, "catchup_live_events/s")
		b.ReportMetric(busyRate/quietRate, "rate_live/quiet")
		// The control's rate: the live traffic shares only the machine.
		b.ReportMetric(r.quietTook.Seconds()/r.besideTook.Seconds(), "rate_beside/quiet")
		b.Logf("live alone: %d writes p50 %v p99 %v max %v", len(alone), alone.pct(50), alone.pct(99), alone.max())
		b.Logf("live beside a catch-up of another database (no lock shared): %d writes p50 %v p99 %v max %v", len(shared), shared.pct(50), shared.pct(99), shared.max())
		b.Logf("live during catch-up of its scope: %d writes p50 %v p99 %v max %v", len(during), during.pct(50), during.pct(99), during.max())
		b.Logf("catch-up of %d events: %v alone (%.0f events/s), %v with live traffic (%.0f events/s) in %d transactions holding the lock p50 %v p99 %v max %v",
			r.events, r.quietTook, quietRate, r.busyTook, busyRate, len(holds), holds.pct(50), holds.pct(99), holds.max())

		same, sameHolds := r.same, r.sameHolds
		sameRate := float64(r.events) / r.sameTook.Seconds()
		b.ReportMetric(ms(same.pct(50)), "samekeys_p50_ms")
		b.ReportMetric(ms(same.pct(99)), "samekeys_p99_ms")
		b.ReportMetric(ms(same.max()), "samekeys_max_ms")
		b.ReportMetric(float64(same.pct(99))/float64(alone.pct(99)), "p99_samekeys/alone")
		b.ReportMetric(sameRate/quietRate, "rate_samekeys/quiet")
		b.ReportMetric(float64(len(sameHolds))/float64(r.pages), "samekeys_tx/page")
		b.Logf("live on the backlog's keys during its catch-up: %d writes p50 %v p99 %v max %v; catch-up %v (%.0f events/s) in %d transactions holding the lock p50 %v p99 %v max %v",
			len(same), same.pct(50), same.pct(99), same.max(), r.sameTook, sameRate, len(sameHolds), sameHolds.pct(50), sameHolds.pct(99), sameHolds.max())
	}
}

// liveResult is one run of the live projector beside catch-ups.
type liveResult struct {
	events                int           // events of one catch-up
	quietTook, busyTook   time.Duration // the catch-up without, and with, live traffic on its scope
	besideTook            time.Duration // the catch-up while the live traffic goes to another database (the control)
	alone, shared, during latencies     // live write latencies: alone, beside another database's catch-up, during its scope's
	holds                 latencies     // how long each transaction of the busy catch-up held the projection write lock
	pages, liveTrades     int
	// samekeys: the live traffic on the backlog's own keys, during a
	// catch-up of a fresh database
	sameTook        time.Duration
	same, sameHolds latencies
}

// liveRun: a catch-up of pages with no live traffic; then the live projector
// alone for aloneFor, beside the same catch-up in another database (the
// control), and during the catch-up of its own scope; stores slicing pages
// at budget. Every live trade must be retained.
func liveRun(tb testing.TB, pages []*source.Page, budget, aloneFor time.Duration) liveResult {
	tb.Helper()
	newEnv := func(tb testing.TB, descriptor string) env {
		e := newEnv(tb, descriptor)
		e.s.SetSliceBudget(budget)
		// A lease that outlives the run: at 1M events the scope waits
		// through the baseline and the control before its own catch-up.
		l, err := e.s.AcquireLease(ctxb, "s", "worker", time.Hour)
		if err != nil {
			tb.Fatal(err)
		}
		e.l = l
		return e
	}
	r := liveResult{pages: len(pages)}
	quiet := newEnv(tb, storetest.Descriptor)
	r.quietTook, r.events, _ = benchCatchUp(tb, quiet, pages)

	e := newEnv(tb, storetest.Descriptor)
	gen := &live.Feed{Seq: 1 << 40}
	r.alone = driveLive(tb, e, gen, func(ctx context.Context) { sleepCtx(ctx, aloneFor) })
	// The control: the same catch-up in another database of the same
	// server. The live projector shares the cores and the disk with it but
	// never waits for its lock: what remains is the machine's cost.
	other := newEnv(tb, storetest.Descriptor)
	r.shared = driveLive(tb, e, gen, func(context.Context) { r.besideTook, _, _ = benchCatchUp(tb, other, pages) })
	r.during = driveLive(tb, e, gen, func(context.Context) { r.busyTook, _, r.holds = benchCatchUp(tb, e, pages) })

	if err := e.s.Pool().QueryRow(ctxb, `SELECT count(*) FROM trades WHERE scope = 's' AND written_by = 'live'`).Scan(&r.liveTrades); err != nil {
		tb.Fatal(err)
	}
	if r.liveTrades != gen.Trades {
		tb.Fatalf("live trades retained %d, written %d", r.liveTrades, gen.Trades)
	}

	// The live traffic on the backlog's keys.
	e2 := newEnv(tb, storetest.Descriptor)
	same := &live.Feed{Seq: 1 << 40, Accounts: 50, Instruments: streamInstruments, Keep: true}
	r.same = driveLive(tb, e2, same, func(context.Context) { r.sameTook, _, r.sameHolds = benchCatchUp(tb, e2, pages) })
	evs := same.Events
	for _, p := range pages {
		for _, ev := range p.Events {
			w, err := wire.Decode(ev.Wire)
			if err != nil {
				tb.Fatal(err)
			}
			evs = append(evs, w)
		}
	}
	storetest.AssertPositions(tb, e2.s.Pool(), "s", evs)
	return r
}

// benchCatchUp applies pages from genesis until CURRENT, preparing and
// merging the next pages (store.PreparedPage.Merge, up to its bound) while
// the current unit is applied, as the manager's fetch ahead does. It returns
// how long each of its transactions held the projection write lock.
func benchCatchUp(b testing.TB, e env, pages []*source.Page) (time.Duration, int, latencies) {
	b.Helper()
	start := time.Now()
	units := e.s.PrepareUnits(ctxb, e.run, pages, 0)
	events := 0
	var last store.PageResult
	var holds latencies
	for u := range units {
		if u.Err != nil {
			b.Fatal(u.Err)
		}
		res, err := e.s.ApplyPrepared(ctxb, e.l, e.run, u.Unit)
		if err != nil {
			b.Fatalf("page after %d: %v", res.AfterSeq, err)
		}
		events, last = events+res.Applied, res
		holds = append(holds, res.LockHeld...)
	}
	took := time.Since(start)
	if !last.Current() {
		b.Fatalf("catch-up ended %+v, not CURRENT", last)
	}
	return took, events, holds
}

// latencies are per-write latencies.
type latencies []time.Duration

func (l latencies) pct(p int) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func (l latencies) max() time.Duration { return slices.Max(append(latencies{0}, l...)) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// driveLive runs the live projector on the env's scope at liveRate while
// during runs (live.Drive) and returns the latency of every write.
func driveLive(b testing.TB, e env, gen *live.Feed, during func(ctx context.Context)) latencies {
	b.Helper()
	return live.Drive(e.trade, "s", liveRate, gen.Next, func(err error) { b.Error(err) }, during)
}

// streamInstruments are enginetest.StreamPages's instruments.
var streamInstruments = []string{"ACME", "BOLT", "CRUX", "DUNE"}

// TestLiveDuringCatchUp_Small is BenchmarkLiveDuringCatchUp at a size `make
// test` affords, so that the benchmark cannot rot. It asserts only what does
// not depend on the machine's speed: no live trade is lost; with whole pages
// every unit (a page, or pages merged) is one transaction, so there are never
// more transactions than pages; with slices, the live writer, whose keys
// the catch-up never touches, never waits for a slice (KeyLocks), so slices
// grow to whole pages within the first page as with no live traffic at all
// (under the scope-wide lock the writer kept waiting and the catch-up
// committed in 15 or more slices a page). With the live traffic on the
// backlog's own keys, every position ends equal to the independent replay
// of the pages and the live events (liveRun asserts it).
func TestLiveDuringCatchUp_Small(t *testing.T) {
	pages := enginetest.StreamPages(t, 42, 20_000)
	for _, tc := range []struct {
		name   string
		budget time.Duration
		check  func(r liveResult) bool
	}{
		{"whole pages", -1, func(r liveResult) bool { return len(r.holds) >= 1 && len(r.holds) <= r.pages }},
		{"slices", store.DefaultSliceBudget, func(r liveResult) bool { return len(r.holds) <= 5*r.pages }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := liveRun(t, pages, tc.budget, 300*time.Millisecond)
			if r.events < 19_000 || len(r.during) == 0 || r.liveTrades == 0 {
				t.Fatalf("%d events, %d live writes during the catch-up, %d live trades", r.events, len(r.during), r.liveTrades)
			}
			if !tc.check(r) {
				t.Fatalf("%d pages committed in %d transactions", r.pages, len(r.holds))
			}
			if len(r.same) == 0 {
				t.Fatal("no live write on the backlog's keys during its catch-up")
			}
			t.Logf("%d pages in %d transactions; live p99 alone %v, during %v; on the backlog's keys: %d transactions, live p99 %v",
				r.pages, len(r.holds), r.alone.pct(99), r.during.pct(99), len(r.sameHolds), r.same.pct(99))
		})
	}
}
