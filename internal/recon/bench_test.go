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

package recon

import (
	"fmt"
	"testing"
)

// BenchmarkDetect_Clean: Detect on a clean scope must be linear in the
// number of events (maps keyed by identity, no nested scans): ns/event
// should stay flat from 10k to 100k events.
func BenchmarkDetect_Clean(b *testing.B) {
	for _, cmds := range []int{2_000, 20_000} {
		s := fixture(cmds)
		events := int(s.Source.EventCount)
		b.Run(fmt.Sprintf("events=%d", events), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				r, err := Detect(s)
				if err != nil || len(r.Findings) != 0 {
					b.Fatalf("clean snapshot: %v, %d findings", err, len(r.Findings))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
		})
	}
}
