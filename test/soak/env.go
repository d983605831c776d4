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
package soak

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// Env is the soak's world, started once and shared by every batch: a real
// control plane (envtest), a PostgreSQL cluster of its own (the soak
// restarts it, so it never shares the test suite's server), an embedded NATS
// server it can restart, and manager processes built with -race. Managers
// reach the API server through a fault proxy; members are started per
// schedule (batch.go).
type Env struct {
	Work       string
	ManagerBin string
	MemberBin  string

	Kube     client.Client
	kenv     *envtest.Environment
	kubeconf string // the managers' kubeconfig, through APIProxy
	APIProxy *Proxy

	PG   *pgtest.Cluster
	DSN  string        // the soak database as projection_recovery (the Secret's DSN: what the managers connect as)
	Pool *pgxpool.Pool // the harness's own connections as the admin (application_name soak-harness)

	nats    *natsServer
	NatsURL string
	NC      *nats.Conn // the harness's live projectors and notification subscriber

	Managers []*Manager
	logs     logScanner
}

// Namespace of every soak object.
const Namespace = "default"

// SecretName holds the soak database's DSN.
const SecretName = "soak-db"

// StartEnv builds the binaries and starts everything but the members.
func StartEnv(ctx context.Context, work string, managers int, skew func() string) (*Env, error) {
	e := &Env{Work: work}
	ok := false
	defer func() {
		if !ok {
			e.Stop()
		}
	}()
	if err := e.build(); err != nil {
		return nil, err
	}
	kenv, cfg, err := testenv.Start()
	if err != nil {
		return nil, err
	}
	e.kenv = kenv
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = recoveryv1.AddToScheme(scheme)
	if e.Kube, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	api, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	if e.APIProxy, err = StartProxy(api.Host); err != nil {
		return nil, err
	}
	user, err := kenv.AddUser(envtest.User{Name: "soak-manager", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		return nil, err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return nil, err
	}
	kcfg, err := clientcmd.Load(kc)
	if err != nil {
		return nil, err
	}
	for _, c := range kcfg.Clusters {
		c.Server = "https://" + e.APIProxy.Addr()
	}
	e.kubeconf = filepath.Join(work, "kubeconfig")
	if err := clientcmd.WriteToFile(*kcfg, e.kubeconf); err != nil {
		return nil, err
	}

	// The soak crashes PostgreSQL on purpose (restart -m immediate):
	// acknowledged commits must survive it, as on any production server.
	if e.PG, err = pgtest.StartCluster("synchronous_commit=on"); err != nil {
		return nil, err
	}
	if err := e.createDatabase(ctx); err != nil {
		return nil, err
	}
	if err := e.Kube.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: SecretName, Namespace: Namespace},
		StringData: map[string]string{"dsn": e.DSN},
	}); err != nil {
		return nil, fmt.Errorf("dsn secret: %w", err)
	}

	// Below the ephemeral range too: NATS is restarted on this port.
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	port := ports[0]
	e.nats = &natsServer{port: port}
	if err := e.nats.start(); err != nil {
		return nil, err
	}
	e.NatsURL = fmt.Sprintf("nats://127.0.0.1:%d", port)
	if e.NC, err = nats.Connect(e.NatsURL, nats.Name("soak-harness"), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond), nats.ReconnectBufSize(-1)); err != nil {
		return nil, err
	}
	for i := 0; i < managers; i++ {
		m := &Manager{Index: i, Name: fmt.Sprintf("soak-m%d", i+1), e: e}
		m.log = filepath.Join(work, m.Name+".log")
		if err := m.start(skew()); err != nil {
			return nil, err
		}
		e.Managers = append(e.Managers, m)
	}
	ok = true
	return e, nil
}

