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

package reconstore

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// besideRate is the live projector's arrival rate (events/s);
// besideEvery10 spaces the every-10-s phase's dry runs (start to start: six
// times a schedule's shortest interval); besideSchedule is that interval,
// counted as the controller does from the end of the last run (LastRunAt).
const (
	besideRate     = 2000
	besideEvery10  = 10 * time.Second
	besideSchedule = time.Minute
	besideGate     = 2 * time.Second
)

// besideRounds is how many alone / scheduled pairs the benchmark
// interleaves (PROJECTION_BENCH_BESIDE_ROUNDS, default 2), so that the
// machine's noise (other work on its cores) falls on both sides.
func besideRounds() int {
	if n, err := strconv.Atoi(os.Getenv("PROJECTION_BENCH_BESIDE_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 2
}

// besideShare is the scheduled dry runs' share of one CPU
// (PROJECTION_BENCH_DETECT_CPU, default the manager's).
func besideShare() float64 {
	if v, err := strconv.ParseFloat(os.Getenv("PROJECTION_BENCH_DETECT_CPU"), 64); err == nil && v >= 0 && v <= 1 {
		return v
	}
	return recon.DefaultDetectCPU
}

// dryRuns is how a phase runs dry runs beside the catch-up.
type dryRuns struct {
	on bool
	// every spaces them: from the start of one to the next (fromEnd
	// false) or from the end of one (a schedule); 0: back to back.
	every   time.Duration
	fromEnd bool
	pace    recon.Pace
	// gate > 0 suspends the dry runs every other gate (gatedPace): the
	// phase's live writes are then split by whether a paced run was
	// working or suspended when they arrived.
	gate time.Duration
	// snapshot runs no dry run but holds what a run holds throughout: a
	// read-only REPEATABLE READ snapshot of the scope's database, taken
	// at the phase's start, so its cost can be told from the run's work.
	snapshot bool
}

// gatedPace is a Pace whose run is suspended while the gate is closed: its
// next yield waits for the gate to open, and the time it waited is hidden
// from the pacer's clock, so when the gate opens the run resumes at its
// share (not in a burst paying back the time it was stopped). It lets one
// catch-up interleave "a paced dry run working" with "none" every gate,
// finer than any phase, so the machine's noise falls on both alike.
type gatedPace struct {
	mu     sync.Mutex
	open   bool
	opened chan struct{} // closed when the gate opens
	hidden time.Duration // time spent waiting at the gate
}

func newGatedPace() *gatedPace { return &gatedPace{open: true, opened: make(chan struct{})} }

func (g *gatedPace) set(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case open && !g.open:
		close(g.opened)
	case !open && g.open:
		g.opened = make(chan struct{})
	}
	g.open = open
}

func (g *gatedPace) now() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return time.Now().Add(-g.hidden)
}

func (g *gatedPace) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	g.mu.Lock()
	open, opened := g.open, g.opened
	g.mu.Unlock()
	if open {
		return nil
	}
	start := time.Now()
	select {
	case <-ctx.Done():
	case <-opened:
	}
	g.mu.Lock()
	g.hidden += time.Since(start)
	g.mu.Unlock()
	return ctx.Err()
}

// phaseResult is one phase: its live write latencies, its dry runs
// (completed, and cut by the phase's end), what pacing did over them,
// the catch-up's refused pages and the load average at its start.
type phaseResult struct {
	name     string
	live     []time.Duration
	dryRuns  int
	cut      int
	paced    recon.PaceStats // summed over its dry runs
	refused  []string
	took     time.Duration
	loadavg  string
	firstRun time.Duration // the first dry run's duration (0: none completed)
	estRun   time.Duration // a paced dry run's last estimate of its whole duration
	// gated: the live writes that arrived while the paced run worked (on)
	// and while it was suspended (off), past gateSettle into the window.
	on, off []time.Duration
}

// gateSettle is how far into a gate window a live write must arrive to be
// counted in it: the queue the other window left behind has drained.
const gateSettle = 250 * time.Millisecond

// besideResult is one run of liveBesideDryRuns.
type besideResult struct {
	alone, scheduled     []phaseResult // interleaved rounds
	gated                []phaseResult // each round's third phase: the paced run suspended every other besideGate
	backToBack, every10s phaseResult
	control              phaseResult   // back to back, dry runs of another database's scope
	pacedControl         []phaseResult // the scheduled phase's dry runs, of another database's scope
	snapshot             []phaseResult // no dry run, its snapshot held throughout
}

