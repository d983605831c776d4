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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
	"github.com/projection-recovery/projection-recovery/internal/reference/member"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// scaleRun is one manager running many small scopes (docs/performance.md,
// "Idle cost at 1,000 scopes").
type scaleRun struct {
	scopes   int
	interval time.Duration // spec.interval of every scope
	idle     time.Duration // how long the idle phase is measured
	commands int           // member history per scope
	// managers run side by side (default 1); sharded gives each its own
	// label value (scope i goes to manager i mod managers), otherwise every
	// manager watches every scope and the PostgreSQL lease decides.
	managers int
	sharded  bool
	// external runs the real manager binary (startExternalManager): CPU and
	// heap are then the manager's own, read from its /metrics, and Secret
	// reads are bounded by its API requests (rest_client_requests_total).
	external bool
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
	// several managers: scopes whose pages more than one manager committed,
	// status changes while idle, and what the managers cost the API server.
	sharedScopes       int
	idleStatusChanges  int
	statusWritesPerSec float64
	apiRequestsPerSec  float64
	// binary variant: the CPU one scrape of the first manager's /metrics
	// costs it, and how many series that scrape returns.
	scrapeCPU time.Duration
	series    int
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
		selectRun(t, db.pool, scope, h.DescriptorHash())
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()

	managers := max(sc.managers, 1)
	// One shard label per variant: envtest runs no namespace controller, so
	// an earlier variant's resources (same scope names, older) outlive its
	// run, and a manager selecting them too would give them the scopes
	// (one resource per scope, the oldest) and refuse its own as
	// DuplicateScope.
	base := fmt.Sprintf("scale-%d-%d-%t-%t", sc.scopes, managers, sc.sharded, sc.external)
	shardOf := func(i int) string {
		if sc.sharded {
			return fmt.Sprintf("%s-%d", base, i%managers)
		}
		return base
	}
	type managerRun struct {
		reg     *prometheus.Registry
		metrics *Metrics
	}
	var (
		runs        []managerRun
		apiRequests atomic.Int64
		readers     []*secretCountingReader
		ext         []*externalManager
		stmts       = &statementCounter{}
		ownersMu    sync.Mutex
		owners      = map[string]map[string]bool{} // scope → managers that committed its pages
	)
	for k := 0; k < managers; k++ {
		reg := prometheus.NewRegistry()
		metrics := NewMetrics(reg)
		runs = append(runs, managerRun{reg, metrics})
		cfg := rest.CopyConfig(restCfg)
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				apiRequests.Add(1)
				return rt.RoundTrip(r)
			})
		}
		owner := fmt.Sprintf("%s-m%d", base, k)
		if sc.external {
			ext = append(ext, startExternalManager(t, owner, shardLabel+"="+shardOf(k)))
			continue
		}
		sel := mustSelector(t, shardLabel+"="+shardOf(k))
		stop, _, err := startManagerOn(cfg, owner, sel, true, "", func(r *ProjectionRecoveryReconciler) {
			r.Metrics = metrics
			r.MaxConcurrentReconciles = 4
			r.WatchSecrets = true
			reader := &secretCountingReader{Reader: r.APIReader}
			readers = append(readers, reader)
			r.APIReader = reader
			r.Connections.Tracer = stmts
			r.OnPageCommitted = func(owner string, res store.PageResult) {
				ownersMu.Lock()
				defer ownersMu.Unlock()
				if owners[res.Scope] == nil {
					owners[res.Scope] = map[string]bool{}
				}
				owners[res.Scope][owner] = true
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
	}
	sum := func(name string) (n float64) {
		for _, m := range ext {
			n += m.scrape(t)[name]
		}
		return n
	}
	cycles := func() (n uint64) {
		if sc.external {
			return uint64(sum("projection_recovery_cycle_duration_seconds"))
		}
		for _, m := range runs {
			n += cycleCount(t, m.reg)
		}
		return n
	}
	apiRequestsNow := func() int64 {
		if sc.external {
			return int64(sum("rest_client_requests_total"))
		}
		return apiRequests.Load()
	}
	secretReads := func() (n int64) {
		if sc.external {
			return apiRequestsNow() // an upper bound: a Secret read is an API request
		}
		for _, r := range readers {
			n += r.secrets.Load()
		}
		return n
	}
	statusWrites := func() (n float64) {
		if sc.external {
			return sum("projection_recovery_status_writes_total")
		}
		for _, m := range runs {
			n += m.metrics.StatusWrites()
		}
		return n
	}
	statements := func() int64 {
		if !sc.external {
			return stmts.n.Load()
		}
		// Out of process: the database's committed transactions (an idle
		// cycle's statement is one). Backends flush their counts within
		// about a second, so the idle window's count is close, not exact.
		var n int64
		if err := db.pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	cpuNow := func() time.Duration {
		if !sc.external {
			return cpuTime()
		}
		var d time.Duration
		for _, m := range ext {
			c, err := m.proc.CPU()
			if err != nil {
				t.Fatal(err)
			}
			d += c
		}
		return d
	}

	cpu0 := cpuNow()
	start := time.Now()
	for i := 0; i < sc.scopes; i++ {
		scope := fmt.Sprintf("s%04d", i)
		createSecret(t, ns, scope+"-db", map[string]string{"dsn": db.dsn})
		obj := &recoveryv1.ProjectionRecovery{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: scope, Labels: map[string]string{shardLabel: shardOf(i)}},
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
	fig := scaleFigures{catchUp: time.Since(start), catchUpCPU: cpuNow() - cpu0}

	// Let every scope run one idle cycle after the catch-up (the cycles
	// that reached CURRENT finish, the heap the catch-up grew is collected
	// and its pages returned to the OS), then measure the steady state.
	time.Sleep(sc.interval)
	// In the binary variant the counters come from the managers' /metrics,
	// and a scrape of 1,000 scopes' series is work the manager does: they
	// are read before the CPU window opens and after it closes, so the
	// window holds the managers' idle work alone (one scrape's own cost is
	// reported apart, scrapeCost).
	cycles0 := cycles()
	sec0, sw0, rq0, st0, api0 := secretReads(), statusWrites(), requests.Load(), statements(), apiRequestsNow()
	before := list()
	cpu1, opened := cpuNow(), time.Now()
	if path := os.Getenv("PROJECTION_BENCH_CPUPROFILE"); path != "" && sc.external {
		ext[0].cpuProfile(t, sc.idle, path) // the first manager's, over the idle window
	} else if path != "" {
		stopProfile := cpuProfile(t, path)
		time.Sleep(sc.idle)
		stopProfile()
	} else {
		time.Sleep(sc.idle)
	}
	fig.idleCPUPerSecond = (cpuNow() - cpu1).Seconds() / time.Since(opened).Seconds()
	// A status write while idle is a finding: say which scope and what changed.
	for name, st := range list() {
		if b := before[name]; !equality.Semantic.DeepEqual(b, st) {
			fig.idleStatusChanges++
			if fig.idleStatusChanges <= 3 {
				t.Logf("idle status change of %s:\n%s", name, cmp.Diff(b, st))
			}
		}
	}
	fig.idleCycles = cycles() - cycles0
	n := float64(max(fig.idleCycles, 1))
	fig.secretReads = float64(secretReads()-sec0) / n
	fig.statusWrites = (statusWrites() - sw0) / n
	fig.requests = float64(requests.Load()-rq0) / n
	fig.statements = float64(statements()-st0) / n
	fig.statusWritesPerSec = (statusWrites() - sw0) / sc.idle.Seconds()
	fig.apiRequestsPerSec = float64(apiRequestsNow()-api0) / sc.idle.Seconds()
	ownersMu.Lock()
	for _, o := range owners {
		if len(o) > 1 {
			fig.sharedScopes++
		}
	}
	ownersMu.Unlock()
	if sc.external {
		fig.heapMiB = sum("go_memstats_heap_inuse_bytes") / (1 << 20)
		fig.scrapeCPU, fig.series = ext[0].scrapeCost(t)
		return fig
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fig.heapMiB = float64(ms.HeapInuse) / (1 << 20)
	return fig
}

// edgeAllowance is a per-cycle budget as measured over a window: cycles
// are counted when they end, their requests and statements when sent, so
// the cycles in flight at either edge of the window (at most the workers of
// each manager) may add up to perCycle each.
func edgeAllowance(f scaleFigures, perCycle float64, managers int) float64 {
	const workers = 4 // MaxConcurrentReconciles in runScopes
	return perCycle * (1 + float64(2*workers*managers)/float64(max(f.idleCycles, 1)))
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
	b.ReportMetric(float64(f.sharedScopes), "scopes-committed-by-two")
	b.ReportMetric(float64(f.idleStatusChanges), "idle-status-changes")
	b.ReportMetric(f.statusWritesPerSec, "idle-status-writes/s")
	b.ReportMetric(f.apiRequestsPerSec, "idle-api-requests/s")
	if f.series > 0 {
		b.ReportMetric(float64(f.scrapeCPU.Milliseconds()), "metrics-scrape-cpu-ms")
		b.ReportMetric(float64(f.series), "metrics-series")
	}
}

// BenchmarkHundredScopes: 100 scopes on one manager, interval 1 s.
func BenchmarkHundredScopes(b *testing.B) {
	for i := 0; i < b.N; i++ {
		runScopes(b, scaleRun{scopes: 100, interval: time.Second, idle: 5 * time.Second, commands: 60}).report(b)
	}
}

// BenchmarkThousandScopes (docs/performance.md, "Idle cost at 1,000 scopes"):
// 1,000 small scopes on one manager at the 30 s interval catch up from
// genesis, then idle for one interval; "in-process" counts exactly (Secret
// reads, statements) but its CPU and heap include the 1,000 members and the
// harness; "binary" is the real manager process, its CPU and heap its own.
// Goals: ≤ 0.05 CPU-s/s and ≤ 256 MiB heap idle; per idle cycle 0 Secret
// reads, 0 status writes, ≤ 1 source request, ≤ 2 statements.
//
//	go test -run '^$' -bench ThousandScopes -benchtime 1x -timeout 30m ./controllers
func BenchmarkThousandScopes(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.Run("in-process", func(b *testing.B) {
			runScopes(b, scaleRun{scopes: 1000, interval: 30 * time.Second, idle: 30 * time.Second, commands: 60}).report(b)
		})
		b.Run("binary", func(b *testing.B) {
			runScopes(b, scaleRun{scopes: 1000, interval: 30 * time.Second, idle: 60 * time.Second, commands: 60, external: true}).report(b)
		})
	}
}

// BenchmarkThreeManagers (docs/performance.md, "Several managers"): 3
// managers share 3,000 scopes by label selector (1,000 each), then 3
// unsharded managers run 300 scopes that all of them watch, where the
// PostgreSQL lease decides who works a scope. Reports, per mode: scopes whose
// pages two managers committed (sharded: must be 0; unsharded: a scope is
// only worked by one at a time, the fence sees to that, but a lease may
// change hands), status changes while idle (flapping), idle status writes/s
// and API requests/s.
//
//	go test -run '^$' -bench ThreeManagers -benchtime 1x -timeout 60m ./controllers
func BenchmarkThreeManagers(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.Run("sharded-3000", func(b *testing.B) {
			runScopes(b, scaleRun{scopes: 3000, interval: 30 * time.Second, idle: 30 * time.Second, commands: 30, managers: 3, sharded: true}).report(b)
		})
		b.Run("unsharded-300", func(b *testing.B) {
			runScopes(b, scaleRun{scopes: 300, interval: 10 * time.Second, idle: 20 * time.Second, commands: 30, managers: 3}).report(b)
		})
	}
}

// TestThreeManagers_Small is BenchmarkThreeManagers at 30 scopes: sharded,
// no scope is worked by two managers; unsharded, three managers on the same
// scopes leave every one CURRENT, and idle, nobody's status changes.
func TestThreeManagers_Small(t *testing.T) {
	for _, sharded := range []bool{true, false} {
		t.Run(fmt.Sprintf("sharded=%t", sharded), func(t *testing.T) {
			f := runScopes(t, scaleRun{scopes: 30, interval: time.Second, idle: 3 * time.Second, commands: 20, managers: 3, sharded: sharded})
			t.Logf("30 scopes, 3 managers: catch-up %s; idle: %d cycles, %.1f status writes/s, %.1f API requests/s, %d status changes; %d scopes committed by two managers",
				f.catchUp, f.idleCycles, f.statusWritesPerSec, f.apiRequestsPerSec, f.idleStatusChanges, f.sharedScopes)
			if sharded && f.sharedScopes != 0 {
				t.Fatalf("%d scopes committed by two sharded managers", f.sharedScopes)
			}
			if f.idleStatusChanges != 0 || f.statusWrites != 0 {
				t.Fatalf("idle: %d status changes, %.2f status writes per cycle (flapping)", f.idleStatusChanges, f.statusWrites)
			}
		})
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
	if f.secretReads != 0 || f.statusWrites != 0 || f.requests > edgeAllowance(f, 1, 1) || f.statements > edgeAllowance(f, 2, 1) {
		t.Fatalf("idle budget exceeded per cycle: %.2f Secret reads (0), %.2f status writes (0), %.2f requests (≤ 1), %.2f statements (≤ 2)",
			f.secretReads, f.statusWrites, f.requests, f.statements)
	}
}

// TestManyScopes_SmallBinary is BenchmarkThousandScopes/binary at 10 scopes:
// the real manager binary, measured from its own /metrics, sends no API
// request while its scopes idle (no Secret read, no status write).
func TestManyScopes_SmallBinary(t *testing.T) {
	f := runScopes(t, scaleRun{scopes: 10, interval: time.Second, idle: 3 * time.Second, commands: 20, external: true})
	t.Logf("10 scopes, manager binary: catch-up %s (%s CPU); idle: %d cycles, %.3f CPU-s/s, heap %.0f MiB, %.2f API requests/s, %.2f status writes, %.2f requests and %.2f statements per cycle",
		f.catchUp, f.catchUpCPU, f.idleCycles, f.idleCPUPerSecond, f.heapMiB, f.apiRequestsPerSec, f.statusWrites, f.requests, f.statements)
	if f.idleCycles < 10 {
		t.Fatalf("%d idle cycles in 3 s of 10 scopes at 1 s", f.idleCycles)
	}
	if f.apiRequestsPerSec != 0 || f.statusWrites != 0 || f.requests > edgeAllowance(f, 1, 1) {
		t.Fatalf("idle: %.2f API requests/s (0), %.2f status writes per cycle (0), %.2f source requests per cycle (≤ 1)", f.apiRequestsPerSec, f.statusWrites, f.requests)
	}
}