func (e *Env) build() error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	out := filepath.Join(root, "bin", "soak")
	e.ManagerBin, e.MemberBin = filepath.Join(out, "manager"), filepath.Join(out, "member")
	if dir := os.Getenv(testenv.BinDirEnv); dir != "" {
		// make test built them moments ago with the flags below (make build-soak).
		m, b := filepath.Join(dir, "soak", "manager"), filepath.Join(dir, "soak", "member")
		if isFile(m) && isFile(b) {
			e.ManagerBin, e.MemberBin = m, b
			return nil
		}
	}
	// -race: a data race in the managers or the member fails the soak
	// (their logs are scanned after every batch); -tags soak: the manager
	// honours PROJECTION_SOAK_CLOCK (cmd/manager/clock_soak.go).
	for _, b := range [][]string{
		{"build", "-race", "-tags", "soak", "-o", e.ManagerBin, "./cmd/manager"},
		{"build", "-race", "-o", e.MemberBin, "./cmd/member"},
	} {
		cmd := exec.Command("go", b...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1") // -race needs cgo, whatever make exported
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %v: %w\n%s", b, err, out)
		}
	}
	return nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// createDatabase brings the soak's database up as every store test's
// (pgtest): base tables, recovery's migrations as the migrator, the roles
// and grants of docs/database-role.md.
func (e *Env) createDatabase(ctx context.Context) error {
	db, err := recoverydb.Create(ctx, e.PG.DSN, "soak")
	if err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	e.DSN = db.Recovery
	cfg, err := pgxpool.ParseConfig(db.Admin)
	if err != nil {
		return err
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "soak-harness"
	cfg.MaxConns = 16
	e.Pool, err = pgxpool.NewWithConfig(ctx, cfg)
	return err
}

// Stop tears everything down; safe on a partly started Env.
func (e *Env) Stop() {
	var wg sync.WaitGroup
	for _, m := range e.Managers {
		wg.Add(1)
		go func() { defer wg.Done(); m.stop() }()
	}
	wg.Wait()
	if e.NC != nil {
		e.NC.Close()
	}
	if e.nats != nil {
		e.nats.stop()
	}
	if e.Pool != nil {
		e.Pool.Close()
	}
	if e.PG != nil {
		e.PG.Stop()
	}
	if e.APIProxy != nil {
		_ = e.APIProxy.Close()
	}
	if e.kenv != nil {
		_ = e.kenv.Stop()
	}
}

// BadLines returns race reports, panics and fatal errors the managers and the
// given member logs printed since the last call.
func (e *Env) BadLines(extra ...string) ([]string, error) {
	var bad []string
	paths := extra
	for _, m := range e.Managers {
		paths = append(paths, m.log)
	}
	for _, p := range paths {
		b, err := e.logs.badLines(p)
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		for _, l := range b {
			bad = append(bad, filepath.Base(p)+": "+l)
		}
	}
	return bad, nil
}

// Manager is one manager process, restarted by the faults that kill it.
type Manager struct {
	Index int
	Name  string
	log   string
	e     *Env

	mu     sync.Mutex
	proc   *testenv.Process
	frozen bool
	killed bool // the soak killed the running process (an exit is expected)
}

func (m *Manager) start(skew string) error {
	p, err := testenv.StartProcess(m.log, []string{
		"KUBECONFIG=" + m.e.kubeconf,
		"PGAPPNAME=" + m.Name, // pgx reads it: its backends are told apart in pg_stat_activity
		"PROJECTION_SOAK_CLOCK=" + skew,
	}, m.e.ManagerBin,
		"--enable-auto-recovery", "--owner-id", m.Name, "--nats-url", m.e.NatsURL,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--completeness-bind-address", "0",
		"--max-concurrent-reconciles", "4")
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.proc, m.frozen, m.killed = p, false, false
	m.mu.Unlock()
	return nil
}

func (m *Manager) current() *testenv.Process {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc
}

// Kill sends SIGKILL, preferably while the manager has a transaction open
// (waiting up to a second for one); it reports whether one was open.
func (m *Manager) Kill(ctx context.Context) bool {
	mid := m.e.waitOpenTransaction(ctx, m.Name, time.Second)
	m.mu.Lock()
	p := m.proc
	m.killed = true
	m.mu.Unlock()
	if p != nil {
		p.Kill()
	}
	return mid
}

// Freeze stops the process (SIGSTOP); Thaw continues it.
func (m *Manager) Freeze() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil && m.proc.Alive() {
		m.proc.Signal(syscall.SIGSTOP)
		m.frozen = true
	}
}

