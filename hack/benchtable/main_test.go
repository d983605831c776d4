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

package main

import (
	"strings"
	"testing"
)

const once = `goos: linux
BenchmarkCatchUpFromGenesis-2   	       1	58000000000 ns/op	  0.41 ratio_to_copy	  812.5 B/event	  31 allocs/event	  55000 events/s	  4.1 t4N/tN	 123 B/op
BenchmarkReverifyFromGenesis-2  	       1	 1 ns/op	  27500 events/s	 9.7 t4N/tN
BenchmarkLiveDuringCatchUp/slices-2         	       1	 1 ns/op	 6.7 p99_during/alone	 227 during_max_ms	 0.18 rate_live/quiet
BenchmarkLiveDuringCatchUp/slices-50ms-2    	       1	 1 ns/op	 3.1 p99_during/alone
BenchmarkDetect_CleanScope-2   	       1	7197413175 ns/op	    443802 events(4N)	    110482 events(N)	     79185 events/s(4N)	     69727 events/s(N)	        59.95 peak-heap-MiB(4N)	        47.21 peak-heap-MiB(N)	        67.45 peak-heap-process-MiB(4N)	         3.537 t(4N)/t(N)
--- BENCH: BenchmarkThousandScopes-2
PASS
`

// TestTable: each figure comes from its benchmark and unit (a sub-benchmark
// is not confused with a longer-named sibling), cross-benchmark ratios are
// computed, goals are judged, and a benchmark that did not run is reported
// as not measured rather than dropped.
func TestTable(t *testing.T) {
	out := table(t, once)
	for _, tc := range []struct{ name, row string }{
		{"ratio below goal", "| 12 | store catch-up from genesis: t(fastest of 3 COPYs of the rows written) / t(catch-up) | 0.41 | ≥ 0.8 | no |"},
		{"bytes within goal", "| 12 | store catch-up: bytes allocated per event | 812.5 | ≤ 1024 | yes |"},
		{"allocations over goal", "| 12 | store catch-up: allocations per event | 31 | ≤ 20 | no |"},
		{"figure without goal", "| 12 | store catch-up: events/s | 55000 | — | — |"},
		{"cross-benchmark ratio", "| 12 | re-verification / bootstrap rate | 0.5 | ≥ 0.7 | no |"},
		{"linear within goal", "| 12 | bootstrap t(4N)/t(N) | 4.1 | ≤ 4.4 | yes |"},
		{"not run", "| 12 | end to end through the manager / store alone (same pages) | not measured | ≥ 0.7 | no |"},
		{"detection heap within goal", "| repairs-3 | detection: peak heap at 4N, MiB | 59.95 | ≤ 256 (at 4,000,000 events) | yes |"},
		{"detection rate under goal", "| repairs-3 | detection: events/s at 4N | 79185 | ≥ 80000 | no |"},
		{"detection linear", "| repairs-3 | detection t(4N)/t(N) | 3.537 | ≤ 4.4 | yes |"},
		{"sub-benchmark, not its sibling", "| 14 | live p99 during a catch-up / alone (write slices, default budget) | 6.7 | ≤ 2 | no |"},
	} {
		t.Run(tc.name, func(t *testing.T) { hasRow(t, out, tc.row) })
	}
	if n := strings.Count(out, "\n"); n != len(figures)+2 {
		t.Fatalf("%d lines, want a header, a rule and %d figures", n, len(figures))
	}
}

// repeated is `make bench BENCH_COUNT=3`: the store's benchmarks ran three
// times each.
const repeated = `BenchmarkCatchUpFromGenesis-2   	       1	1 ns/op	  0.62 ratio_to_copy	  900 B/event	  12 allocs/event	  60000 events/s	  4.9 t4N/tN
BenchmarkCatchUpFromGenesis-2   	       1	1 ns/op	  0.83 ratio_to_copy	  880 B/event	  12 allocs/event	  90000 events/s	  4.2 t4N/tN
BenchmarkCatchUpFromGenesis-2   	       1	1 ns/op	  0.81 ratio_to_copy	  890 B/event	  13 allocs/event	  80000 events/s	  4.3 t4N/tN
BenchmarkReverifyFromGenesis-2  	       1	1 ns/op	  15000 events/s	 12 t4N/tN
BenchmarkReverifyFromGenesis-2  	       1	1 ns/op	  30000 events/s	 11 t4N/tN
BenchmarkReverifyFromGenesis-2  	       1	1 ns/op	  24000 events/s	 13 t4N/tN
`

// TestTable_Repeated: a figure of a benchmark that ran several times is its
// median, shown with its range and count, and judged on the median (one
// slow run does not fail a goal, one fast run does not meet it); a ratio
// of two benchmarks pairs their runs in order.
func TestTable_Repeated(t *testing.T) {
	out := table(t, repeated)
	for _, tc := range []struct{ name, row string }{
		{"median meets, one run does not", "| 12 | store catch-up from genesis: t(fastest of 3 COPYs of the rows written) / t(catch-up) | 0.81 (0.62–0.83, n=3) | ≥ 0.8 | yes |"},
		{"median of a figure without goal", "| 12 | store catch-up: events/s | 80000 (60000–90000, n=3) | — | — |"},
		{"linear on the median, not on its slowest run", "| 12 | bootstrap t(4N)/t(N) | 4.3 (4.2–4.9, n=3) | ≤ 4.4 | yes |"},
		{"ratio run by run: 0.25, 0.333, 0.3", "| 12 | re-verification / bootstrap rate | 0.3 (0.25–0.3333, n=3) | ≥ 0.7 | no |"},
		{"a benchmark that did not run", "| 12 | end to end through the manager / store alone (same pages) | not measured | ≥ 0.7 | no |"},
	} {
		t.Run(tc.name, func(t *testing.T) { hasRow(t, out, tc.row) })
	}
	if got := (sample{3, 1, 4, 2}).median(); got != 2.5 {
		t.Fatalf("median of an even count = %v, want 2.5", got)
	}
}

// table is the table benchtable prints for the bench output in.
func table(t *testing.T, in string) string {
	t.Helper()
	r, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	render(&b, r)
	return b.String()
}

func hasRow(t *testing.T, out, row string) {
	t.Helper()
	if !strings.Contains(out, row) {
		t.Fatalf("row %q not in\n%s", row, out)
	}
}
