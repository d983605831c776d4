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

// Command benchtable reads the output of `make bench` (every benchmark's
// result lines, in one run) and prints one table: each figure the
// performance issues set a goal for, its value in this run (the median and
// range when a benchmark ran more than once), the goal, and whether the
// median meets it. A figure whose benchmark did not run says so; it is
// never left out.
//
//	hack/bench.sh | tee bin/bench.out; go run ./hack/benchtable < bin/bench.out
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// results maps "BenchmarkName/sub" (the -N GOMAXPROCS suffix removed) to
// its metrics by unit, one value per run of the benchmark (-count), in
// output order.
type results map[string]map[string][]float64

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+\d+\s+(.*)$`)

// parse reads `go test -bench` output; lines that are not results are skipped.
func parse(r io.Reader) (results, error) {
	out := results{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		fields := strings.Fields(m[3])
		metrics := out[m[1]]
		if metrics == nil {
			metrics = map[string][]float64{}
			out[m[1]] = metrics
		}
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			metrics[fields[i+1]] = append(metrics[fields[i+1]], v)
		}
	}
	return out, sc.Err()
}

// sample is a figure's values over the runs of its benchmark: the table
// shows the median, and the range when there is more than one run. A goal
// is judged on the median: one lucky or unlucky run of a noisy machine
// decides nothing (`make bench BENCH_COUNT=3`).
type sample []float64

func (s sample) median() float64 {
	v := append([]float64(nil), s...)
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

func (s sample) spread() (lo, hi float64) {
	lo, hi = s[0], s[0]
	for _, v := range s[1:] {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// figure is one row: how to get its values from the results, and its goal.
type figure struct {
	issue, name string
	value       func(results) (sample, bool)
	goal        string
	met         func(float64) bool // nil: reported, no goal
}

func metric(bench, unit string) func(results) (sample, bool) {
	return func(r results) (sample, bool) {
		v := r[bench][unit]
		return v, len(v) > 0
	}
}

// ratio is a/b of two metrics: run by run when both benchmarks ran as often
// (run i of one against run i of the other, each pair measured in the same
// stretch of the machine's time), else the ratio of their medians.
func ratio(benchA, unitA, benchB, unitB string) func(results) (sample, bool) {
	return func(r results) (sample, bool) {
		a, b := sample(r[benchA][unitA]), sample(r[benchB][unitB])
		if len(a) == 0 || len(b) == 0 {
			return nil, false
		}
		if len(a) != len(b) {
			a, b = sample{a.median()}, sample{b.median()}
		}
		out := make(sample, len(a))
		for i := range a {
			if b[i] == 0 {
				return nil, false
			}
			out[i] = a[i] / b[i]
		}
		return out, true
	}
}

func atLeast(g float64) func(float64) bool { return func(v float64) bool { return v >= g } }
func atMost(g float64) func(float64) bool  { return func(v float64) bool { return v <= g } }

// figures are the goals the benchmarks are judged by, grouped by topic
// (catch-up speed and scale, live writes during a catch-up, dry runs beside
// live writes, detection in memory and time; docs/performance.md). The
// detection goals hold at 4N = 4,000,000 events; a smaller run reports its
// own 4N.
var figures = []figure{
	{"12", "store catch-up from genesis: t(fastest of 3 COPYs of the rows written) / t(catch-up)", metric("BenchmarkCatchUpFromGenesis", "ratio_to_copy"), "≥ 0.8", atLeast(0.8)},
	{"12", "the COPY reference: its slowest of 3 repeats / its fastest", metric("BenchmarkCatchUpFromGenesis", "copy_slowest/fastest"), "", nil},
	{"12", "store catch-up: bytes allocated per event", metric("BenchmarkCatchUpFromGenesis", "B/event"), "≤ 1024", atMost(1024)},
	{"12", "store catch-up: allocations per event", metric("BenchmarkCatchUpFromGenesis", "allocs/event"), "≤ 20", atMost(20)},
	{"12", "store catch-up: events/s", metric("BenchmarkCatchUpFromGenesis", "events/s"), "", nil},
	{"12", "store catch-up: t(COPY of the same rows in as many transactions as it committed slices) / t(catch-up)", metric("BenchmarkCatchUpFromGenesis", "ratio_to_sliced_copy"), "", nil},
	{"12", "COPY of those rows in the catch-up's number of transactions / in one per table", metric("BenchmarkCatchUpFromGenesis", "sliced_copy/copy"), "", nil},
	{"12", "end to end through the manager / store alone (same pages)", metric("BenchmarkEndToEnd", "e2e/store"), "≥ 0.7", atLeast(0.7)},
	{"12", "end to end: events/s", metric("BenchmarkEndToEnd", "e2e_events/s"), "", nil},
	{"12", "re-verification / bootstrap rate", ratio("BenchmarkReverifyFromGenesis", "events/s", "BenchmarkCatchUpFromGenesis", "events/s"), "≥ 0.7", atLeast(0.7)},
	{"12", "bootstrap t(4N)/t(N)", metric("BenchmarkCatchUpFromGenesis", "t4N/tN"), "≤ 4.4", atMost(4.4)},
	{"12", "re-verification t(4N)/t(N)", metric("BenchmarkReverifyFromGenesis", "t4N/tN"), "≤ 4.4", atMost(4.4)},
	{"12", "re-verification: keys whose fold the pages deferred (each re-derived before CURRENT)", metric("BenchmarkReverifyFromGenesis", "deferred_keys"), "", nil},
	{"12", "end to end t(4N)/t(N)", metric("BenchmarkEndToEnd", "t4N/tN"), "≤ 4.4", atMost(4.4)},
	{"12", "1,000 scopes, manager binary: catch-up from genesis, s", metric("BenchmarkThousandScopes/binary", "catchup-s"), "", nil},
	{"12", "1,000 scopes, manager binary: catch-up CPU-s", metric("BenchmarkThousandScopes/binary", "catchup-cpu-s"), "", nil},
	{"12", "1,000 scopes idle, manager binary: CPU-s per s (from /proc, the harness's scrapes outside the window)", metric("BenchmarkThousandScopes/binary", "idle-cpu-s/s"), "≤ 0.05", atMost(0.05)},
	{"12", "1,000 scopes, manager binary: CPU-ms of one /metrics scrape (not in the idle figure; a Prometheus scraping every 30 s adds it / 30 s)", metric("BenchmarkThousandScopes/binary", "metrics-scrape-cpu-ms"), "", nil},
	{"12", "1,000 scopes, manager binary: series on /metrics", metric("BenchmarkThousandScopes/binary", "metrics-series"), "", nil},
	{"12", "1,000 scopes idle, manager binary: heap MiB", metric("BenchmarkThousandScopes/binary", "heap-MiB"), "≤ 256", atMost(256)},
	{"12", "1,000 scopes idle, manager binary: API requests per second (Secret reads and status writes included)", metric("BenchmarkThousandScopes/binary", "idle-api-requests/s"), "0", atMost(0)},
	{"12", "1,000 scopes: Secret reads per idle cycle", metric("BenchmarkThousandScopes/in-process", "secret-reads/idle-cycle"), "0", atMost(0)},
	{"12", "1,000 scopes: status writes per idle cycle", metric("BenchmarkThousandScopes/in-process", "status-writes/idle-cycle"), "0", atMost(0)},
	{"12", "1,000 scopes: source requests per idle cycle", metric("BenchmarkThousandScopes/in-process", "requests/idle-cycle"), "≤ 1 (+1 % for the cycles in flight at the window's edges)", atMost(1.01)},
	{"12", "1,000 scopes: SQL statements per idle cycle", metric("BenchmarkThousandScopes/in-process", "statements/idle-cycle"), "≤ 2 (+1 %, idem)", atMost(2.02)},
	{"12", "1,000 scopes in one process with their members: idle CPU-s per s", metric("BenchmarkThousandScopes/in-process", "idle-cpu-s/s"), "", nil},
	{"12", "3 managers sharded, 3,000 scopes: scopes whose pages two managers committed", metric("BenchmarkThreeManagers/sharded-3000", "scopes-committed-by-two"), "0", atMost(0)},
	{"12", "3 managers sharded, 3,000 scopes: status changes while idle (flapping)", metric("BenchmarkThreeManagers/sharded-3000", "idle-status-changes"), "0", atMost(0)},
	{"12", "3 managers sharded, 3,000 scopes idle: status writes/s", metric("BenchmarkThreeManagers/sharded-3000", "idle-status-writes/s"), "", nil},
	{"12", "3 managers sharded, 3,000 scopes idle: API requests/s", metric("BenchmarkThreeManagers/sharded-3000", "idle-api-requests/s"), "", nil},
	{"12", "3 managers unsharded, 300 scopes: status changes while idle (flapping)", metric("BenchmarkThreeManagers/unsharded-300", "idle-status-changes"), "0", atMost(0)},
	{"12", "3 managers unsharded, 300 scopes: scopes whose pages two managers committed (one at a time: the lease)", metric("BenchmarkThreeManagers/unsharded-300", "scopes-committed-by-two"), "", nil},
	{"12", "3 managers unsharded, 300 scopes idle: API requests/s", metric("BenchmarkThreeManagers/unsharded-300", "idle-api-requests/s"), "", nil},
	{"12", "NATS reconnect edge → CURRENT, ms (a page of a few hundred events)", metric("BenchmarkNATSReconnectToCurrent", "ms_reconnect_to_current"), "≤ one page + 1 s (checked ≤ 1,000)", atMost(1000)},
	{"12", "catch-up: status writes per cycle", metric("BenchmarkEndToEnd", "status_writes/cycle"), "≤ 1", atMost(1)},
	{"12", "catch-up: API requests per page", metric("BenchmarkEndToEnd", "api_requests/page"), "", nil},
	{"14", "live p99 during a catch-up / alone (write slices, default budget)", metric("BenchmarkLiveDuringCatchUp/slices", "p99_during/alone"), "≤ 2", atMost(2)},
	{"14", "live longest wait during a catch-up, ms (write slices)", metric("BenchmarkLiveDuringCatchUp/slices", "during_max_ms"), "≤ 50", atMost(50)},
	{"14", "catch-up rate with live writes / without (write slices)", metric("BenchmarkLiveDuringCatchUp/slices", "rate_live/quiet"), "≥ 0.9", atLeast(0.9)},
	{"14", "control, no lock shared: live p99 beside a catch-up of another database / alone", ratio("BenchmarkLiveDuringCatchUp/slices", "shared_p99_ms", "BenchmarkLiveDuringCatchUp/slices", "alone_p99_ms"), "", nil},
	{"14", "control, no lock shared: live longest wait beside it, ms", metric("BenchmarkLiveDuringCatchUp/slices", "shared_max_ms"), "", nil},
	{"14", "control, no lock shared: catch-up rate with the live writes in another database / without", metric("BenchmarkLiveDuringCatchUp/slices", "rate_beside/quiet"), "", nil},
	{"14", "live on the backlog's own keys: p99 during its catch-up / alone (write slices)", metric("BenchmarkLiveDuringCatchUp/slices", "p99_samekeys/alone"), "≤ 2", atMost(2)},
	{"14", "live on the backlog's own keys: longest wait, ms (write slices)", metric("BenchmarkLiveDuringCatchUp/slices", "samekeys_max_ms"), "≤ 50", atMost(50)},
	{"14", "live on the backlog's own keys: catch-up rate with them / without (write slices)", metric("BenchmarkLiveDuringCatchUp/slices", "rate_samekeys/quiet"), "≥ 0.9", atLeast(0.9)},
	{"14", "live on the backlog's own keys: transactions per page (write slices)", metric("BenchmarkLiveDuringCatchUp/slices", "samekeys_tx/page"), "", nil},
	{"repairs-3", "streamed detection of a clean scope: events at 4N", metric("BenchmarkDetect_CleanScope", "events(4N)"), "", nil},
	{"repairs-3", "detection: peak heap at 4N, MiB", metric("BenchmarkDetect_CleanScope", "peak-heap-MiB(4N)"), "≤ 256 (at 4,000,000 events)", atMost(256)},
	{"repairs-3", "detection: peak heap at N, MiB", metric("BenchmarkDetect_CleanScope", "peak-heap-MiB(N)"), "", nil},
	{"repairs-3", "detection: events/s at 4N", metric("BenchmarkDetect_CleanScope", "events/s(4N)"), "≥ 80000", atLeast(80000)},
	{"repairs-3", "detection: events/s at N", metric("BenchmarkDetect_CleanScope", "events/s(N)"), "", nil},
	{"repairs-3", "detection t(4N)/t(N)", metric("BenchmarkDetect_CleanScope", "t(4N)/t(N)"), "≤ 4.4", atMost(4.4)},
	{"repairs-2", "live p99 during a catch-up, its scope's dry run paced at the manager's share every 60 s and held until the catch-up's end (the product's rule) / none (whole phases, interleaved rounds, pooled)", metric("BenchmarkLiveBesideDryRuns", "p99_scheduled/alone"), "≤ 1.10", atMost(1.10)},
	{"repairs-2", "the same, round 1 / its own alone phase", metric("BenchmarkLiveBesideDryRuns", "p99_scheduled/alone(r1)"), "", nil},
	{"repairs-2", "the same, round 2 / its own alone phase", metric("BenchmarkLiveBesideDryRuns", "p99_scheduled/alone(r2)"), "", nil},
	{"repairs-2", "live p99 after the catch-up's end, the held run working beside the live projector / none (the tail)", metric("BenchmarkLiveBesideDryRuns", "p99_tail_scheduled/alone"), "", nil},
	{"repairs-2", "paced pages the held schedule read before the catch-up's end (0: the wait held)", metric("BenchmarkLiveBesideDryRuns", "scheduled_pages_before_end"), "0", atMost(0)},
	{"repairs-2", "paced pages the held schedule read after it", metric("BenchmarkLiveBesideDryRuns", "scheduled_pages_after_end"), "", nil},
	{"repairs-2", "time the held schedule waited, s (all rounds)", metric("BenchmarkLiveBesideDryRuns", "scheduled_waited_s"), "", nil},
	{"repairs-2", "live p99 during a catch-up beside the same schedule not held / none (the rule's absence)", metric("BenchmarkLiveBesideDryRuns", "p99_unwaited/alone"), "", nil},
	{"repairs-2", "live p99 beside the schedule's dry runs of another database / none (the machine's share alone)", metric("BenchmarkLiveBesideDryRuns", "p99_paced_control/alone"), "", nil},
	{"repairs-2", "live p99 with no dry run but its read-only snapshot held through the catch-up / none", metric("BenchmarkLiveBesideDryRuns", "p99_snapshot/alone"), "", nil},
	{"repairs-2", "live p99 alone during the catch-up, ms (pooled rounds)", metric("BenchmarkLiveBesideDryRuns", "live_alone_p99_ms"), "", nil},
	{"repairs-2", "live p99 beside the held schedule during the catch-up, ms (pooled rounds)", metric("BenchmarkLiveBesideDryRuns", "live_scheduled_p99_ms"), "", nil},
	{"repairs-2", "paced dry runs: busy share of their time (the manager's share is the bound)", metric("BenchmarkLiveBesideDryRuns", "scheduled_busy_share"), "", nil},
	{"repairs-2", "a paced dry run's estimated duration, s (cut at each phase's end), against an unpaced one's", ratio("BenchmarkLiveBesideDryRuns", "scheduled_dry_run_est_s", "BenchmarkLiveBesideDryRuns", "unpaced_dry_run_s"), "", nil},
	{"repairs-2", "live p99, unpaced dry runs every 10 s / none", metric("BenchmarkLiveBesideDryRuns", "p99_every10s/alone"), "", nil},
	{"repairs-2", "live p99, dry runs back to back / none", metric("BenchmarkLiveBesideDryRuns", "p99_dryruns/alone"), "", nil},
	{"repairs-2", "live p99, dry runs of its scope / of another database's (the machine's share removed)", metric("BenchmarkLiveBesideDryRuns", "p99_dryruns/control"), "", nil},
	{"repairs-2", "catch-up pages refused beside dry runs (RETRYING)", metric("BenchmarkLiveBesideDryRuns", "pages_refused"), "0", atMost(0)},
}

// render writes the table as Markdown.
func render(w io.Writer, r results) {
	fmt.Fprintln(w, "| issue | figure | measured | goal | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, f := range figures {
		s, ok := f.value(r)
		measured, goal, met := "not measured", f.goal, "no"
		var v float64
		if ok {
			v = s.median()
			measured = format(v)
			if len(s) > 1 {
				lo, hi := s.spread()
				measured = fmt.Sprintf("%s (%s–%s, n=%d)", measured, format(lo), format(hi), len(s))
			}
		}
		switch {
		case f.met == nil:
			goal, met = "—", "—" // a figure to read, no goal
		case ok && f.met(v):
			met = "yes"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", f.issue, f.name, measured, goal, met)
	}
}

// format prints large figures whole (55000, not 5.5e+04) and small ones
// with four significant digits.
func format(v float64) string {
	if v >= 1000 || v <= -1000 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func main() {
	r, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	render(os.Stdout, r)
}
