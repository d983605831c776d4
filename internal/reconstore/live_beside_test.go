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
	"strconv"
	"sync"
	"sync/atomic"
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
// besideRecheck is how often a waiting scheduled run asks the rule again:
// it stands for the controller's watch of its own recovery, which wakes it
// when that recovery reaches CURRENT.
const (
	besideRate     = 2000
	besideEvery10  = 10 * time.Second
	besideSchedule = time.Minute
	besideRecheck  = time.Second
	// besideTailBound bounds a tail that waits for a deferred run's end.
	besideTailBound = 2 * time.Minute
)

// besideRounds is how many rounds of phases the benchmark interleaves
// (PROJECTION_BENCH_BESIDE_ROUNDS, default 2), so that the machine's noise
// (other work on its cores) falls on every kind of phase.
func besideRounds() int {
	if n, err := strconv.Atoi(os.Getenv("PROJECTION_BENCH_BESIDE_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 2
}

// besideTail is how long the alone, scheduled and paced-control phases go
// on after the catch-up reaches CURRENT (PROJECTION_BENCH_BESIDE_TAIL, a
// duration or seconds, default 30 s): the deferred scheduled run then works
// beside the live projector alone.
func besideTail() time.Duration {
	v := os.Getenv("PROJECTION_BENCH_BESIDE_TAIL")
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	return 30 * time.Second
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
	// wait holds each run, the first included, while recon.ScheduledWait
	// says so, as the controller holds a scheduled one: its scope is
	// catching up, or a catch-up of its database is under way.
	wait bool
	// tail keeps the live projector and the dry runs going this long after
	// the catch-up reaches CURRENT; 0: the phase ends with it. With
	// untilRan the tail also lasts until a run that started after that end
	// completed (at most besideTailBound).
	tail     time.Duration
	untilRan bool
	// snapshot runs no dry run but holds what a run holds throughout: a
	// read-only REPEATABLE READ snapshot of the scope's database, taken
	// at the phase's start, so its cost can be told from the run's work.
	snapshot bool
}

// phaseResult is one phase: its live write latencies split by arrival
// (during the catch-up, and in the tail after it reached CURRENT), its dry
// runs (completed, and cut by the phase's end), what pacing did over them,
// the catch-up's refused pages and the load average at its start.
type phaseResult struct {
	name       string
	live, tail []time.Duration
	dryRuns    int
	cut        int
	// pastDeadline: runs that stopped at their estimate, past the deadline
	// even unpaced (a paced run waiting behind the catch-up's member).
	pastDeadline int
	paced        recon.PaceStats // summed over its dry runs
	// pagesBefore and pagesAfter are the paced pages of the runs that
	// started before the catch-up reached CURRENT and of those after.
	pagesBefore, pagesAfter int
	waited                  time.Duration // held by the rule, over all its runs
	why                     string        // the rule's first reason to hold a run
	named                   string        // the first scope CatchUpUnderWay named ("" none)
	refused                 []string
	took, catchUp           time.Duration // the phase; its catch-up, from the live feed's start
	loadavg                 string
	firstRun                time.Duration // the first dry run's duration (0: none completed)
	estRun                  time.Duration // a paced dry run's last estimate of its whole duration
}

// besideResult is one run of liveBesideDryRuns.
type besideResult struct {
	alone, scheduled, unwaited []phaseResult // interleaved rounds
	pacedControl               []phaseResult // the schedule, dry runs of another database's scope
	snapshot                   []phaseResult // no dry run, its snapshot held throughout
	backToBack, every10s       phaseResult
	control                    phaseResult // back to back, dry runs of another database
}

func (r besideResult) phases() []phaseResult {
	var out []phaseResult
	for i := range r.alone {
		for _, ps := range [][]phaseResult{r.alone, r.scheduled, r.unwaited, r.pacedControl, r.snapshot} {
			if i < len(ps) {
				out = append(out, ps[i])
			}
		}
	}
	return append(out, r.backToBack, r.every10s, r.control)
}

func (r besideResult) refused() (n int) {
	for _, p := range r.phases() {
		n += len(p.refused)
	}
	return n
}

// liveBesideDryRuns (docs/performance.md): a scope of about o.events events
// catching up from genesis (pages of the contract's maximum, under its
// worker's lease) while its live projector, a process of its own as the
// trade-processor is (driveLiveProcess), writes at besideRate, each phase
// in a fresh world with the same log: rounds of (1) no dry run, (2) the
// goal's schedule as the product runs it, a dry run of that scope paced at
// o.share of one CPU every besideSchedule from the end of the last, each
// held by recon.ScheduledWait (so the first waits for the catch-up's end),
// (3) the same schedule not held ("unwaited", the rule's absence), and,
// with o.all, (4) the paced control: the schedule's dry runs of a caught-up
// scope in another database (the rule lets them run: the machine's share),
// and (5) no dry run but its snapshot held (holdSnapshot); then (6) unpaced
// dry runs of it back to back, (7, with o.all) one every besideEvery10, and (8) the
// control, back to back of a scope in another database. Phases 1, 2 and 4
// go on for o.tail after the catch-up reaches CURRENT, the others end with
// it. Each live write's latency runs from its scheduled arrival to its
// commit, and counts in the tail when it arrived after the catch-up
// reached CURRENT. A dry run still running when the phase ends is
// cancelled (counted cut). A page refused during the catch-up (a dry run
// that took the lease over, as its rehearsal once did) is what would make
// the recovery RETRYING.
func liveBesideDryRuns(tb testing.TB, o besideOpts) besideResult {
	var r besideResult
	commands := int(float64(o.events)/eventsPerCommand) + 1
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
		var t0, caughtUp time.Time // the live feed's first arrival; the catch-up's CURRENT
		var current atomic.Bool    // the phase's catch-up reached CURRENT
		ranAfter := make(chan struct{})
		var ranOnce sync.Once
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
				if d.on {
					dryRunLoop(ctx, tb, wf, of.scope, d, of == w, &current, &pr, func() { ranOnce.Do(func() { close(ranAfter) }) })
				}
			}()
			pr.refused = catchUpUnderLease(tb, w, &current)
			caughtUp = time.Now()
			time.Sleep(d.tail)
			if d.untilRan {
				select {
				case <-ranAfter:
				case <-done:
				case <-time.After(besideTailBound):
				}
			}
			stop()
			<-done
		}
		lat := driveLiveProcess(tb, w.db.Admin, w.scope, besideRate, during)
		pr.took, pr.catchUp = time.Since(start), caughtUp.Sub(t0)
		pr.live, pr.tail = splitAtArrival(lat, t0, caughtUp)
		if _, ok := tb.(*testing.B); ok {
			// Straight to stdout: go test keeps only the first ten lines of a
			// benchmark's b.Log output, fewer than a run's phases.
			printPhase(pr)
		}
		return pr
	}
	scheduled := dryRuns{on: true, every: besideSchedule, fromEnd: true, pace: recon.Pace{Share: o.share}, wait: true, tail: o.tail, untilRan: o.untilRan}
	unwaited := scheduled
	unwaited.wait, unwaited.tail, unwaited.untilRan = false, 0, false
	var pacedOther *world
	if o.all {
		pacedOther = newWorld(tb, "beside-other-paced", commands, worldOpts{catchUp: true, accounts: 50, memberProcess: true})
		warmMember(tb, pacedOther)
	}
	for i := range o.rounds {
		r.alone = append(r.alone, phase(fmt.Sprintf("alone-%d", i+1), dryRuns{tail: o.tail}, nil))
		r.scheduled = append(r.scheduled, phase(fmt.Sprintf("scheduled-%d", i+1), scheduled, nil))
		r.unwaited = append(r.unwaited, phase(fmt.Sprintf("unwaited-%d", i+1), unwaited, nil))
		if o.all {
			r.pacedControl = append(r.pacedControl, phase(fmt.Sprintf("paced-ctl-%d", i+1), scheduled, pacedOther))
			r.snapshot = append(r.snapshot, phase(fmt.Sprintf("snapshot-%d", i+1), dryRuns{snapshot: true}, nil))
		}
	}
	r.backToBack = phase("back-to-back", dryRuns{on: true}, nil)
	if o.all {
		r.every10s = phase("every-10s", dryRuns{on: true, every: besideEvery10}, nil)
	}
	// The control: the same dry runs of a scope in another database of the
	// same server, sharing the cores and the disk but no table or lock.
	other := newWorld(tb, "beside-other", commands, worldOpts{catchUp: true, accounts: 50, memberProcess: true})
	warmMember(tb, other)
	r.control = phase("control", dryRuns{on: true}, other)
	return r
}

