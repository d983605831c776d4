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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/reference/live"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// scopeRun is one schedule's running parts: its member (restartable on one
// log and port), the member's fault proxy and the scope's live projector.
type scopeRun struct {
	sch       Schedule
	port      int
	proxy     *Proxy
	logDir    string
	memberLog string
	e         *Env

	mu     sync.Mutex
	member *testenv.Process
	killed bool

	stopLive context.CancelFunc
	boundary int64
}

func (s *scopeRun) memberURL() string { return fmt.Sprintf("http://127.0.0.1:%d", s.port) }

func (s *scopeRun) startMember() error {
	var err error
	for attempt := 0; attempt < 20; attempt++ { // NATS may be restarting
		var p *testenv.Process
		p, err = testenv.StartProcess(s.memberLog, nil, s.e.MemberBin,
			"--scope", s.sch.Scope, "--log-dir", s.logDir, "--fsync=false",
			"--listen", fmt.Sprintf("127.0.0.1:%d", s.port), "--nats-url", s.e.NatsURL,
			"--seed", fmt.Sprint(s.sch.WorkloadSeed), "--accounts", fmt.Sprint(s.sch.Accounts),
			"--rate", fmt.Sprint(s.sch.Rate), "--max-commands", fmt.Sprint(s.sch.Commands),
			"--drop-rate", fmt.Sprint(s.sch.DropRate), "--drop-seed", fmt.Sprint(s.sch.DropSeed))
		if err != nil {
			return err
		}
		if _, err = waitDescriptor(s.memberURL(), 15*time.Second, p); err == nil {
			s.mu.Lock()
			s.member, s.killed = p, false
			s.mu.Unlock()
			return nil
		}
		p.Kill()
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("member %s would not start: %w (log %s)", s.sch.Scope, err, s.memberLog)
}

func (s *scopeRun) killMember() {
	s.mu.Lock()
	p := s.member
	s.killed = true
	s.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// ensureMember restarts a member that is down; an exit the soak did not
// cause is returned as unexpected.
func (s *scopeRun) ensureMember() (unexpected, err error) {
	s.mu.Lock()
	p, killed := s.member, s.killed
	s.mu.Unlock()
	if p != nil && p.Alive() {
		return nil, nil
	}
	if p != nil && !killed {
		unexpected = fmt.Errorf("member %s exited on its own: %v (log %s)", s.sch.Scope, p.Err, s.memberLog)
	}
	return unexpected, s.startMember()
}

type descriptor struct {
	DescriptorHash  string `json:"descriptorHash"`
	ProtocolVersion int    `json:"protocolVersion"`
	BoundarySeq     int64  `json:"boundarySeq"`
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

func fetchDescriptor(base string) (descriptor, error) {
	var d descriptor
	resp, err := httpClient.Get(base + "/recon/descriptor")
	if err != nil {
		return d, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return d, err
	}
	if resp.StatusCode != http.StatusOK {
		return d, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return d, json.Unmarshal(b, &d)
}

func waitDescriptor(base string, within time.Duration, p *testenv.Process) (descriptor, error) {
	deadline := time.Now().Add(within)
	for {
		d, err := fetchDescriptor(base)
		if err == nil {
			return d, nil
		}
		if !p.Alive() {
			return d, fmt.Errorf("exited: %v", p.Err)
		}
		if time.Now().After(deadline) {
			return d, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Batch is one plan run against the environment.
type Batch struct {
	Plan   Plan
	e      *Env
	dir    string
	scopes []*scopeRun
	notes  *notifications
	orders *orderSampler
	logf   func(format string, args ...any)
	// faults counts what was injected, by kind (and proxy mode).
	faults        map[string]int
	faultsMu      sync.Mutex
	natsRestarted atomic.Bool
	failures      []string
	failMu        sync.Mutex
	checked       Checked
	Phases        map[string]time.Duration // wall time of each phase
	locks         map[string]*sync.Mutex
	locksMu       sync.Mutex
	lastMsg       map[string]map[string]string // scope → key → last outbox msg id
}

func (b *Batch) fail(format string, args ...any) {
	b.failMu.Lock()
	defer b.failMu.Unlock()
	b.failures = append(b.failures, fmt.Sprintf("seed=%d: ", b.Plan.Seed)+fmt.Sprintf(format, args...))
}

func (b *Batch) count(kind string) {
	b.faultsMu.Lock()
	b.faults[kind]++
	b.faultsMu.Unlock()
}

// RunBatch runs plan: it starts the schedules' members, live projectors and
// resources, injects the plan's faults, stops them, waits for every scope to
// be CURRENT at its member's boundary, checks every schedule (check.go) and
// cleans up. It returns the batch for its counts and failures.
func (e *Env) RunBatch(ctx context.Context, plan Plan, logf func(string, ...any)) *Batch {
	b := &Batch{Plan: plan, e: e, logf: logf, faults: map[string]int{}, locks: map[string]*sync.Mutex{}, lastMsg: map[string]map[string]string{}, dir: filepath.Join(e.Work, fmt.Sprintf("batch-%d", plan.Seed))}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		b.fail("work dir: %v", err)
		return b
	}
	phase, mark := map[string]time.Duration{}, time.Now()
	step := func(name string) { phase[name] = time.Since(mark).Round(100 * time.Millisecond); mark = time.Now() }
	defer func() { step("cleanup"); b.Phases = phase }()
	b.notes = subscribeNotifications(e.NC)
	defer b.notes.close()
	defer b.cleanup(ctx)
	defer func() { b.orders.stop() }() // set below; stop is idempotent
	if err := b.setup(ctx); err != nil {
		b.fail("setup: %v", err)
		return b
	}
	step("setup")
	b.orders = startOrderSampler(ctx, e.Pool, b.scopeNames())
	b.inject(ctx)
	if err := b.restore(ctx); err != nil {
		b.fail("restoring after the faults: %v", err)
		return b
	}
	step("faults")
	if err := b.awaitMembersDone(ctx); err != nil {
		b.fail("%v", err)
		return b
	}
	step("members done")
	if err := b.awaitCurrent(ctx, 150*time.Second); err != nil {
		b.fail("%v", err)
		return b
	}
	step("current")
	b.orders.stop()
	b.check(ctx)
	step("checks")
	return b
}

func (b *Batch) scopeNames() []string {
	var names []string
	for _, s := range b.scopes {
		names = append(names, s.sch.Scope)
	}
	return names
}

func (b *Batch) setup(ctx context.Context) error {
	ports, err := freePorts(len(b.Plan.Schedules))
	if err != nil {
		return err
	}
	for i, sch := range b.Plan.Schedules {
		s := &scopeRun{sch: sch, port: ports[i], e: b.e,
			logDir: filepath.Join(b.dir, sch.Scope), memberLog: filepath.Join(b.dir, sch.Scope+".member.log")}
		// The live projector subscribes before the member trades, as the
		// trade-processor runs before recovery is ever needed.
		lctx, cancel := context.WithCancel(ctx)
		s.stopLive = cancel
		go func() {
			_ = live.Run(lctx, b.e.NC, "projection.events."+sch.Scope, b.e.Pool, sch.Scope, nil) // the lossy path: a failed live write is what recovery repairs
		}()
		b.scopes = append(b.scopes, s)
	}
	// Members start together: a -race member takes most of a second.
	errs := make([]error, len(b.scopes))
	var wg sync.WaitGroup
	for i, s := range b.scopes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = b.startScope(ctx, s) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startScope starts one schedule: the member's proxy, the member, its
// selected run (the trade-processor's row) and the resource.
func (b *Batch) startScope(ctx context.Context, s *scopeRun) error {
	var err error
	if s.proxy, err = StartProxy(fmt.Sprintf("127.0.0.1:%d", s.port)); err != nil {
		return err
	}
	if err := s.startMember(); err != nil {
		return err
	}
	d, err := fetchDescriptor(s.memberURL())
	if err != nil {
		return err
	}
	if _, err := b.e.Pool.Exec(ctx, `INSERT INTO projection_runs (scope, epoch, managed, selected, phase, descriptor_hash, protocol_version)
VALUES ($1, 1, true, true, 'ACTIVE', $2, $3)`, s.sch.Scope, d.DescriptorHash, d.ProtocolVersion); err != nil {
		return fmt.Errorf("selecting the run of %s: %w", s.sch.Scope, err)
	}
	if err := b.e.Kube.Create(ctx, recoveryFor(s.sch, "http://"+s.proxy.Addr(), b.Plan.Lease)); err != nil {
		return fmt.Errorf("creating %s: %w", s.sch.Scope, err)
	}
	return nil
}

// recoveryFor is the schedule's resource: short intervals, a short lease and
// a short backoff, so a fault's aftermath fits in the batch.
func recoveryFor(sch Schedule, url string, lease time.Duration) *recoveryv1.ProjectionRecovery {
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	return &recoveryv1.ProjectionRecovery{
		ObjectMeta: metav1.ObjectMeta{Name: sch.Scope, Namespace: Namespace},
		Spec: recoveryv1.ProjectionRecoverySpec{
			Scope:         sch.Scope,
			Source:        recoveryv1.SourceSpec{URL: url},
			Database:      recoveryv1.DatabaseSpec{DSNSecretRef: recoveryv1.SecretKeySelector{Name: SecretName, Key: "dsn"}},
			PageSize:      int32(sch.PageSize),
			PagesPerCycle: int32(sch.PagesPerCycle),
			Interval:      d(time.Second),
			LeaseDuration: d(lease),
			CycleTimeout:  d(lease - time.Second),
			Backoff:       &recoveryv1.BackoffSpec{Base: metav1.Duration{Duration: 200 * time.Millisecond}, Cap: metav1.Duration{Duration: 2 * time.Second}},
		},
	}
}

// inject runs every step of the plan at its offset and undoes it after its
// duration; it returns when the last one is undone.
func (b *Batch) inject(ctx context.Context) {
	start := time.Now()
	var wg sync.WaitGroup
	for _, st := range b.Plan.Steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-time.After(time.Until(start.Add(st.At))):
			case <-ctx.Done():
				return
			}
			b.apply(ctx, st)
		}()
	}
	wg.Wait()
}

// resource names what a step acts on; steps on one resource run one after
// the other (two restarts of one member at once would start two processes
// on one log).
func (st Step) resource() string {
	switch st.Kind {
	case KillManager, FreezeManager:
		return fmt.Sprintf("manager-%d", st.Target)
	case RestartPostgres, TerminateBackend:
		return "postgres"
	case RestartNATS:
		return "nats"
	case APIUnreachable:
		return "api"
	default:
		return fmt.Sprintf("member-%d", st.Target)
	}
}

func (b *Batch) lock(resource string) func() {
	b.locksMu.Lock()
	m, ok := b.locks[resource]
	if !ok {
		m = &sync.Mutex{}
		b.locks[resource] = m
	}
	b.locksMu.Unlock()
	m.Lock()
	return m.Unlock
}

func (b *Batch) apply(ctx context.Context, st Step) {
	defer b.lock(st.resource())()
	sleep := func() {
		select {
		case <-time.After(st.For):
		case <-ctx.Done():
		}
	}
	switch st.Kind {
	case KillManager:
		m := b.e.Managers[st.Target]
		if m.Kill(ctx) {
			b.count("kill-manager (mid-transaction)")
		} else {
			b.count("kill-manager")
		}
		sleep()
		skew := b.Plan.Skew()
		if err := m.start(skew); err != nil {
			b.fail("restarting %s: %v", m.Name, err)
		}
		b.count(string(ClockSkew))
	case FreezeManager:
		m := b.e.Managers[st.Target]
		m.Freeze()
		b.count(string(st.Kind))
		sleep()
		m.Thaw()
	case RestartPostgres:
		if err := b.e.PG.Restart(); err != nil {
			b.fail("postgres restart: %v", err)
		}
		b.count(string(st.Kind))
	case TerminateBackend:
		if n := b.e.TerminateBackends(ctx); n > 0 {
			b.count(string(st.Kind))
		} else {
			b.count("terminate-backend (none in a transaction)")
		}
	case RestartNATS:
		b.natsRestarted.Store(true)
		if err := b.e.RestartNATS(st.For); err != nil {
			b.fail("nats restart: %v", err)
		}
		b.count(string(st.Kind))
	case APIUnreachable:
		b.e.APIProxy.Set(st.Proxy)
		b.count(string(st.Kind) + " (" + st.Proxy.Mode.String() + ")")
		sleep()
		b.e.APIProxy.Set(Fault{})
	case RestartMember:
		s := b.scopes[st.Target]
		s.killMember()
		b.count(string(st.Kind))
		sleep()
		if err := s.startMember(); err != nil {
			b.fail("%v", err)
		}
	case MemberFault:
		s := b.scopes[st.Target]
		s.proxy.Set(st.Proxy)
		b.count(string(st.Kind) + " (" + st.Proxy.Mode.String() + ")")
		sleep()
		s.proxy.Set(Fault{})
	}
}

// restore makes sure every part runs again: managers thawed and running,
// members running, proxies passing.
func (b *Batch) restore(ctx context.Context) error {
	b.e.APIProxy.Set(Fault{})
	for _, m := range b.e.Managers {
		unexpected, tolerated, err := m.Ensure(b.Plan.Skew())
		if unexpected != nil {
			b.fail("%v", unexpected)
		}
		if tolerated != "" {
			b.count(tolerated)
		}
		if err != nil {
			return err
		}
	}
	for _, s := range b.scopes {
		s.proxy.Set(Fault{})
		unexpected, err := s.ensureMember()
		if unexpected != nil {
			b.fail("%v", unexpected)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// awaitMembersDone waits until every member has traded all its commands: its
// boundary stops moving. That boundary is the B each scope must reach.
func (b *Batch) awaitMembersDone(ctx context.Context) error {
	deadline := time.Now().Add(90 * time.Second)
	last := make([]int64, len(b.scopes))
	stable := make([]int, len(b.scopes))
	for {
		done := 0
		for i, s := range b.scopes {
			d, err := fetchDescriptor(s.memberURL())
			if err != nil {
				stable[i] = 0
				continue
			}
			if d.BoundarySeq == last[i] && d.BoundarySeq > 0 {
				stable[i]++
			} else {
				last[i], stable[i] = d.BoundarySeq, 0
			}
			if stable[i] >= 4 { // 1 s at 250 ms; members trade at ≥ 300 commands/s
				s.boundary = d.BoundarySeq
				done++
			}
		}
		if done == len(b.scopes) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("members still trading after 90 s: boundaries %v", last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// awaitCurrent waits until every scope's resource is CURRENT at its member's
// boundary, restarting a manager that crashed meanwhile (and reporting it).
func (b *Batch) awaitCurrent(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var behind []string
		for _, s := range b.scopes {
			var pr recoveryv1.ProjectionRecovery
			if err := b.e.Kube.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: s.sch.Scope}, &pr); err != nil {
				behind = append(behind, s.sch.Scope+": "+err.Error())
				continue
			}
			if pr.Status.State != recoveryv1.StateCurrent || pr.Status.VerifiedThroughSeq != s.boundary {
				behind = append(behind, fmt.Sprintf("%s: %s verified=%d B=%d reason=%s %s", s.sch.Scope, pr.Status.State,
					pr.Status.VerifiedThroughSeq, s.boundary, pr.Status.Reason, pr.Status.Message))
			}
		}
		if len(behind) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			sort.Strings(behind)
			return fmt.Errorf("not CURRENT at B within %s after the faults stopped: %s", within, strings.Join(behind, "; "))
		}
		for _, m := range b.e.Managers {
			unexpected, tolerated, err := m.Ensure(b.Plan.Skew())
			if unexpected != nil || err != nil {
				b.fail("while converging: %v %v", unexpected, err)
			}
			if tolerated != "" {
				b.count(tolerated)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// cleanup deletes the batch's resources (the managers remove their
// finalizers), stops its members and live projectors and closes its proxies.
func (b *Batch) cleanup(ctx context.Context) {
	for _, s := range b.scopes {
		pr := &recoveryv1.ProjectionRecovery{ObjectMeta: metav1.ObjectMeta{Name: s.sch.Scope, Namespace: Namespace}}
		if err := b.e.Kube.Delete(ctx, pr); err != nil && !apierrors.IsNotFound(err) {
			b.fail("deleting %s: %v", s.sch.Scope, err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, s := range b.scopes {
		for {
			var pr recoveryv1.ProjectionRecovery
			err := b.e.Kube.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: s.sch.Scope}, &pr)
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				b.fail("%s still present 60 s after its deletion (finalizers %v)", s.sch.Scope, pr.Finalizers)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var wg sync.WaitGroup
	for _, s := range b.scopes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.mu.Lock()
			p := s.member
			s.mu.Unlock()
			if p != nil {
				p.Stop(10 * time.Second)
			}
			if s.proxy != nil {
				_ = s.proxy.Close()
			}
			s.stopLive()
		}()
	}
	wg.Wait()
}
