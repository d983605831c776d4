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
	"context"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/completeness"
)

// statementCounter counts every SQL statement a pool sends.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// BenchmarkIdleCurrentScope measures what one periodic cycle of an idle,
// CURRENT scope costs: source requests, SQL statements and status writes per
// reconcile (goal: ≤ 1, ≤ 2, 0).
func BenchmarkIdleCurrentScope(b *testing.B) {
	ns := newNamespace(b)
	f := newFixture(b, "idle", 200, 0.2)
	lbl := map[string]string{shardLabel: "bench-idle"} // no manager watches it: the benchmark drives Reconcile
	obj := f.recovery(ns, "idle", lbl, nil)

	stmts := &statementCounter{}
	metrics := NewMetrics(prometheus.NewRegistry())
	r := &ProjectionRecoveryReconciler{Client: scopeIndexedClient{k8sClient}, APIReader: k8sClient, AutoRecovery: true, Owner: "bench-idle",
		Connections: &Connections{Tracer: stmts}, Registry: completeness.NewRegistry(nil), Metrics: metrics}
	r.Clock = clock.RealClock{}
	b.Cleanup(func() { releaseAll(b, r.Connections, "bench-idle") })
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)}
	for i := 0; i < 1000; i++ {
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		if got := getRecovery(b, ns, obj.Name); got.Status.State == recoveryv1.StateCurrent {
			break
		}
	}
	if got := getRecovery(b, ns, obj.Name); got.Status.State != recoveryv1.StateCurrent {
		b.Fatalf("scope did not become CURRENT: %+v", got.Status)
	}
	// One more reconcile settles the first idle probe; then measure.
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		b.Fatal(err)
	}
	// At least 100 reconciles, so `make bench` (-benchtime=1x) still averages.
	rounds := max(b.N, 100)
	req0, st0, sw0 := f.requests.Load(), stmts.n.Load(), metrics.StatusWrites()
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	n := float64(rounds)
	b.ReportMetric(float64(f.requests.Load()-req0)/n, "requests/op")
	b.ReportMetric(float64(stmts.n.Load()-st0)/n, "statements/op")
	b.ReportMetric((metrics.StatusWrites()-sw0)/n, "statuswrites/op")
}

func mustSelector(b testing.TB, s string) labels.Selector {
	b.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		b.Fatal(err)
	}
	return sel
}

// cycleCount sums the cycle histogram's sample counts over every scope.
func cycleCount(b testing.TB, reg *prometheus.Registry) uint64 {
	b.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if strings.HasSuffix(mf.GetName(), "cycle_duration_seconds") {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// cpuTime is the user+system CPU this process (manager, apiserver client,
// member handlers; not the apiserver or PostgreSQL) has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkNATSReconnectToCurrent (FR-APR10, docs/performance.md): a CURRENT
// scope with a one-hour interval falls behind while the NATS server is down
// (the live feed's events of that time are lost to the live projector); from
// the moment the server is back, the manager's reconnect edge triggers a
// cycle and the scope is CURRENT again at the new boundary. Reports that time
// (status polled every 5 ms) and the commands the scope fell behind by.
//
//	go test -run '^$' -bench NATSReconnectToCurrent -benchtime 1x ./controllers
func BenchmarkNATSReconnectToCurrent(b *testing.B) {
	const behind = 200
	ns := newNamespace(b)
	// `go test -bench` calls a benchmark more than once; newFixture gives
	// each call a scope of its own (freshScope).
	f := newFixture(b, "bench-natsedge", 60, 0.2)
	obj := f.recovery(ns, f.scope, nil, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.Interval = &metav1.Duration{Duration: time.Hour}
		s.PageSize = 1000
	})
	current := func(boundary int64, timeout time.Duration) bool {
		for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if o := getRecovery(b, ns, obj.Name); o.Status.State == recoveryv1.StateCurrent && o.Status.VerifiedThroughSeq == boundary {
				return true
			}
		}
		return false
	}
	if !current(f.boundary(), time.Minute) {
		b.Fatal("the scope never became CURRENT")
	}
	var total time.Duration
	for i := 0; i < b.N; i++ {
		suiteNATS.Shutdown()
		suiteNATS.WaitForShutdown()
		f.step(behind)
		var err error
		if suiteNATS, err = startNATS(suiteNATSPort); err != nil {
			b.Fatal(err)
		}
		back := time.Now()
		if !current(f.boundary(), 30*time.Second) {
			b.Fatalf("not CURRENT at %d 30 s after NATS came back", f.boundary())
		}
		total += time.Since(back)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms_reconnect_to_current")
	b.ReportMetric(behind, "commands_behind")
}
