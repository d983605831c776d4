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
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
	"github.com/projection-recovery/projection-recovery/internal/reference/member"
)

// scaleRun is one manager running many small scopes (issue 12, goal 5).
type scaleRun struct {
	scopes   int
	interval time.Duration // spec.interval of every scope
	idle     time.Duration // how long the idle phase is measured
	commands int           // member history per scope
}

// scaleFigures is what a scale run measured. The CPU and heap are this test
// process's: the manager, its API client and the members' handlers (not the
// API server, etcd or PostgreSQL).
type scaleFigures struct {
	catchUp          time.Duration
	catchUpCPU       time.Duration
	idleCycles       uint64
	idleCPUPerSecond float64
	heapMiB          float64
	// per idle cycle
	secretReads, statusWrites, requests, statements float64
}

// runScopes starts one manager (metadata Secret watch on, as the manager's
// default) over sc.scopes scopes, each with its own member, DSN Secret and
// resource; waits until every one is CURRENT; then measures sc.idle of idle
// cycles.
func runScopes(t testing.TB, sc scaleRun) scaleFigures {
	ctx := context.Background()
	ns := newNamespace(t)
	db := newFixture(t, "scale-db", 1, 0) // one database for every scope
	mux := http.NewServeMux()
	var requests atomic.Int64
	for i := 0; i < sc.scopes; i++ {
		scope := fmt.Sprintf("s%04d", i)
		desc := engine.TestDescriptor(scope)
		lg, err := engine.BuildLog(t.TempDir(), desc, uint64(i+1), engine.WorkloadConfig{Instruments: desc.Instruments, Openings: true}, sc.commands, 0)
		if err != nil {
			t.Fatal(err)
		}
		h := member.NewHandler(lg, member.HandlerOptions{})
		mux.Handle("/"+scope+"/", http.StripPrefix("/"+scope, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			h.ServeHTTP(w, r)
		})))
		if _, err := db.pool.Exec(ctx, `INSERT INTO projection_runs (scope, epoch, managed, selected, phase, descriptor_hash, protocol_version)
VALUES ($1, 1, true, true, 'ACTIVE', $2, 1)`, scope, h.DescriptorHash()); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()

	shard := fmt.Sprintf("scale-%d", sc.scopes)
	lbl, sel := map[string]string{shardLabel: shard}, mustSelector(t, shardLabel+"="+shard)
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	stmts := &statementCounter{}
	reads := &secretCountingReader{}
	stop, _, err := startManager(shard, sel, true, "", func(r *ProjectionRecoveryReconciler) {
		r.Metrics = metrics
		r.MaxConcurrentReconciles = 4
		r.WatchSecrets = true
		reads.Reader = r.APIReader
		r.APIReader = reads
		r.Connections.Tracer = stmts
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	cpu0 := cpuTime()
	start := time.Now()
	for i := 0; i < sc.scopes; i++ {
		scope := fmt.Sprintf("s%04d", i)
		createSecret(t, ns, scope+"-db", map[string]string{"dsn": db.dsn})
		obj := &recoveryv1.ProjectionRecovery{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: scope, Labels: lbl},
			Spec: recoveryv1.ProjectionRecoverySpec{Scope: scope, Source: recoveryv1.SourceSpec{URL: srv.URL + "/" + scope},
				Database: recoveryv1.DatabaseSpec{DSNSecretRef: recoveryv1.SecretKeySelector{Name: scope + "-db", Key: "dsn"}},
				Interval: &metav1.Duration{Duration: sc.interval}},
		}
		if err := k8sClient.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	list := func() map[string]recoveryv1.ProjectionRecoveryStatus {
		var l recoveryv1.ProjectionRecoveryList
		if err := k8sClient.List(ctx, &l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		m := make(map[string]recoveryv1.ProjectionRecoveryStatus, len(l.Items))
		for _, o := range l.Items {
			m[o.Name] = o.Status
		}
		return m
	}
	eventually(t, 10*time.Minute, "every scope CURRENT", func() (bool, error) {
		current := 0
		for _, st := range list() {
			if st.State == recoveryv1.StateCurrent {
				current++
			}
		}
		return current == sc.scopes, nil
	})
	fig := scaleFigures{catchUp: time.Since(start), catchUpCPU: cpuTime() - cpu0}

	// Let the cycles that reached CURRENT finish, then measure.
	time.Sleep(sc.interval / 2)
	cycles0, cpu1 := cycleCount(t, reg), cpuTime()
	sec0, sw0, rq0, st0 := reads.secrets.Load(), metrics.StatusWrites(), requests.Load(), stmts.n.Load()
	before := list()
	if path := os.Getenv("PROJECTION_BENCH_CPUPROFILE"); path != "" {
		stopProfile := cpuProfile(t, path)
		time.Sleep(sc.idle)
		stopProfile()
	} else {
		time.Sleep(sc.idle)
	}
	// A status write while idle is a finding: say which scope and what changed.
	for name, st := range list() {
		if b := before[name]; !equality.Semantic.DeepEqual(b, st) {
			t.Logf("idle status change of %s:\n%s", name, cmp.Diff(b, st))
		}
	}
	fig.idleCycles = cycleCount(t, reg) - cycles0
	fig.idleCPUPerSecond = (cpuTime() - cpu1).Seconds() / sc.idle.Seconds()
	n := float64(max(fig.idleCycles, 1))
	fig.secretReads = float64(reads.secrets.Load()-sec0) / n
	fig.statusWrites = (metrics.StatusWrites() - sw0) / n
	fig.requests = float64(requests.Load()-rq0) / n
	fig.statements = float64(stmts.n.Load()-st0) / n
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fig.heapMiB = float64(ms.HeapInuse) / (1 << 20)
	return fig
}

// cpuProfile writes this process's CPU profile to path until stop is called.
func cpuProfile(t testing.TB, path string) (stop func()) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}

func (f scaleFigures) report(b *testing.B) {
	b.ReportMetric(f.catchUp.Seconds(), "catchup-s")
	b.ReportMetric(f.catchUpCPU.Seconds(), "catchup-cpu-s")
	b.ReportMetric(float64(f.idleCycles), "idle-cycles")
	b.ReportMetric(f.idleCPUPerSecond, "idle-cpu-s/s")
	b.ReportMetric(f.heapMiB, "heap-MiB")
	b.ReportMetric(f.secretReads, "secret-reads/idle-cycle")
	b.ReportMetric(f.statusWrites, "status-writes/idle-cycle")
	b.ReportMetric(f.requests, "requests/idle-cycle")
	b.ReportMetric(f.statements, "statements/idle-cycle")
}

// BenchmarkHundredScopes: 100 scopes on one manager, interval 1 s.
func BenchmarkHundredScopes(b *testing.B) {
	for i := 0; i < b.N; i++ {
		runScopes(b, scaleRun{scopes: 100, interval: time.Second, idle: 5 * time.Second, commands: 60}).report(b)
	}
}

// BenchmarkThousandScopes (issue 12, goal 5): 1,000 small scopes on one
// manager at the 30 s interval catch up from genesis, then idle for one
// interval. Goals: ≤ 0.05 CPU-s/s and ≤ 256 MiB heap idle; per idle cycle
// 0 Secret reads, 0 status writes, ≤ 1 source request, ≤ 2 statements.
//
//	go test -run '^$' -bench ThousandScopes -benchtime 1x -timeout 30m ./controllers
func BenchmarkThousandScopes(b *testing.B) {
	for i := 0; i < b.N; i++ {
		runScopes(b, scaleRun{scopes: 1000, interval: 30 * time.Second, idle: 30 * time.Second, commands: 60}).report(b)
	}
}

// TestManyScopes_Small is BenchmarkThousandScopes at 30 scopes and a 1 s
// interval, so the idle budget is held in `make test`: per idle cycle no
// Secret read, no status write, at most one source request and two SQL
// statements.
func TestManyScopes_Small(t *testing.T) {
	f := runScopes(t, scaleRun{scopes: 30, interval: time.Second, idle: 3 * time.Second, commands: 30})
	t.Logf("30 scopes: catch-up %s (%s CPU); idle: %d cycles, %.3f CPU-s/s; per idle cycle %.2f Secret reads, %.2f status writes, %.2f requests, %.2f statements",
		f.catchUp, f.catchUpCPU, f.idleCycles, f.idleCPUPerSecond, f.secretReads, f.statusWrites, f.requests, f.statements)
	if f.idleCycles < 30 {
		t.Fatalf("%d idle cycles in 3 s of 30 scopes at 1 s", f.idleCycles)
	}
	if f.secretReads != 0 || f.statusWrites != 0 || f.requests > 1 || f.statements > 2 {
		t.Fatalf("idle budget exceeded per cycle: %.2f Secret reads (0), %.2f status writes (0), %.2f requests (≤ 1), %.2f statements (≤ 2)",
			f.secretReads, f.statusWrites, f.requests, f.statements)
	}
}
