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

// Command demo runs the whole loop locally, started by `make demo`: a real
// kube-apiserver + etcd (envtest, built from source by hack/control-plane.sh)
// with the CRDs, a throwaway PostgreSQL cluster with the trade-processor's
// schema, the reference member trading with a lossy live NATS feed, the live
// projector writing what arrives, the operator with auto-recovery on, and a
// sample ProjectionRecovery. It prints `kubectl get projectionrecoveries` as
// the scope goes CATCHING_UP → CURRENT, then the completeness endpoint.
// With --reconcile (make demo-reconcile) it then walks through a
// reconciliation: a row the trade-processor never wrote BLOCKs the scope, a
// ProjectionReconciliation reports it with a plan, `kubectl projection
// approve` repairs it, and the scope is CURRENT again (reconcile.go).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/reference/live"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

type config struct {
	scope       string
	commands    int
	dropRate    float64
	rate        float64
	exitCurrent bool
	reconcile   bool
	workDir     string
}

func main() {
	var c config
	flag.StringVar(&c.scope, "scope", "venue-a", "projection scope of the demo")
	flag.IntVar(&c.commands, "commands", 4000, "commands the member trades before the operator is started")
	flag.Float64Var(&c.dropRate, "drop-rate", 0.3, "share of live feed events the member drops")
	flag.Float64Var(&c.rate, "rate", 1000, "member commands per second")
	flag.BoolVar(&c.exitCurrent, "exit-when-current", os.Getenv("DEMO_EXIT_WHEN_CURRENT") != "", "stop and clean up once the scope is CURRENT (smoke runs)")
	flag.BoolVar(&c.reconcile, "reconcile", false, "after CURRENT, walk through a reconciliation: break a row, report, approve, verified")
	flag.StringVar(&c.workDir, "work-dir", ".demo", "folder for logs, kubeconfig and the member's command log (recreated)")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

func run(c config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	work, err := workPath(root, c.workDir)
	if err != nil {
		return err
	}
	_ = os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(root, "bin")

	say("starting a local control plane (kube-apiserver + etcd) with the ProjectionRecovery CRD")
	env, cfg, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	user, err := env.AddUser(envtest.User{Name: "demo-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		return err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return err
	}
	assets, _ := testenv.AssetsDir()
	kubectl := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}

	say("starting a throwaway PostgreSQL cluster on loopback")
	pg, err := pgtest.StartCluster()
	if err != nil {
		return err
	}
	defer pg.Stop()
	// The bring-up of every store test (pgtest): the trade-processor's
	// tables, recovery's migrations as the migrator and the roles and grants
	// of docs/database-role.md. The operator connects as its roles; st is
	// the trade-processor's side (runs, live writes, the replay check).
	db, err := recoverydb.Create(ctx, pg.DSN, pgtest.DocDatabase)
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, db.Admin)
	if err != nil {
		return err
	}
	defer st.Close()

	ports, err := freePorts(5)
	if err != nil {
		return err
	}
	memberPort, natsPort, metricsPort, probePort, complPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	memberURL := fmt.Sprintf("http://127.0.0.1:%d", memberPort)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	say("starting the reference member (scope %s, %d commands, %.0f%% of the live feed dropped)", c.scope, c.commands, c.dropRate*100)
	// startMember (re)starts the member on the same log and ports; reopening
	// the log starts a new recording term that trades on to maxCommands.
	startMember := func(maxCommands int) (*testenv.Process, error) {
		return startProcess(work, "member", nil, filepath.Join(bin, "member"),
			"--scope", c.scope, "--log-dir", filepath.Join(work, "member-data"), "--fsync=false",
			"--listen", fmt.Sprintf("127.0.0.1:%d", memberPort), "--nats-listen", fmt.Sprintf("127.0.0.1:%d", natsPort),
			"--drop-rate", fmt.Sprint(c.dropRate), "--rate", fmt.Sprint(c.rate), "--max-commands", fmt.Sprint(maxCommands), "--accounts", "12")
	}
	member, err := startMember(c.commands)
	if err != nil {
		return err
	}
	defer func() { member.Stop(20 * time.Second) }() // member may be restarted by the walk-through
	desc, err := waitDescriptor(ctx, memberURL)
	if err != nil {
		return err
	}
	if _, err := st.Pool().Exec(ctx, `INSERT INTO projection_runs (scope, epoch, managed, selected, phase, descriptor_hash, protocol_version)
VALUES ($1, 1, true, true, 'ACTIVE', $2, $3)`, c.scope, desc.DescriptorHash, desc.ProtocolVersion); err != nil {
		return fmt.Errorf("selecting the run: %w", err)
	}

	say("starting the live projector (the trade-processor's lossy NATS path)")
	nc, err := nats.Connect(natsURL, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	go func() { _ = live.Run(ctx, nc, "projection.events."+c.scope, st.Pool(), c.scope, nil) }()

	say("waiting for the member to trade %d commands", c.commands)
	for {
		d, err := fetchDescriptor(memberURL)
		if err == nil && d.BoundarySeq >= int64(c.commands) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-member.Exited:
			return fmt.Errorf("the member exited (%v); see %s/member.log:\n%s", member.Err, work, tail(filepath.Join(work, "member.log")))
		case <-time.After(500 * time.Millisecond):
		}
	}
	var trades int
	_ = st.Pool().QueryRow(ctx, `SELECT count(*) FROM trades WHERE scope = $1`, c.scope).Scan(&trades)
	say("the live feed left %d trades in SQL, with gaps; starting the operator with auto-recovery on", trades)

	manager, err := startProcess(work, "manager", []string{"KUBECONFIG=" + kubeconfig}, filepath.Join(bin, "manager"),
		"--enable-auto-recovery", "--dev", "--owner-id", "demo-manager", "--nats-url", natsURL,
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", metricsPort),
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", probePort),
		"--completeness-bind-address", fmt.Sprintf("127.0.0.1:%d", complPort))
	if err != nil {
		return err
	}
	defer manager.Stop(20 * time.Second)

	sample := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %[1]s-db, namespace: default}