func (r besideResult) phases() []phaseResult {
	var out []phaseResult
	for i := range r.alone {
		out = append(out, r.alone[i])
		if i < len(r.scheduled) {
			out = append(out, r.scheduled[i])
		}
		if i < len(r.gated) {
			out = append(out, r.gated[i])
		}
	}
	out = append(out, r.pacedControl...)
	out = append(out, r.snapshot...)
	return append(out, r.backToBack, r.every10s, r.control)
}

func pooled(ps []phaseResult) []time.Duration {
	var out []time.Duration
	for _, p := range ps {
		out = append(out, p.live...)
	}
	return out
}

func (r besideResult) refused() (n int) {
	for _, p := range r.phases() {
		n += len(p.refused)
	}
	return n
}

// liveBesideDryRuns (docs/performance.md): a scope of about events events
// catching up from genesis (pages of the contract's maximum, under its
// worker's lease) while its live projector, a process of its own as the
// trade-processor is (driveLiveProcess), writes at besideRate, each phase
// in a fresh world with the same log: rounds of (1) no dry run, (2) the
// goal's schedule, a dry run of that scope paced at share of one CPU every
// besideSchedule, (2b) the same suspended every other besideGate
// (gatedPace: its live writes split by whether the paced run worked when
// they arrived) and, with all, (2c) the paced control: the schedule's dry
// runs of a scope in another database, and (2d) no dry run but its
// snapshot held (holdSnapshot), interleaved; then (3) unpaced dry
// runs of it back to back, (4) one every besideEvery10, and (5) the
// control, back to back of a scope in another database. Each live write's
// latency runs from its scheduled arrival to its commit. A dry run still
// running when the catch-up ends is cancelled (counted cut), so every
// phase lasts exactly its catch-up. A page refused during the catch-up (a
// dry run that took the lease over, as its rehearsal once did) is what
// would make the recovery RETRYING.
func liveBesideDryRuns(tb testing.TB, events, rounds int, share float64, all bool) besideResult {
	var r besideResult
	commands := int(float64(events)/eventsPerCommand) + 1
	phase := func(name string, d dryRuns, of *world) phaseResult {
		pr := phaseResult{name: name, loadavg: loadavg()}
		w := newWorld(tb, "beside-"+name, commands, worldOpts{accounts: 50, memberProcess: true})
		if of == nil {
			of = w
		}
		warmMember(tb, w)
		wf, err := NewRunner(RunnerConfig{
			Store: store.New(pgtest.Pool(tb, of.db.Reconciliation)), ReadPool: pgtest.Pool(tb, of.db.ReadOnly), Source: of.client,
			Permission: recon.PermissionFunc(func(context.Context, string) (bool, error) { return false, nil }),
			StaleAfter: 5 * time.Minute, Log: logr.Discard(),
		})
		if err != nil {
			tb.Fatal(err)
		}
		start := time.Now()
		var toggles []time.Time // when the gate turned, from open
		var t0 time.Time        // about the live feed's first arrival
		if d.gate > 0 {
			g := newGatedPace()
			d.pace.Now, d.pace.Sleep = g.now, g.sleep
			defer g.set(true)
			gated := make(chan struct{})
			defer close(gated)
			go func(open bool) {
				tick := time.NewTicker(d.gate)
				defer tick.Stop()
				for {
					select {
					case <-gated:
						return
					case at := <-tick.C:
						open = !open
						g.set(open)
						toggles = append(toggles, at)
					}
				}
			}(true)
		}
		during := func(_ context.Context, at time.Time) {
			t0 = at
			if d.snapshot {
				release := holdSnapshot(tb, of)
				defer release()
			}
			ctx, stop := context.WithCancel(ctxb)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for d.on && ctx.Err() == nil {
					began := time.Now()
					// The run's deadline is the manager's default, as in the controller.
					rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
					res, err := wf.DryRunWith(rctx, of.scope, recon.DryRunOptions{Pace: d.pace})
					cancel()
					if res != nil && res.DryRunResult != nil {
						pr.paced.Busy += res.Pacing.Busy
						pr.paced.Slept += res.Pacing.Slept
						pr.paced.Pages += res.Pacing.Pages
						if e := res.Pacing.EstimatedEnd; !e.IsZero() {
							pr.estRun = e.Sub(began)
						}
					}
					if ctx.Err() != nil {
						pr.cut++
						return
					}
					if err != nil {
						tb.Errorf("dry run: %v", err)
						return
					}
					if pr.dryRuns++; pr.dryRuns == 1 {
						pr.firstRun = time.Since(began)
					}
					from := began
					if d.fromEnd {
						from = time.Now()
					}
					select {
					case <-ctx.Done():
					case <-time.After(time.Until(from.Add(d.every))):
					}
				}
			}()
			pr.refused = catchUpUnderLease(tb, w)
			stop()
			<-done
		}
		pr.live = driveLiveProcess(tb, w.db.Admin, w.scope, besideRate, during)
		pr.took = time.Since(start)
		if d.gate > 0 {
			pr.on, pr.off = splitByGate(pr.live, t0, toggles, d.gate)
		}
		if _, ok := tb.(*testing.B); ok {
			// Straight to stdout: go test keeps only the first ten lines of a
			// benchmark's b.Log output, fewer than a run's phases.
			if d.gate > 0 {
				fmt.Printf("beside: phase %-14s writes while the paced run worked: p99 %6.1f ms over %d; while it was suspended: p99 %6.1f ms over %d\n",
					name, ms(pct(pr.on, 99)), len(pr.on), ms(pct(pr.off, 99)), len(pr.off))
			}
			fmt.Printf("beside: phase %-14s load %s: %5.1f s, live p99 %6.1f ms over %d writes, dry runs %d done + %d cut, paced over %d pages: busy %s slept %s (estimated run %s), pages refused %d\n",
				name, pr.loadavg, pr.took.Seconds(), ms(pct(pr.live, 99)), len(pr.live), pr.dryRuns, pr.cut, pr.paced.Pages,
				pr.paced.Busy.Round(time.Millisecond), pr.paced.Slept.Round(time.Millisecond), pr.estRun.Round(time.Second), len(pr.refused))
		}
		return pr
	}
	scheduled := dryRuns{on: true, every: besideSchedule, fromEnd: true, pace: recon.Pace{Share: share}}
	gated := scheduled
	gated.gate = besideGate
	var pacedOther *world
	if all {
		pacedOther = newWorld(tb, "beside-other-paced", commands, worldOpts{catchUp: true, accounts: 50, memberProcess: true})
		warmMember(tb, pacedOther)
	}
	for i := range rounds {
		r.alone = append(r.alone, phase(fmt.Sprintf("alone-%d", i+1), dryRuns{}, nil))
		r.scheduled = append(r.scheduled, phase(fmt.Sprintf("scheduled-%d", i+1), scheduled, nil))
		r.gated = append(r.gated, phase(fmt.Sprintf("gated-%d", i+1), gated, nil))
		if all {
			r.pacedControl = append(r.pacedControl, phase(fmt.Sprintf("paced-ctl-%d", i+1), scheduled, pacedOther))
			r.snapshot = append(r.snapshot, phase(fmt.Sprintf("snapshot-%d", i+1), dryRuns{snapshot: true}, nil))
		}
	}
	r.backToBack = phase("back-to-back", dryRuns{on: true}, nil)
	if all {
		r.every10s = phase("every-10s", dryRuns{on: true, every: besideEvery10}, nil)
	}
	// The control: the same dry runs of a scope in another database of the
	// same server, sharing the cores and the disk but no table or lock.
	other := newWorld(tb, "beside-other", commands, worldOpts{catchUp: true, accounts: 50, memberProcess: true})
	warmMember(tb, other)
	r.control = phase("control", dryRuns{on: true}, other)
	return r
}

