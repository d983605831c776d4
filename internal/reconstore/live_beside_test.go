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
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/reference/live"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// besideRate is the live projector's arrival rate (events/s); besidePace
// spaces the paced phase's dry runs (a schedule's shortest interval is a
// minute: this is six times as often).
const (
	besideRate = 2000
	besidePace = 10 * time.Second
)

// besideResult is one run of liveBesideDryRuns.
type besideResult struct {
	without, with []time.Duration // live write latencies, per phase
	paced         []time.Duration // dry runs of the scope every besidePace
	control       []time.Duration // the same, dry runs of another database's scope
	dryRuns       int             // dry runs completed during the second phase
	refused       []string        // pages of the catch-up refused (a lease taken over: RETRYING)
}

// liveBesideDryRuns (docs/performance.md): a scope of about events events catching up from
// genesis (pages of the contract's maximum, under its worker's lease) while
// its live projector writes at besideRate, once with no dry run (phase one)
// and once, in a fresh world with the same log, with dry runs of that very
// scope back to back, far more often than a schedule's once a minute (phase
// two), then with one dry run every besidePace (phase three). Each live
// write's latency runs from its scheduled arrival to its
// commit. A page refused during the catch-up (a dry run that took the
// lease over, as its rehearsal once did) is what would make the recovery
// RETRYING.
func liveBesideDryRuns(tb testing.TB, events int, paced bool) besideResult {
	var r besideResult
	commands := int(float64(events)/eventsPerCommand) + 1
	phase := func(scope string, dryRuns bool, every time.Duration, of *world) []time.Duration {
		w := newWorld(tb, scope, commands, worldOpts{accounts: 50, memberProcess: true})
		if of == nil {
			of = w
		}
		wf, err := NewRunner(RunnerConfig{
			Store: store.New(pgtest.Pool(tb, of.db.Reconciliation)), ReadPool: pgtest.Pool(tb, of.db.ReadOnly), Source: of.client,
			Permission: recon.PermissionFunc(func(context.Context, string) (bool, error) { return false, nil }),
			StaleAfter: 5 * time.Minute, Log: logr.Discard(),
		})
		if err != nil {
			tb.Fatal(err)
		}
		gen := &live.Feed{Seq: 1 << 40}
		return live.Drive(w.admin, w.scope, besideRate, gen.Next, func(err error) { tb.Error(err) }, func(context.Context) {
			var stop atomic.Bool
			done := make(chan struct{})
			go func() {
				defer close(done)
				for dryRuns && !stop.Load() {
					start := time.Now()
					if _, err := wf.DryRun(ctxb, of.scope); err != nil {
						tb.Errorf("dry run: %v", err)
						return
					}
					r.dryRuns++
					for every > 0 && !stop.Load() && time.Since(start) < every {
						time.Sleep(50 * time.Millisecond)
					}
				}
			}()
			r.refused = append(r.refused, catchUpUnderLease(tb, w)...)
			stop.Store(true)
			<-done
		})
	}
	r.without = phase("beside-alone", false, 0, nil)
	r.with = phase("beside-dry", true, 0, nil)
	dryRuns := r.dryRuns
	if paced {
		r.paced = phase("beside-paced", true, besidePace, nil)
	}
	// The control: the same dry runs of a scope in another database of the
	// same server, sharing the cores and the disk but no table or lock.
	other := newWorld(tb, "beside-other", commands, worldOpts{catchUp: true, accounts: 50, memberProcess: true})
	r.control = phase("beside-control", true, 0, other)
	r.dryRuns = dryRuns
	return r
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

// BenchmarkLiveBesideDryRuns: the live p99 of a catching-up scope with dry
// runs of it back to back, against the same catch-up without them (goal ≤
// 1.10), and the catch-up's refused pages (goal: none).
//
//	PROJECTION_BENCH_EVENTS=1000000 go test -run '^$' -bench LiveBesideDryRuns -benchtime 1x ./internal/reconstore
func BenchmarkLiveBesideDryRuns(b *testing.B) {
	for range b.N {
		r := liveBesideDryRuns(b, benchEvents(), true)
		without, with, control := pct(r.without, 99), pct(r.with, 99), pct(r.control, 99)
		b.ReportMetric(float64(without)/float64(time.Millisecond), "live_p99_ms")
		b.ReportMetric(float64(with)/float64(time.Millisecond), "live_dryruns_p99_ms")
		b.ReportMetric(float64(with)/float64(without), "p99_dryruns/without")
		b.ReportMetric(float64(pct(r.paced, 99))/float64(time.Millisecond), "live_paced_p99_ms")
		b.ReportMetric(float64(pct(r.paced, 99))/float64(without), "p99_paced/without")
		b.ReportMetric(float64(control)/float64(time.Millisecond), "live_control_p99_ms")
		b.ReportMetric(float64(with)/float64(control), "p99_dryruns/control")
		b.ReportMetric(float64(r.dryRuns), "dry_runs")
		b.ReportMetric(float64(len(r.refused)), "pages_refused")
	}
}

// TestLiveBesideDryRuns_Small is the benchmark at a size make test affords:
// it asserts only what does not depend on the machine's speed. Dry runs
// ran beside the catch-up and no page of it was refused (the rehearsal a
// dry run used to make took the worker's lease over).
func TestLiveBesideDryRuns_Small(t *testing.T) {
	r := liveBesideDryRuns(t, 40_000, false)
	if r.dryRuns == 0 || len(r.with) == 0 || len(r.without) == 0 {
		t.Fatalf("dry runs %d, live writes %d and %d", r.dryRuns, len(r.without), len(r.with))
	}
	if len(r.refused) > 0 {
		t.Fatalf("the catch-up was refused beside the dry runs: %v", r.refused)
	}
	t.Logf("live p99 %s without dry runs, %s with %d dry runs beside", pct(r.without, 99), pct(r.with, 99), r.dryRuns)
}
