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
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/pgtest"
)

// TestEnvtest_RepairDSNNeverLeaks: the repair DSN is a secret the
// ProjectionReconciliation references, like the recovery's DSN. Its
// database goes away after the plan was made (an outage: the Secret, and so
// the approval's binding, unchanged), and an approved apply and a rollback
// both fail on it, each with pgx's connection error. pgx
// never prints a password itself, but it echoes the role's name; the repair
// role here shares its password's text (as throwaway setups do:
// postgres:postgres), so the error carries the password as it would any
// echoed part of the DSN. With every log line captured at debug level, the
// password and the DSN appear in no status the reconciliation went through,
// no Event and no log line; the errors themselves do reach status and the
// Refused events (the failures are reported, only the secret is not).
func TestEnvtest_RepairDSNNeverLeaks(t *testing.T) {
	ns := newNamespace(t)
	pw := distinctive("pw-repair")
	capturedLogs.start()
	stopped := false
	stopCapture := func() string {
		stopped = true
		return capturedLogs.stop()
	}
	defer func() {
		if !stopped {
			capturedLogs.stop()
		}
	}()
	sc := newRepairOutage(t, ns, "leak-repair", pw, pw, 0)
	secrets := map[string]string{"repair password": pw, "repair DSN": sc.dsn}

	var statuses []recoveryv1.ProjectionReconciliationStatus
	specAsAlice(t, ns, sc.name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval = sc.approval() })
	o := waitRecon(t, ns, sc.name, "the approved apply refused on the unreachable repair database", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.Outcome != nil && o.Status.Outcome.Operation == opApply && o.Status.Outcome.Result != resultOK && o.Status.ObservedGeneration == o.Generation
	})
	statuses = append(statuses, o.Status)
	applied := o.Status.Outcome

	specAsAlice(t, ns, sc.name, func(s *recoveryv1.ProjectionReconciliationSpec) {
		s.Approval = nil
		s.Rollback = &recoveryv1.ReconciliationRollback{CorrelationID: "leak-run-1", Binding: sc.plan.Binding,
			Approver: "alice", ApproverGroups: []string{"system:authenticated"}}
	})
	o = waitRecon(t, ns, sc.name, "the rollback refused on the unreachable repair database", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.Outcome != nil && o.Status.Outcome.Operation == opRollback && o.Status.ObservedGeneration == o.Generation
	})
	statuses = append(statuses, o.Status)
	rolledBack := o.Status.Outcome

	// The failures are reported: each outcome says what failed, naming the
	// database it could not reach (only the secret is taken out).
	for _, oc := range []*recoveryv1.OutcomeSummary{applied, rolledBack} {
		if oc.Result == resultOK || !strings.Contains(oc.Message, sc.proxy.addr) {
			t.Errorf("%s outcome %s %q: want the connection failure to %s reported", oc.Operation, oc.Result, oc.Message, sc.proxy.addr)
		}
	}
	refused := map[string]bool{}
	eventually(t, 20*time.Second, "a Refused event for the apply and one for the rollback", func() (bool, error) {
		for _, e := range reconEvents(t, ns, sc.name) {
			if e.Reason == ReasonRefused {
				refused[e.Action] = true
			}
		}
		return refused[opApply] && refused[opRollback], nil
	})
	time.Sleep(time.Second) // the recorder logs the last events asynchronously
	logs := stopCapture()
	if len(logs) == 0 {
		t.Fatal("no log line captured: the capture is broken, so this test proves nothing")
	}

	surfaces := map[string]string{"logs": logs, "events": string(mustMarshal(t, reconEvents(t, ns, sc.name)))}
	for i, st := range statuses {
		surfaces[[]string{"status after the apply", "status after the rollback"}[i]] = string(mustMarshal(t, st))
	}
	for where, text := range surfaces {
		for what, secret := range secrets {
			if i := strings.Index(text, secret); i >= 0 {
				t.Errorf("the %s appears in the %s: …%s…", what, where, text[max(0, i-160):min(len(text), i+len(secret)+40)])
			}
		}
	}
}

// TestEnvtest_LongRefusalEventIsRecorded: events.k8s.io/v1 refuses an Event
// whose note is over 1,024 bytes, and the recorder then drops it. An apply
// refused on a repair database whose DSN lists many hosts (pgx reports
// every host it tried) has a message near status's 1,024-byte bound, so
// the Refused note (its counts and the message) is longer than the API
// accepts; the event is still recorded, its note capped at 1,024 bytes,
// valid UTF-8, ending in a visible ellipsis.
func TestEnvtest_LongRefusalEventIsRecorded(t *testing.T) {
	ns := newNamespace(t)
	sc := newRepairOutage(t, ns, "long-note", pgtest.ReconciliationRole, "", 24)

	specAsAlice(t, ns, sc.name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval = sc.approval() })
	o := waitRecon(t, ns, sc.name, "the approved apply refused", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.Outcome != nil && o.Status.Outcome.Operation == opApply && o.Status.Outcome.Result != resultOK && o.Status.ObservedGeneration == o.Generation
	})
	if n := len(o.Status.Outcome.Message); n < 900 {
		t.Fatalf("the refusal's message is %d bytes: too short to test the note's bound (%q)", n, o.Status.Outcome.Message)
	}
	var note string
	eventually(t, 30*time.Second, "the Refused event of the apply", func() (bool, error) {
		for _, e := range reconEvents(t, ns, sc.name) {
			if e.Reason == ReasonRefused && e.Action == opApply {
				note = e.Note
				return true, nil
			}
		}
		return false, nil
	})
	if len(note) > 1024 || !utf8.ValidString(note) || !strings.HasSuffix(note, "...") || !strings.HasPrefix(note, opApply+" "+o.Status.Outcome.Result) {
		t.Fatalf("the Refused note (%d bytes) must be at most 1,024 bytes of valid UTF-8, start with the outcome and end in an ellipsis: %q", len(note), note)
	}
}