func (m *Manager) Thaw() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil && m.frozen {
		m.proc.Signal(syscall.SIGCONT)
		m.frozen = false
	}
}

// Ensure thaws the manager and restarts it when it is not running, as the
// kubelet restarts a container that exited. An exit the soak did not cause is
// returned as unexpected (a crash to report) unless it is the one exit a
// manager is allowed: at start, unable to reach the API server (tolerated
// then names it); the manager is restarted either way.
func (m *Manager) Ensure(skew string) (unexpected error, tolerated string, err error) {
	m.Thaw()
	m.mu.Lock()
	p, killed := m.proc, m.killed
	m.mu.Unlock()
	if p != nil && p.Alive() {
		return nil, "", nil
	}
	if p != nil && !killed {
		last := lastErrorLine(m.log)
		if strings.Contains(last, m.e.APIProxy.Addr()) {
			tolerated = "manager exited at start, API server unreachable (restarted)"
		} else {
			unexpected = fmt.Errorf("%s exited on its own: %v: %q (log %s)", m.Name, p.Err, last, m.log)
		}
	}
	return unexpected, tolerated, m.start(skew)
}

// lastErrorLine is the last "manager: ..." line of a log: what main prints
// when it exits with an error.
func lastErrorLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "manager: ") {
			return lines[i]
		}
	}
	return ""
}

func (m *Manager) stop() {
	if p := m.current(); p != nil {
		p.Stop(20 * time.Second)
	}
}

// waitOpenTransaction polls pg_stat_activity for a backend of app inside a
// transaction.
func (e *Env) waitOpenTransaction(ctx context.Context, app string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var n int
		if err := e.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND xact_start IS NOT NULL`, app).Scan(&n); err == nil && n > 0 {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// TerminateBackends terminates the managers' backends inside a transaction
// (waiting up to a second for one); it returns how many.
func (e *Env) TerminateBackends(ctx context.Context) int {
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var n int
		err := e.Pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name LIKE 'soak-m%' AND xact_start IS NOT NULL`).Scan(&n)
		if err == nil && n > 0 {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0
}

// RestartNATS shuts the NATS server down for down and starts it again on
// the same port.
func (e *Env) RestartNATS(down time.Duration) error {
	e.nats.stop()
	time.Sleep(down)
	return e.nats.start()
}

// natsServer is the embedded NATS server, restartable on one port.
type natsServer struct {
	port int
	s    *natsserver.Server
}

func (n *natsServer) start() error {
	var err error
	for attempt := 0; attempt < 50; attempt++ { // the old listener may linger a moment
		var s *natsserver.Server
		s, err = natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: n.port, NoSigs: true, NoLog: true})
		if err != nil {
			return err
		}
		go s.Start()
		if s.ReadyForConnections(5 * time.Second) {
			n.s = s
			return nil
		}
		s.Shutdown()
		err = fmt.Errorf("nats on port %d not ready", n.port)
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func (n *natsServer) stop() {
	if n.s != nil {
		n.s.Shutdown()
		n.s.WaitForShutdown()
		n.s = nil
	}
}

// freePorts finds n ports for members, below the kernel's ephemeral range:
// a port found free with a listener on :0 and released is soon handed to the
// next :0 listener or outgoing connection (a proxy, a manager's connection),
// and the member that meant to bind it fails with "address already in use"
// (seen at seed 1022870897). Below the range only an explicit bind takes a
// port.
func freePorts(n int) ([]int, error) {
	low := ephemeralLow()
	portMu.Lock()
	defer portMu.Unlock()
	var ports []int
	for tries := 0; len(ports) < n && tries < 20000; tries++ {
		nextPort++
		if nextPort >= low || nextPort < 10000 {
			nextPort = 10000
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", nextPort))
		if err != nil {
			continue
		}
		l.Close()
		ports = append(ports, nextPort)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("found %d of %d free ports below %d", len(ports), n, low)
	}
	return ports, nil
}

var (
	portMu   sync.Mutex
	nextPort = 10000 + os.Getpid()%5000 // two soak runs on one machine start apart
)

// ephemeralLow is the lowest port the kernel hands out on its own.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 11000 {
				return v
			}
		}
	}
	return 32768
}