// holdSnapshot opens the read-only REPEATABLE READ transaction a dry run's
// detection holds (Provider.Open) on w's database, as its reader, and takes
// its snapshot; release ends it.
func holdSnapshot(tb testing.TB, w *world) (release func()) {
	tx, err := pgtest.Pool(tb, w.db.ReadOnly).BeginTx(ctxb, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		tb.Fatal(err)
	}
	var n int64
	if err := tx.QueryRow(ctxb, `SELECT count(*) FROM positions WHERE scope = $1`, w.scope).Scan(&n); err != nil {
		_ = tx.Rollback(ctxb)
		tb.Fatal(err)
	}
	return func() { _ = tx.Rollback(ctxb) }
}

// splitByGate splits live latencies (in arrival order, besideRate from t0)
// by the gate's window at their arrival: open (on) from t0 to the first
// toggle, then alternating, each window counted from gateSettle past its
// start; a write in a window's first gateSettle, or after the last toggle
// plus gate, is in neither.
func splitByGate(lat []time.Duration, t0 time.Time, toggles []time.Time, gate time.Duration) (on, off []time.Duration) {
	starts := append([]time.Time{t0}, toggles...)
	w := 0
	for i, l := range lat {
		due := t0.Add(time.Duration(i) * time.Second / besideRate)
		for w+1 < len(starts) && !due.Before(starts[w+1]) {
			w++
		}
		if due.Sub(starts[w]) < gateSettle || due.Sub(starts[w]) >= gate {
			continue
		}
		if w%2 == 0 {
			on = append(on, l)
		} else {
			off = append(off, l)
		}
	}
	return on, off
}