// repairOutage is the scene of the redaction tests: an orphan-BLOCKED
// scope (orphanBlockedScope) and a ProjectionReconciliation whose repair
// DSN connects as user (password pw, if any) to deadHosts closed ports and
// then, through proxy, to the real server; alice may approve. Once its
// plan is in status, the proxy is closed: the repair database is
// unreachable, while the Secret (and so the plan's binding) stays as it was.
type repairOutage struct {
	name  string
	dsn   string
	plan  *recoveryv1.PlanSummary
	proxy *tcpProxy
}

func newRepairOutage(t *testing.T, ns, scope, user, pw string, deadHosts int) *repairOutage {
	t.Helper()
	installApprovalManifests(t) // the controller applies nothing without it
	grantApprove(t, ns, "alice")
	grantEditReconciliations(t, ns, "alice")
	f, rec := orphanBlockedScope(t, ns, scope, scope)
	if user != pgtest.ReconciliationRole {
		// A role of its own with the repair role's rights (membership).
		role := pgx.Identifier{user}.Sanitize()
		if _, err := f.pool.Exec(bg, "CREATE ROLE "+role+" LOGIN IN ROLE "+pgtest.ReconciliationRole); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = f.pool.Exec(bg, "DROP ROLE IF EXISTS "+role) })
	}
	u, err := url.Parse(f.reconDSN)
	if err != nil {
		t.Fatal(err)
	}
	sc := &repairOutage{name: "fix-" + scope, proxy: startTCPProxy(t, u.Host)}
	hosts := make([]string, 0, deadHosts+1)
	for range deadHosts {
		hosts = append(hosts, closedAddr(t))
	}
	u.Host = strings.Join(append(hosts, sc.proxy.addr), ",")
	u.User = url.User(user)
	if pw != "" {
		u.User = url.UserPassword(user, pw)
	}
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	sc.dsn = u.String()

	createSecret(t, ns, "repair-"+scope, map[string]string{"dsn": sc.dsn})
	pr := &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sc.name},
		Spec: recoveryv1.ProjectionReconciliationSpec{RecoveryRef: recoveryv1.RecoveryReference{Name: rec.Name},
			RepairDSNSecretRef: &recoveryv1.SecretKeySelector{Name: "repair-" + scope, Key: "dsn"}}}
	if err := k8sClient.Create(bg, pr); err != nil {
		t.Fatal(err)
	}
	// Gone before its database is: no retries on a dropped database after the test.
	t.Cleanup(func() { _ = k8sClient.Delete(bg, pr) })
	o := waitRecon(t, ns, sc.name, "a report with a plan", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.RunState == recoveryv1.RunReported && o.Status.Plan != nil && o.Status.Plan.Actions > 0 && o.Status.ObservedGeneration == o.Generation
	})
	sc.plan = o.Status.Plan
	sc.proxy.Close()
	// An idle pooled connection is pinged before reuse once idle for a
	// second: past that, every use of the pool dials again (and fails).
	time.Sleep(1500 * time.Millisecond)
	return sc
}

// approval is what kubectl projection approve writes for alice.
func (sc *repairOutage) approval() *recoveryv1.ReconciliationApproval {
	return &recoveryv1.ReconciliationApproval{PlanID: sc.plan.PlanID, Binding: sc.plan.Binding, Approver: "alice",
		ApproverGroups: []string{"system:authenticated"}, MaxActions: 10}
}

// specAsAlice changes the spec as alice (through the admission policy).
func specAsAlice(t *testing.T, ns, name string, mut func(*recoveryv1.ProjectionReconciliationSpec)) {
	t.Helper()
	updateSpecAs(t, approvalClientAs(t, "alice"), ns, name, mut)
}

// reconEvents lists the events.k8s.io/v1 Events regarding the
// ProjectionReconciliation ns/name.
func reconEvents(t *testing.T, ns, name string) []eventsv1.Event {
	t.Helper()
	var evs eventsv1.EventList
	if err := k8sClient.List(bg, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range evs.Items {
		if e.Regarding.Kind == "ProjectionReconciliation" && e.Regarding.Name == name && e.Type == corev1.EventTypeWarning {
			out = append(out, e)
		}
	}
	return out
}

// closedAddr is a loopback address nothing listens on (a port free at the
// time of the call): a dial is refused at once.
func closedAddr(t *testing.T) string {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// tcpProxy forwards connections to target until closed; Close also cuts
// the connections it carries, as a database going away would.
type tcpProxy struct {
	addr   string
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	wg     sync.WaitGroup
	once   sync.Once
}

func startTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{addr: ln.Addr().String(), ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			if !p.track(c, up) {
				return
			}
			for _, pair := range [][2]net.Conn{{c, up}, {up, c}} {
				p.wg.Add(1)
				go func() {
					defer p.wg.Done()
					_, _ = io.Copy(pair[0], pair[1])
					_ = pair[0].Close()
					_ = pair[1].Close()
				}()
			}
		}
	}()
	t.Cleanup(p.Close)
	return p
}

// track records conns, or closes them when the proxy is closed.
func (p *tcpProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	p.conns = append(p.conns, conns...)
	return true
}

func (p *tcpProxy) Close() {
	p.once.Do(func() {
		_ = p.ln.Close()
		p.mu.Lock()
		p.closed = true
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.conns = nil
		p.mu.Unlock()
		p.wg.Wait()
	})
}
