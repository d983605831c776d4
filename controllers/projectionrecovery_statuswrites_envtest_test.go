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
package controllers

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/rest"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestEnvtest_CatchUpWritesStatusAtMostOncePerCycle (docs/performance.md):
// during a catch-up a cycle writes status at most once, and what each
// committed page costs the API server is counted (every request the manager
// sends, its start-up, cache and watches included) and bounded.
func TestEnvtest_CatchUpWritesStatusAtMostOncePerCycle(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "writes", 600, 0.3)
	lbl, sel := shard(t, "writes")
	var requests, pages atomic.Int64
	cfg := rest.CopyConfig(restCfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			requests.Add(1)
			return rt.RoundTrip(r)
		})
	}
	stop, rec, err := startManagerOn(cfg, "writes-manager", sel, true, "", func(r *ProjectionRecoveryReconciler) {
		r.OnPageCommitted = func(string, store.PageResult) { pages.Add(1) }
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	obj := f.recovery(ns, "writes", lbl, func(s *recoveryv1.ProjectionRecoverySpec) { s.PageSize, s.PagesPerCycle = 25, 2 })
	waitState(t, ns, obj.Name, 120*time.Second, "CURRENT", isCurrentAt(f.boundary()))
	stop()

	var h dto.Metric
	if err := rec.Metrics.cycles.With(prometheus.Labels{"namespace": ns, "name": obj.Name, "scope": f.scope}).(prometheus.Histogram).Write(&h); err != nil {
		t.Fatal(err)
	}
	cycles, writes, n := float64(h.GetHistogram().GetSampleCount()), rec.Metrics.StatusWrites(), pages.Load()
	perPage := float64(requests.Load()) / float64(n)
	t.Logf("%d pages in %.0f cycles: %.0f status writes, %d API requests (%.2f per page)", n, cycles, writes, requests.Load(), perPage)
	if n < 10 {
		t.Fatalf("only %d pages: the catch-up is too short to measure", n)
	}
	if writes > cycles {
		t.Fatalf("%.0f status writes in %.0f cycles: more than one per cycle", writes, cycles)
	}
	if perPage > 3 {
		t.Fatalf("%.2f API requests per page", perPage)
	}
}
