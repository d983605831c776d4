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
	"flag"
	"fmt"
	"go.uber.org/goleak"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/completeness"
	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// The envtest suite: a real kube-apiserver + etcd with the generated CRDs, a
// manager running the reconciler (auto-recovery on, a NATS reconnect
// trigger), real PostgreSQL databases and reference members, and a
// non-cached client for assertions (a cached client could pass on stale
// reads and hide a missing status write).
var (
	testEnv   *envtest.Environment
	restCfg   *rest.Config
	k8sClient client.Client
	scheme    = runtime.NewScheme()

	suiteNATS     *natsserver.Server
	suiteNATSPort int
	suiteRec      *ProjectionRecoveryReconciler
	suiteRecon    *ProjectionReconciliationReconciler
	reconClock    = &shiftedClock{}
)

// shardLabel keeps the extra managers of some tests apart from the suite
// manager: the suite manager watches resources without it, a test manager
// only those carrying its value (the --watch-label-selector flag).
const shardLabel = "test.recovery.projection.io/shard"

func TestMain(m *testing.M) {
	if fuzzing() {
		// `make fuzz` runs one pure fuzz target (-run '^$' -fuzz X) in
		// several worker processes: none needs the API server, PostgreSQL or
		// a manager, and starting them per worker would only slow it down.
		os.Exit(m.Run())
	}
	code := runSuite(m)
	pgtest.Shutdown()
	// controller-runtime's metadata-only informers (the Secret watch) wrap
	// their watch in apimachinery's watch.Filter, whose goroutine blocks for
	// good on its unbuffered send when an event arrives after the reflector
	// stopped reading (Stop closes the upstream, not the send): not ours, and
	// nothing can unblock it. A manager runs once per process in production;
	// here managers start and stop per test.
	os.Exit(pgtest.LeakCheck(code, goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop")))
}

// fuzzing reports whether this test binary runs a fuzz target (the
// coordinator with -test.fuzz, or one of its workers).
func fuzzing() bool {
	flag.Parse()
	for _, name := range []string{"test.fuzz", "test.fuzzworker"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" && f.Value.String() != "false" {
			return true
		}
	}
	return false
}

func runSuite(m *testing.M) int {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(recoveryv1.AddToScheme(scheme))
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr), zap.Level(zapLevel()),
		zap.RawZapOpts(uberzap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, capturedLogs.core()) }))))

	var err error
	testEnv, restCfg, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		return 1
	}
	defer func() {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()
	fmt.Fprintln(os.Stderr, "envtest: kube-apiserver and etcd started at", restCfg.Host)

	k8sClient, err = client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	if suiteNATSPort, err = freePort(); err != nil {
		fmt.Fprintln(os.Stderr, "nats port:", err)
		return 1
	}
	if suiteNATS, err = startNATS(suiteNATSPort); err != nil {
		fmt.Fprintln(os.Stderr, "nats:", err)
		return 1
	}
	defer func() { suiteNATS.Shutdown() }()

	sel, _ := labels.Parse("!" + shardLabel)
	stop, rec, err := startManager("suite-manager", sel, true, fmt.Sprintf("nats://127.0.0.1:%d", suiteNATSPort))
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	suiteRec = rec
	code := m.Run()
	stop()
	return code
}

// startManager runs a manager with its own lease owner over the resources
// matching sel. stop cancels it and waits until it has fully stopped
// (including the lease release at shutdown).
func startManager(owner string, sel labels.Selector, autoRecovery bool, natsURL string, opts ...func(*ProjectionRecoveryReconciler)) (stop func(), rec *ProjectionRecoveryReconciler, err error) {
	return startManagerOn(restCfg, owner, sel, autoRecovery, natsURL, opts...)
}