// loadavg is /proc/loadavg's first three figures ("?" where it cannot be read).
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// warmMember asks w's member for a first page before the phase: a fresh
// member process replays its log to the boundary on its first request
// (its cache then serves every page), seconds of its CPU that a member in
// service spent long before and that would otherwise fall at the phase's
// start in every phase, and be paid back by a paced dry run's first sleep
// for the rest of it.
func warmMember(tb testing.TB, w *world) {
	st := store.New(pgtest.Pool(tb, w.db.Recovery))
	run, err := st.SelectedRun(ctxb, w.scope)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := w.client.Fetch(ctxb, 0, chain.Genesis, run.DescriptorHash, 1); err != nil {
		tb.Fatal(err)
	}
}

// catchUpUnderLease is world.catchUp holding one lease throughout, as the
// recovery worker does; a refused page is returned, not fatal.
func catchUpUnderLease(tb testing.TB, w *world) (refused []string) {
	st := store.New(pgtest.Pool(tb, w.db.Recovery))
	run, err := st.SelectedRun(ctxb, w.scope)
	if err != nil {
		tb.Fatal(err)
	}
	l, err := st.AcquireLease(ctxb, w.scope, "worker", time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	for {
		c, err := st.ReadCursor(ctxb, w.scope)
		if err != nil {
			tb.Fatal(err)
		}
		p, err := w.client.Fetch(ctxb, c.VerifiedThroughSeq, c.ChainDigest, run.DescriptorHash, source.MaxPageEvents)
		if err != nil {
			tb.Fatal(err)
		}
		res, err := st.ApplyPage(ctxb, l, run, p)
		if err != nil {
			return append(refused, fmt.Sprintf("page after %d: %v", c.VerifiedThroughSeq, err))
		}
		if res.Current() {
			return refused
		}
	}
}

func pct(l []time.Duration, p int) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// BenchmarkLiveBesideDryRuns: the live p99 of a catching-up scope with the
// goal's schedule beside it (a dry run of the scope paced at the manager's
// share, every minute) against the same catch-up without one, in
// interleaved rounds (goal ≤ 1.10); unpaced dry runs back to back, every
// 10 s, and of another database (the control); the catch-up's refused
// pages (goal: none).
//
//	PROJECTION_BENCH_EVENTS=400000 go test -run '^$' -bench LiveBesideDryRuns -benchtime 1x ./internal/reconstore
func BenchmarkLiveBesideDryRuns(b *testing.B) {
	for range b.N {
		rounds, share := besideRounds(), besideShare()
		r := liveBesideDryRuns(b, benchEvents(), rounds, share, true)
		alone, sched := pct(pooled(r.alone), 99), pct(pooled(r.scheduled), 99)
		b.ReportMetric(ms(alone), "live_p99_ms")
		b.ReportMetric(ms(sched), "live_scheduled_p99_ms")
		b.ReportMetric(float64(sched)/float64(alone), "p99_scheduled/without")
		for i := range r.scheduled {
			a, s := pct(r.alone[i].live, 99), pct(r.scheduled[i].live, 99)
			b.ReportMetric(ms(a), fmt.Sprintf("live_p99_ms(r%d)", i+1))
			b.ReportMetric(ms(s), fmt.Sprintf("live_scheduled_p99_ms(r%d)", i+1))
			b.ReportMetric(float64(s)/float64(a), fmt.Sprintf("p99_scheduled/without(r%d)", i+1))
		}
		var on, off []time.Duration
		for _, g := range r.gated {
			on, off = append(on, g.on...), append(off, g.off...)
		}
		b.ReportMetric(ms(pct(on, 99)), "live_gated_on_p99_ms")
		b.ReportMetric(ms(pct(off, 99)), "live_gated_off_p99_ms")
		b.ReportMetric(float64(pct(on, 99))/float64(pct(off, 99)), "p99_paced_working/suspended")
		var sp recon.PaceStats
		var done, cut int
		var first, est time.Duration
		for _, p := range r.scheduled {
			sp.Busy, sp.Slept, done, cut = sp.Busy+p.paced.Busy, sp.Slept+p.paced.Slept, done+p.dryRuns, cut+p.cut
			first, est = max(first, p.firstRun), max(est, p.estRun)
		}
		b.ReportMetric(share, "scheduled_share")
		if sp.Busy+sp.Slept > 0 {
			b.ReportMetric(float64(sp.Busy)/float64(sp.Busy+sp.Slept), "scheduled_busy_share")
		}
		b.ReportMetric(float64(done), "scheduled_dry_runs")
		b.ReportMetric(float64(cut), "scheduled_dry_runs_cut")
		b.ReportMetric(first.Seconds(), "scheduled_dry_run_s")
		b.ReportMetric(est.Seconds(), "scheduled_dry_run_est_s")
		if r.backToBack.dryRuns > 0 {
			b.ReportMetric(r.backToBack.firstRun.Seconds(), "unpaced_dry_run_s")
		}
		with, ten, control := pct(r.backToBack.live, 99), pct(r.every10s.live, 99), pct(r.control.live, 99)
		b.ReportMetric(ms(with), "live_dryruns_p99_ms")
		b.ReportMetric(float64(with)/float64(alone), "p99_dryruns/without")
		b.ReportMetric(ms(ten), "live_every10s_p99_ms")
		b.ReportMetric(float64(ten)/float64(alone), "p99_every10s/without")
		b.ReportMetric(ms(control), "live_control_p99_ms")
		b.ReportMetric(float64(with)/float64(control), "p99_dryruns/control")
		if sn := pct(pooled(r.snapshot), 99); sn > 0 {
			b.ReportMetric(ms(sn), "live_snapshot_p99_ms")
			b.ReportMetric(float64(sn)/float64(alone), "p99_snapshot/without")
		}
		if pc := pct(pooled(r.pacedControl), 99); pc > 0 {
			b.ReportMetric(ms(pc), "live_paced_control_p99_ms")
			b.ReportMetric(float64(pc)/float64(alone), "p99_paced_control/without")
			b.ReportMetric(float64(sched)/float64(pc), "p99_scheduled/paced_control")
		}
		b.ReportMetric(float64(r.backToBack.dryRuns), "dry_runs")
		b.ReportMetric(float64(r.refused()), "pages_refused")
	}
}

// TestLiveBesideDryRuns_Small is the benchmark at a size make test affords
// (one round, no every-10-s phase): it asserts only what does not depend
// on the machine's speed. Dry runs ran beside the catch-up, the scheduled
// one paced (it slept), and no page of it was refused (the rehearsal a dry
// run used to make took the worker's lease over).
func TestLiveBesideDryRuns_Small(t *testing.T) {
	r := liveBesideDryRuns(t, 40_000, 1, 0.5, false)
	if r.backToBack.dryRuns == 0 || len(r.backToBack.live) == 0 || len(r.alone[0].live) == 0 || len(r.scheduled[0].live) == 0 {
		t.Fatalf("dry runs %d, live writes %d, %d and %d", r.backToBack.dryRuns, len(r.alone[0].live), len(r.scheduled[0].live), len(r.backToBack.live))
	}
	if s := r.scheduled[0]; s.dryRuns+s.cut == 0 || s.paced.Slept == 0 || s.paced.Pages == 0 {
		t.Fatalf("the scheduled phase's dry run was not paced: %d done, %d cut, %+v", s.dryRuns, s.cut, s.paced)
	}
	if n := r.refused(); n > 0 {
		t.Fatalf("the catch-up was refused beside the dry runs: %d pages", n)
	}
	t.Logf("live p99 %s alone, %s beside a paced scheduled dry run, %s with %d dry runs back to back",
		pct(r.alone[0].live, 99), pct(r.scheduled[0].live, 99), pct(r.backToBack.live, 99), r.backToBack.dryRuns)
}

// splitByGate attributes each live write to the gate window of its arrival
// (open first, then alternating), leaving out a window's first gateSettle.
func TestSplitByGate(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	gate := time.Second
	lat := make([]time.Duration, 3*besideRate+10) // 3 s of arrivals and a few past the last window
	for i := range lat {
		lat[i] = time.Duration(i)
	}
	on, off := splitByGate(lat, t0, []time.Time{t0.Add(gate), t0.Add(2 * gate)}, gate)
	per := int((gate - gateSettle) * besideRate / time.Second)
	if len(on) != 2*per || len(off) != per {
		t.Fatalf("on %d, off %d writes, want %d and %d", len(on), len(off), 2*per, per)
	}
	settle := time.Duration(int(gateSettle * besideRate / time.Second))
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{
		{"first on", on[0], settle},
		{"first off", off[0], time.Duration(besideRate) + settle},
		{"first on after off", on[per], time.Duration(2*besideRate) + settle},
	} {
		if c.got != c.want {
			t.Errorf("%s: write %d, want %d", c.name, c.got, c.want)
		}
	}
}