// besideOpts sizes liveBesideDryRuns: about events events per catch-up,
// rounds of the interleaved phases at share of one CPU, each with a tail
// (untilRan: and until the deferred run ended, as a test needs), and with
// all the paced control, snapshot and every-10-s phases.
type besideOpts struct {
	events, rounds int
	share          float64
	tail           time.Duration
	untilRan, all  bool
}

// dryRunLoop runs d's dry runs of scope until ctx ends, into pr. With
// d.wait each run, the first included, is held while recon.ScheduledWait
// says so, asked every besideRecheck: own is whether the run's scope is
// the one catching up (until current); a run of another database's scope
// waits for that catch-up as for one of its manager's; the other catch-ups
// of its database are the real query (Runner.CatchUpUnderWay), and a run falls due at the loop's start,
// then d.every past the end of the last. A run's paced pages count before
// the catch-up's end unless it started after it; ranAfter is called when
// such a run completes.
func dryRunLoop(ctx context.Context, tb testing.TB, wf *Runner, scope string, d dryRuns, own bool, current *atomic.Bool, pr *phaseResult, ranAfter func()) {
	due := time.Now()
	for ctx.Err() == nil {
		// The catch-up runs in this process, as a manager's worker would:
		// for a scope of another database it is the manager's catch-up.
		catchingUp := func() bool { return !current.Load() }
		if d.wait && !holdScheduled(ctx, tb, wf, due, own, catchingUp, pr) {
			return
		}
		began, after := time.Now(), current.Load()
		// The run's deadline is the manager's default, as in the controller.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		res, err := wf.DryRunWith(rctx, scope, recon.DryRunOptions{Pace: d.pace})
		cancel()
		if res != nil && res.DryRunResult != nil {
			pr.paced.Busy += res.Pacing.Busy
			pr.paced.Slept += res.Pacing.Slept
			pr.paced.Pages += res.Pacing.Pages
			if after {
				pr.pagesAfter += res.Pacing.Pages
			} else {
				pr.pagesBefore += res.Pacing.Pages
			}
			if e := res.Pacing.EstimatedEnd; !e.IsZero() {
				pr.estRun = e.Sub(began)
			}
		}
		if ctx.Err() != nil {
			pr.cut++
			return
		}
		if recon.IsPacedPastDeadline(err) {
			// The product's own answer (Stalled DetectionPacedPastDeadline,
			// tried again in an hour): counted, not a failure of the bench.
			pr.pastDeadline++
			return
		}
		if err != nil {
			tb.Errorf("dry run: %v", err)
			return
		}
		if pr.dryRuns++; pr.dryRuns == 1 {
			pr.firstRun = time.Since(began)
		}
		if after {
			ranAfter()
		}
		from := began
		if d.fromEnd {
			from = time.Now()
		}
		due = from.Add(d.every)
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(due)):
		}
	}
}