// startManagerOn is startManager on another client configuration (e.g. one
// whose transport counts the API requests).
func startManagerOn(cfg *rest.Config, owner string, sel labels.Selector, autoRecovery bool, natsURL string, opts ...func(*ProjectionRecoveryReconciler)) (stop func(), rec *ProjectionRecoveryReconciler, err error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// As cmd/manager: managed fields are stripped from cached objects.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{&recoveryv1.ProjectionRecovery{}: {Label: sel}},
			DefaultTransform: cache.TransformStripManagedFields()},
		Controller: ctrlConfigUniqueNames(),
	})
	if err != nil {
		return nil, nil, err
	}
	rec = &ProjectionRecoveryReconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Recorder:     mgr.GetEventRecorder("projection-recovery"),
		AutoRecovery: autoRecovery,
		Owner:        owner,
		Connections:  &Connections{},
		Registry:     completeness.NewRegistry(nil),
		Metrics:      NewMetrics(prometheus.NewRegistry()),
	}
	for _, o := range opts {
		o(rec)
	}
	// The schema step follows the auto-recovery flag, as in cmd/manager.
	rec.Connections.ApplySchema = rec.AutoRecovery
	if natsURL != "" {
		trig, err := NewNATSTrigger(natsURL, mgr.GetCache(), ctrl.Log.WithName("nats-trigger"))
		if err != nil {
			return nil, nil, err
		}
		if err := mgr.Add(trig); err != nil {
			return nil, nil, err
		}
		rec.Triggers = trig.Events
		rec.Connections.NATS = trig.Conn()
	}
	if err := rec.SetupWithManager(mgr); err != nil {
		return nil, nil, err
	}
	if owner == "suite-manager" {
		// The reconciliation controller runs on the suite manager only, on
		// the injectable clock (plan expiry tests shift it).
		suiteRecon = &ProjectionReconciliationReconciler{
			Client:     mgr.GetClient(),
			APIReader:  mgr.GetAPIReader(),
			Recorder:   mgr.GetEventRecorder("projection-reconciliation"),
			Clock:      reconClock,
			QueueClock: reconClock,
			// One listed service account (projectionreconciliation_approvalguard_envtest_test.go).
			ApproverServiceAccounts: []string{listedServiceAccount},
			// The manager's NATS connection, as cmd/manager wires it.
			Connections: &Connections{NATS: rec.Connections.NATS},
			Metrics:     NewReconciliationMetrics(prometheus.NewRegistry()),
			// Two workers and a short deadline: a run that hangs
			// (TestEnvtest_ReconciliationRunDeadline) ends within it and
			// holds up no other test's reconciliation meanwhile.
			MaxConcurrentReconciles: 2,
			RunTimeout:              suiteReconRunTimeout,
			// Scheduled dry runs paced as the manager's default: every
			// spec.schedule test detects through the paced path.
			DetectCPU: DefaultReconciliationDetectCPU,
			// This manager's registry, as main wires it.
			Registry: rec.Registry,
		}
		// The counters on the registry the manager serves, as main wires them.
		if suiteRecon.Telemetry, err = ReconciliationTelemetry(); err != nil {
			return nil, nil, err
		}
		if err := suiteRecon.SetupWithManager(mgr); err != nil {
			return nil, nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				fmt.Fprintln(os.Stderr, "manager", owner, "stopped with error:", err)
			}
		})
	}, rec, nil
}

func startNATS(port int) (*natsserver.Server, error) {
	s, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
	if err != nil {
		return nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		return nil, fmt.Errorf("nats-server on port %d not ready", port)
	}
	return s, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return strconv.Atoi(p)
}

func zapLevel() zapcore.Level {
	if os.Getenv("TEST_VERBOSE_LOGS") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel // keep `make test` output readable
}

// newNamespace gives each test its own namespace so tests never see each other's objects.
func newNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "pr-test-"}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

func createSecret(t testing.TB, ns, name string, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
	if err := k8sClient.Create(context.Background(), s); err != nil {
		t.Fatalf("creating secret: %v", err)
	}
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, lastErr)
}

// dbNow is the database clock (leases are judged by it).
func dbNow(t testing.TB, st *store.Store) time.Time {
	t.Helper()
	var now time.Time
	if err := st.Pool().QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// ctrlConfigUniqueNames lets several managers in one process register a
// controller of the same name (each test manager is a separate "process").
func ctrlConfigUniqueNames() config.Controller {
	skip := true
	return config.Controller{SkipNameValidation: &skip}
}
