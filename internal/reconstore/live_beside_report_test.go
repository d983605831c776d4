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
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// kindStats is one kind of phase pooled over the rounds.
type kindStats struct {
	live, tail              []time.Duration
	paced                   recon.PaceStats
	done, cut               int
	pagesBefore, pagesAfter int
	waited                  time.Duration
	firstRun, estRun        time.Duration // the longest over the rounds
}

func pool(ps []phaseResult) kindStats {
	var k kindStats
	for _, p := range ps {
		k.live, k.tail = append(k.live, p.live...), append(k.tail, p.tail...)
		k.paced.Busy, k.paced.Slept, k.paced.Pages = k.paced.Busy+p.paced.Busy, k.paced.Slept+p.paced.Slept, k.paced.Pages+p.paced.Pages
		k.done, k.cut = k.done+p.dryRuns, k.cut+p.cut
		k.pagesBefore, k.pagesAfter = k.pagesBefore+p.pagesBefore, k.pagesAfter+p.pagesAfter
		k.waited += p.waited
		k.firstRun, k.estRun = max(k.firstRun, p.firstRun), max(k.estRun, p.estRun)
	}
	return k
}

// printPhase is a phase's line on stdout: go test keeps only the first ten
// lines of a benchmark's b.Log output, fewer than a run's phases.
func printPhase(pr phaseResult) {
	why := ""
	if pr.why != "" {
		why = " (" + pr.why + ")"
	}
	if pr.named != "" {
		why += ", the query named " + pr.named
	}
	fmt.Printf("beside: phase %-14s load %s: %5.1f s, catch-up %5.1f s, live p99 %6.1f ms over %d writes during it, %6.1f ms over %d after; "+
		"dry runs %d done + %d cut + %d past their deadline, waited %s%s; paced pages %d before its end + %d after: busy %s slept %s (estimated run %s); pages refused %d\n",
		pr.name, pr.loadavg, pr.took.Seconds(), pr.catchUp.Seconds(), ms(pct(pr.live, 99)), len(pr.live), ms(pct(pr.tail, 99)), len(pr.tail),
		pr.dryRuns, pr.cut, pr.pastDeadline, pr.waited.Round(100*time.Millisecond), why, pr.pagesBefore, pr.pagesAfter,
		pr.paced.Busy.Round(time.Millisecond), pr.paced.Slept.Round(time.Millisecond), pr.estRun.Round(time.Second), len(pr.refused))
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

func pct(l []time.Duration, p int) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// BenchmarkLiveBesideDryRuns: the live p99 of a catching-up scope beside
// the goal's schedule as the product runs it (a dry run of the scope paced
// at the manager's share every minute, held while a catch-up of its
// database is under way) against the same catch-up without one, in
// interleaved rounds, during the catch-up (goal ≤ 1.10) and in the tail
// after it, where the deferred run works; the same schedule not held
// (unwaited), its snapshot alone, the machine's share (the paced control);
// unpaced dry runs back to back, every 10 s, and of another database (the
// control); the catch-up's refused pages (goal: none).
//
//	PROJECTION_BENCH_EVENTS=400000 go test -run '^$' -bench LiveBesideDryRuns -benchtime 1x ./internal/reconstore
func BenchmarkLiveBesideDryRuns(b *testing.B) {
	for range b.N {
		rounds, share := besideRounds(), besideShare()
		r := liveBesideDryRuns(b, besideOpts{events: benchEvents(), rounds: rounds, share: share, tail: besideTail(), all: true})
		alone := pool(r.alone)
		ratio := func(num, den time.Duration, unit string) {
			if num > 0 && den > 0 {
				b.ReportMetric(float64(num)/float64(den), unit)
			}
		}
		b.ReportMetric(ms(pct(alone.live, 99)), "live_alone_p99_ms")
		b.ReportMetric(ms(pct(alone.tail, 99)), "live_alone_tail_p99_ms")
		for _, c := range []struct {
			name   string
			phases []phaseResult
			tail   bool
		}{
			{"scheduled", r.scheduled, true},
			{"unwaited", r.unwaited, false},
			{"paced_control", r.pacedControl, true},
			{"snapshot", r.snapshot, false},
		} {
			k := pool(c.phases)
			b.ReportMetric(ms(pct(k.live, 99)), "live_"+c.name+"_p99_ms")
			ratio(pct(k.live, 99), pct(alone.live, 99), "p99_"+c.name+"/alone")
			if c.tail {
				b.ReportMetric(ms(pct(k.tail, 99)), "live_"+c.name+"_tail_p99_ms")
				ratio(pct(k.tail, 99), pct(alone.tail, 99), "p99_tail_"+c.name+"/alone")
			}
			if c.name == "snapshot" {
				continue
			}
			b.ReportMetric(float64(k.done), c.name+"_dry_runs")
			b.ReportMetric(float64(k.cut), c.name+"_dry_runs_cut")
			b.ReportMetric(float64(k.pagesBefore), c.name+"_pages_before_end")
			b.ReportMetric(float64(k.pagesAfter), c.name+"_pages_after_end")
			b.ReportMetric(k.waited.Seconds(), c.name+"_waited_s")
		}
		for i := range r.scheduled {
			a, s := pct(r.alone[i].live, 99), pct(r.scheduled[i].live, 99)
			ratio(s, a, fmt.Sprintf("p99_scheduled/alone(r%d)", i+1))
			ratio(pct(r.scheduled[i].tail, 99), pct(r.alone[i].tail, 99), fmt.Sprintf("p99_tail_scheduled/alone(r%d)", i+1))
		}
		sched := pool(r.scheduled)
		b.ReportMetric(share, "scheduled_share")
		if sp := sched.paced; sp.Busy+sp.Slept > 0 {
			b.ReportMetric(float64(sp.Busy)/float64(sp.Busy+sp.Slept), "scheduled_busy_share")
		}
		b.ReportMetric(sched.firstRun.Seconds(), "scheduled_dry_run_s")
		b.ReportMetric(sched.estRun.Seconds(), "scheduled_dry_run_est_s")
		if r.backToBack.dryRuns > 0 {
			b.ReportMetric(r.backToBack.firstRun.Seconds(), "unpaced_dry_run_s")
		}
		with, ten, control := pct(r.backToBack.live, 99), pct(r.every10s.live, 99), pct(r.control.live, 99)
		b.ReportMetric(ms(with), "live_dryruns_p99_ms")
		ratio(with, pct(alone.live, 99), "p99_dryruns/alone")
		b.ReportMetric(ms(ten), "live_every10s_p99_ms")
		ratio(ten, pct(alone.live, 99), "p99_every10s/alone")
		b.ReportMetric(ms(control), "live_control_p99_ms")
		ratio(with, control, "p99_dryruns/control")
		b.ReportMetric(float64(r.backToBack.dryRuns), "dry_runs")
		b.ReportMetric(float64(r.refused()), "pages_refused")
	}
}

// TestLiveBesideDryRuns_Small is the benchmark at a size make test affords
// (one round, a tail of 3 s and until the deferred run ended, no paced
// control, snapshot or every-10-s phase): it asserts only what does not
// depend on the machine's speed. The scheduled run was held until
// the catch-up's end (no paced page before it) and then ran (paced pages
// in the tail); the unwaited one read during the catch-up, so the first
// assertion can fail; dry runs ran beside the catch-up and no page of it
// was refused (the rehearsal a dry run used to make took the worker's lease
// over).
func TestLiveBesideDryRuns_Small(t *testing.T) {
	r := liveBesideDryRuns(t, besideOpts{events: 40_000, rounds: 1, share: 0.5, tail: 3 * time.Second, untilRan: true})
	if r.backToBack.dryRuns == 0 || len(r.backToBack.live) == 0 || len(r.alone[0].live) == 0 || len(r.scheduled[0].live) == 0 || len(r.scheduled[0].tail) == 0 {
		t.Fatalf("dry runs %d, live writes %d, %d (+%d after) and %d", r.backToBack.dryRuns, len(r.alone[0].live), len(r.scheduled[0].live), len(r.scheduled[0].tail), len(r.backToBack.live))
	}
	s, u := r.scheduled[0], r.unwaited[0]
	t.Logf("scheduled: %d done + %d cut, waited %s (%s), pages %d before the catch-up's end + %d after, %+v; unwaited: %d done + %d cut, pages %d before, %+v; refused %d",
		s.dryRuns, s.cut, s.waited, s.why, s.pagesBefore, s.pagesAfter, s.paced, u.dryRuns, u.cut, u.pagesBefore, u.paced, r.refused())
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"the scheduled run read no page before the catch-up's end", s.pagesBefore == 0},
		{"the scheduled run waited", s.waited > 0},
		{"the scheduled run read pages after the catch-up's end, paced", s.pagesAfter > 0 && s.paced.Slept > 0},
		{"the unwaited run read pages during the catch-up, paced", u.pagesBefore > 0 && u.paced.Slept > 0},
		{"no page of the catch-up was refused", r.refused() == 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !c.ok {
				t.Error("it did not (the figures are logged above)")
			}
		})
	}
	t.Logf("live p99 %s alone, %s beside the held schedule (%s after, against %s alone), %s beside the unwaited one, %s with %d dry runs back to back",
		pct(r.alone[0].live, 99), pct(s.live, 99), pct(s.tail, 99), pct(r.alone[0].tail, 99), pct(u.live, 99), pct(r.backToBack.live, 99), r.backToBack.dryRuns)
}

// splitAtArrival puts a live write before end when it arrived before it,
// the i-th at t0 + i/besideRate.
func TestSplitAtArrival(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	lat := make([]time.Duration, 3*besideRate)
	step := time.Second / besideRate
	for _, c := range []struct {
		name   string
		end    time.Time
		during int
	}{
		{"before the first arrival", t0.Add(-time.Second), 0},
		{"at the first arrival", t0, 0},
		{"just past the first", t0.Add(1), 1},
		{"at an arrival: it counts after", t0.Add(1000 * step), 1000},
		{"between two arrivals", t0.Add(1000*step + step/2), 1001},
		{"past the last", t0.Add(time.Hour), len(lat)},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, a := splitAtArrival(lat, t0, c.end)
			if len(d) != c.during || len(d)+len(a) != len(lat) {
				t.Fatalf("%d during and %d after, want %d and %d", len(d), len(a), c.during, len(lat)-c.during)
			}
		})
	}
}