stringData: {dsn: %[2]q}
---
apiVersion: recovery.projection.io/v1alpha1
kind: ProjectionRecovery
metadata: {name: %[1]s, namespace: default}
spec:
  scope: %[1]s
  source: {url: %[3]q}
  database: {dsnSecretRef: {name: %[1]s-db, key: dsn}}
  pageSize: 250
  pagesPerCycle: 2
  interval: 5s
`, c.scope, db.Recovery, memberURL)
	samplePath := filepath.Join(work, "sample.yaml")
	if err := os.WriteFile(samplePath, []byte(sample), 0o600); err != nil {
		return err
	}
	out, err := kubectl("apply", "-f", samplePath)
	fmt.Print(out)
	if err != nil {
		return err
	}

	say("kubectl get projectionrecoveries (printed whenever it changes)")
	if err := watchTable(ctx, kubectl, "projectionrecoveries", 0, manager, work, func(out string) (bool, error) {
		return strings.Contains(out, " CURRENT "), nil
	}); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	out, _ = kubectl("get", "projectionrecoveries", "-n", "default", "-o", "wide")
	fmt.Print(out)

	say("GET /v2/projection-completeness")
	if body, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/v2/projection-completeness", complPort)); err == nil {
		fmt.Println(body)
	} else {
		fmt.Println("completeness endpoint:", err)
	}
	liveTrades := trades
	_ = st.Pool().QueryRow(ctx, `SELECT count(*) FROM trades WHERE scope = $1`, c.scope).Scan(&trades)
	say("SQL now holds %d trades (the live feed had left %d)", trades, liveTrades)
	keys, err := storetest.VerifyAgainstSource(ctx, memberURL, st.Pool(), c.scope)
	if err != nil {
		return fmt.Errorf("the projection does not match the source: %w", err)
	}
	say("all %d position keys equal an independent replay of the member's log (exact rationals, authoritative order)", keys)

	if c.reconcile {
		w := &walkThrough{ctx: ctx, scope: c.scope, root: root, work: work, bin: bin, kubeconfig: kubeconfig,
			kubectl: kubectl, kubectlPath: filepath.Join(assets, "kubectl"),
			pool: st.Pool(), repairDSN: db.Reconciliation, memberURL: memberURL, manager: manager, commands: c.commands,
			restartMember: func(maxCommands int) (*testenv.Process, error) {
				member.Stop(20 * time.Second)
				m, err := startMember(maxCommands)
				if err == nil {
					member = m
				}
				return m, err
			}}
		if err := w.run(); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("reconciliation walk-through: %w", err)
		}
	}
	if c.exitCurrent {
		say("CURRENT reached; stopping (--exit-when-current)")
		return nil
	}
	say("running. Try: KUBECONFIG=%s %s get prec -w", kubeconfig, filepath.Join(assets, "kubectl"))
	if c.reconcile {
		say("and: %s --kubeconfig %s report %s", filepath.Join(bin, "kubectl-projection"), kubeconfig, reconName)
	}
	say("logs: %s/{member,manager}.log. Press Ctrl-C to stop; everything started here is torn down.", work)
	<-ctx.Done()
	say("stopping")
	return nil
}

// watchTable prints `kubectl get <resource>` whenever it changes (AGE
// aside) until done says so, the timeout (0: none) passes, or the manager
// exits (its log tail is the error then).
func watchTable(ctx context.Context, kubectl func(...string) (string, error), resource string, timeout time.Duration,
	manager *testenv.Process, work string, done func(out string) (bool, error)) error {
	var deadline <-chan time.Time
	if timeout > 0 {
		deadline = time.After(timeout)
	}
	last := ""
	for {
		out, err := kubectl("get", resource, "-n", "default")
		if key := withoutAge(out); err == nil && key != last {
			fmt.Print(stripHeaderAfterFirst(out, last == ""))
			last = key
		}
		if err == nil {
			ok, err := done(out)
			if err != nil {
				return err
			}
			if ok {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-manager.Exited:
			return fmt.Errorf("the manager exited (%v); see %s/manager.log:\n%s", manager.Err, work, tail(filepath.Join(work, "manager.log")))
		case <-deadline:
			return fmt.Errorf("%s did not get there within %s; see %s/manager.log:\n%s", resource, timeout, work, tail(filepath.Join(work, "manager.log")))
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// withoutAge is the table without its AGE column, so only real changes print.
func withoutAge(out string) string {
	var b strings.Builder
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			b.WriteString(strings.Join(f[:len(f)-1], " "))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// stripHeaderAfterFirst drops kubectl's header line after the first print,
// so the output reads as a timeline of the resource.
func stripHeaderAfterFirst(out string, first bool) string {
	if first {
		return out
	}
	if i := strings.IndexByte(out, '\n'); i >= 0 {
		return out[i+1:]
	}
	return out
}

type descriptor struct {
	DescriptorHash  string `json:"descriptorHash"`
	ProtocolVersion int    `json:"protocolVersion"`
	BoundarySeq     int64  `json:"boundarySeq"`
}

func fetchDescriptor(base string) (descriptor, error) {
	var d descriptor
	body, err := httpGet(base + "/recon/descriptor")
	if err != nil {
		return d, err
	}
	return d, json.Unmarshal([]byte(body), &d)
}

func waitDescriptor(ctx context.Context, base string) (descriptor, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := fetchDescriptor(base)
		if err == nil {
			return d, nil
		}
		if time.Now().After(deadline) {
			return d, fmt.Errorf("the member did not answer on %s: %w", base, err)
		}
		select {
		case <-ctx.Done():
			return d, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func httpGet(u string) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), err
}

// freePorts holds n listeners open at once, so the kernel hands out n
// distinct ports, then releases them for the processes to bind.
func freePorts(n int) ([]int, error) {
	var ports []int
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// startProcess runs a binary with extra environment, its output appended to
// <work>/<name>.log (a restarted member keeps its first run's log).
func startProcess(work, name string, env []string, path string, args ...string) (*testenv.Process, error) {
	return testenv.StartProcess(filepath.Join(work, name+".log"), env, path, args...)
}

// workPath resolves --work-dir: an absolute path as given, a relative one
// under the repository. The folder is removed and recreated, so it may not be
// the repository itself or any folder that contains it: "-work-dir ." would
// otherwise delete the checkout, and an absolute path used to be joined
// under the repository instead of being honoured.
func workPath(root, dir string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("--work-dir is empty")
	}
	work := dir
	if !filepath.IsAbs(work) {
		work = filepath.Join(root, work)
	}
	work = filepath.Clean(work)
	if rel, err := filepath.Rel(work, root); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("--work-dir %q is the repository or contains it; it is deleted and recreated, so pick a folder of its own", dir)
	}
	return work, nil
}
