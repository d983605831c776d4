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

package member

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/chain"
)

const (
	benchN    = 1000 // commands; the second log has 4*benchN
	benchPage = 100  // maxEvents per page
)

// fullCatchUp serves a whole catch-up from genesis to B with a cold handler
// and returns the events received and the wall time.
func fullCatchUp(b *testing.B, l Log, cache bool) (int, time.Duration) {
	h := NewHandler(l, HandlerOptions{DisableCache: !cache})
	f := serveHandler(b, h)
	start := time.Now()
	a, d, n := int64(0), chain.Genesis, 0
	for {
		p, err := f.Fetch(context.Background(), a, d, l.Descriptor().Hash(), benchPage)
		if err != nil {
			b.Fatal(err)
		}
		if p.Idle {
			break
		}
		n += len(p.Events)
		a, d = p.ThroughSeq, p.DigestThrough
	}
	return n, time.Since(start)
}

// BenchmarkFullCatchUp pages from genesis to B over N and 4N commands, with
// and without the replay cache. Without it every page replays from genesis
// (NFR-APR02), so the cost grows with pages × B, about 16x for 4x the log;
// with it the whole catch-up costs one replay, about 4x.
func BenchmarkFullCatchUp(b *testing.B) {
	small := buildLog(b, benchN, 0)
	large := buildLog(b, 4*benchN, 0)
	for _, cache := range []bool{false, true} {
		b.Run(fmt.Sprintf("cache=%v", cache), func(b *testing.B) {
			var tN, t4N time.Duration
			var eN, e4N int
			for i := 0; i < b.N; i++ {
				n, d := fullCatchUp(b, small, cache)
				eN, tN = eN+n, tN+d
				n, d = fullCatchUp(b, large, cache)
				e4N, t4N = e4N+n, t4N+d
			}
			b.ReportMetric(float64(eN)/tN.Seconds(), "events/s(N)")
			b.ReportMetric(float64(e4N)/t4N.Seconds(), "events/s(4N)")
			b.ReportMetric(tN.Seconds()/float64(b.N), "s(N)")
			b.ReportMetric(t4N.Seconds()/float64(b.N), "s(4N)")
			b.ReportMetric(t4N.Seconds()/tN.Seconds(), "t(4N)/t(N)")
		})
	}
}
