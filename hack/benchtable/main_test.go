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

const sample = `goos: linux
BenchmarkCatchUpFromGenesis-2   	       1	58000000000 ns/op	  0.41 ratio_to_copy	  812.5 B/event	  31 allocs/event	  55000 events/s	  4.1 t4N/tN	 123 B/op
BenchmarkReverifyFromGenesis-2  	       1	 1 ns/op	  27500 events/s	 9.7 t4N/tN
BenchmarkLiveDuringCatchUp/slices-2         	       1	 1 ns/op	 6.7 p99_during/alone	 227 during_max_ms	 0.18 rate_live/quiet
BenchmarkLiveDuringCatchUp/slices-50ms-2    	       1	 1 ns/op	 3.1 p99_during/alone
--- BENCH: BenchmarkThousandScopes-2
PASS
`

// TestTable: each figure comes from its benchmark and unit (a sub-benchmark
// is not confused with a longer-named sibling), cross-benchmark ratios are
// computed, goals are judged, and a benchmark that did not run is reported
// as not measured rather than dropped.
func TestTable(t *testing.T) {
	r, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	render(&b, r)
	out := b.String()
	for _, tc := range []struct{ name, row string }{
		{"ratio below goal", "| 12 | store catch-up from genesis: t(COPY of the rows written) / t(catch-up) | 0.41 | ≥ 0.8 | no |"},
		{"bytes within goal", "| 12 | store catch-up: bytes allocated per event | 812.5 | ≤ 1024 | yes |"},
		{"allocations over goal", "| 12 | store catch-up: allocations per event | 31 | ≤ 20 | no |"},
		{"figure without goal", "| 12 | store catch-up: events/s | 55000 | — | — |"},
		{"cross-benchmark ratio", "| 12 | re-verification / bootstrap rate | 0.5 | ≥ 0.7 | no |"},
		{"linear within goal", "| 12 | bootstrap t(4N)/t(N) | 4.1 | ≤ 4.4 | yes |"},
		{"not run", "| 12 | end to end through the manager / store alone (same pages) | not measured | ≥ 0.7 | no |"},
		{"sub-benchmark, not its sibling", "| 14 | live p99 during a catch-up / alone (write slices, default budget) | 6.7 | ≤ 2 | no |"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(out, tc.row) {
				t.Fatalf("row %q not in\n%s", tc.row, out)
			}
		})
	}
	if n := strings.Count(out, "\n"); n != len(figures)+2 {
		t.Fatalf("%d lines, want a header, a rule and %d figures", n, len(figures))
	}
}