// holdScheduled holds a scheduled run due since due while
// recon.ScheduledWait says so, asking again every besideRecheck, and adds
// the time held to pr.waited; false when ctx ended first (or the query
// failed: the test is failed).
func holdScheduled(ctx context.Context, tb testing.TB, wf *Runner, due time.Time, own bool, catchingUp func() bool, pr *phaseResult) bool {
	start := time.Now()
	defer func() { pr.waited += time.Since(start) }()
	for {
		other, err := wf.CatchUpUnderWay(ctx)
		if err != nil {
			if ctx.Err() == nil {
				tb.Errorf("scheduled run: %v", err)
			}
			return false
		}
		if pr.named == "" {
			pr.named = other
		}
		c := recon.CatchUps{Own: own && catchingUp(), Database: other}
		if !own && catchingUp() {
			c.Manager = "the catch-up"
		}
		wait, why := recon.ScheduledWait(c, due, time.Now())
		if !wait {
			return true
		}
		if pr.why == "" {
			pr.why = why
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(besideRecheck):
		}
	}
}

// splitAtArrival splits live latencies (in arrival order, besideRate from
// t0: the i-th arrived at t0 + i/besideRate) by whether they arrived
// before end (during) or from it on (after).
func splitAtArrival(lat []time.Duration, t0, end time.Time) (during, after []time.Duration) {
	n := 0
	for n < len(lat) && t0.Add(time.Duration(n)*time.Second/besideRate).Before(end) {
		n++
	}
	return lat[:n], lat[n:]
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
// recovery worker does; a refused page is returned, not fatal. current is
// set once a page leaves the scope CURRENT, before it returns.
func catchUpUnderLease(tb testing.TB, w *world, current *atomic.Bool) (refused []string) {
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
			current.Store(true)
			return refused
		}
	}
}
