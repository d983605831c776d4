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
	"encoding/pem"
	"io"
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/completeness"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

// pgProxy is a TCP proxy in front of the test PostgreSQL server: cutting it
// makes the database unreachable for whoever connects through it (open
// connections die, new ones are closed at once) while the test keeps its own
// direct connection.
type pgProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

// newPGProxy starts a proxy to dsn's server and returns the DSN through it.
func newPGProxy(t testing.TB, dsn string) (*pgProxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	go p.accept()
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *pgProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			_ = c.Close()
			continue
		}
		go p.pipe(c)
	}
}

func (p *pgProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *pgProxy) pipe(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(s) {
		_ = c.Close()
		if s != nil {
			_ = s.Close()
		}
		return
	}
	go func() { _, _ = io.Copy(s, c); _ = s.Close(); _ = c.Close() }()
	_, _ = io.Copy(c, s)
	_ = c.Close()
	_ = s.Close()
}

// cut makes the database unreachable through the proxy.
func (p *pgProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

func (p *pgProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

func registryEntry(t testing.TB, reg *completeness.Registry, ns, name string) completeness.Scope {
	t.Helper()
	for _, s := range reg.Snapshot().Scopes {
		if s.Namespace == ns && s.Name == name {
			return s
		}
	}
	t.Fatalf("the completeness registry has no entry for %s/%s", ns, name)
	return completeness.Scope{}
}

// assertKeptCursor checks that status, the completeness registry and the
// gauges still carry the last known cursor of want (defect: a scope whose
// cursor cannot be read must not report VERIFIED 0 / LAG B).
func assertKeptCursor(t *testing.T, rec *ProjectionRecoveryReconciler, got *recoveryv1.ProjectionRecovery, want recoveryv1.ProjectionRecoveryStatus) {
	t.Helper()
	st := got.Status
	if st.VerifiedThroughSeq != want.VerifiedThroughSeq || st.Lag != want.Lag || st.ObservedBoundarySeq != want.ObservedBoundarySeq ||
		st.ChainDigest != want.ChainDigest || st.EventCount != want.EventCount {
		t.Fatalf("status rewound: verified=%d lag=%d boundary=%d events=%d, want the last known %d/%d/%d/%d",
			st.VerifiedThroughSeq, st.Lag, st.ObservedBoundarySeq, st.EventCount,
			want.VerifiedThroughSeq, want.Lag, want.ObservedBoundarySeq, want.EventCount)
	}
	if st.LastSuccessfulVerification == nil || want.LastSuccessfulVerification == nil || !st.LastSuccessfulVerification.Equal(want.LastSuccessfulVerification) {
		t.Fatalf("lastSuccessfulVerification = %v, want it kept at %v", st.LastSuccessfulVerification, want.LastSuccessfulVerification)
	}
	if !strings.Contains(st.Message, "not re-checked") {
		t.Fatalf("message %q does not say the values are not re-checked", st.Message)
	}
	e := registryEntry(t, rec.Registry, got.Namespace, got.Name)
	if e.Completeness.VerifiedThroughSeq != want.VerifiedThroughSeq || e.Completeness.Lag != want.Lag {
		t.Fatalf("completeness endpoint rewound: %+v", e.Completeness)
	}
	lbl := []string{got.Namespace, got.Name, got.Spec.Scope}
	if v := testutil.ToFloat64(rec.Metrics.verified.WithLabelValues(lbl...)); v != float64(want.VerifiedThroughSeq) {
		t.Fatalf("verified_through_seq gauge = %v, want %d", v, want.VerifiedThroughSeq)
	}
	if v := testutil.ToFloat64(rec.Metrics.lag.WithLabelValues(lbl...)); v != float64(want.Lag) {
		t.Fatalf("lag gauge = %v, want %d", v, want.Lag)
	}
}

// TestEnvtest_DatabaseOutageKeepsLastKnownCursor: a CURRENT scope whose
// database becomes unreachable is RETRYING/DATABASE_UNAVAILABLE but keeps
// reporting the last cursor it read (status, completeness endpoint, gauges),
// marked as not re-checked (FR-APR11). A cursor reset in SQL is a real
// rewind and shows.
func TestEnvtest_DatabaseOutageKeepsLastKnownCursor(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "outage", 120, 0.3)
	proxy, proxied := newPGProxy(t, f.dsn)
	f.dsn = proxied // the manager reaches the database only through the proxy
	lbl, sel := shard(t, "outage")
	stop, rec, err := startManager("outage", sel, true, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	obj := f.recovery(ns, "outage", lbl, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.PageSize, s.PagesPerCycle = 24, 1
		s.Interval = &metav1.Duration{Duration: time.Second}
	})
	cur, _ := waitState(t, ns, obj.Name, 90*time.Second, "CURRENT", isCurrentAt(f.boundary()))
	last := cur.Status

	proxy.cut()
	got, _ := waitState(t, ns, obj.Name, 30*time.Second, "RETRYING DATABASE_UNAVAILABLE", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.Reason == string(codes.DatabaseUnavailable)
	})
	if got.Status.State != recoveryv1.StateRetrying {
		t.Fatalf("state = %s, want RETRYING", got.Status.State)
	}
	assertKeptCursor(t, rec, got, last)

	proxy.restore()
	waitState(t, ns, obj.Name, 30*time.Second, "CURRENT after the outage", isCurrentAt(f.boundary()))

	// The SQL cursor itself is reset: that rewind is real and must show.
	if _, err := f.pool.Exec(context.Background(), `DELETE FROM projection_catchup_cursor WHERE scope = $1`, f.scope); err != nil {
		t.Fatal(err)
	}
	waitState(t, ns, obj.Name, 30*time.Second, "the reset cursor reported", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.VerifiedThroughSeq < last.VerifiedThroughSeq
	})
	waitState(t, ns, obj.Name, 90*time.Second, "CURRENT again after re-verifying from genesis", isCurrentAt(f.boundary()))
	storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())
}

// TestEnvtest_InvalidSpecKeepsLastKnownCursor: a CURRENT scope whose spec
// becomes unusable (a CA bundle that is no certificate) stalls as InvalidSpec
// without rewinding what status reports.
func TestEnvtest_InvalidSpecKeepsLastKnownCursor(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "invalid", 60, 0.2)
	srv := httptest.NewUnstartedServer(f.h)
	srv.StartTLS()
	defer srv.Close()
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	createSecret(t, ns, "member-ca", map[string]string{"ca.crt": caPEM, "bad.crt": "not a certificate"})
	lbl, sel := shard(t, "invalid")
	stop, rec, err := startManager("invalid", sel, true, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	obj := f.recovery(ns, "invalid", lbl, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.Source = recoveryv1.SourceSpec{URL: srv.URL, TLS: &recoveryv1.SourceTLS{CASecretRef: &recoveryv1.SecretKeySelector{Name: "member-ca", Key: "ca.crt"}}}
	})
	cur, _ := waitState(t, ns, obj.Name, 60*time.Second, "CURRENT", isCurrentAt(f.boundary()))
	last := cur.Status

	orig := cur.DeepCopy()
	cur.Spec.Source.TLS.CASecretRef.Key = "bad.crt"
	if err := k8sClient.Patch(context.Background(), cur, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	got, _ := waitState(t, ns, obj.Name, 30*time.Second, "InvalidSpec", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.Reason == recoveryv1.ReasonInvalidSpec && o.Status.ObservedGeneration == o.Generation
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, recoveryv1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Stalled = %+v, want True", c)
	}
	assertKeptCursor(t, rec, got, last)
}

// TestEnvtest_SchemaMissingStalls: a database without recovery's tables is
// neither BLOCKED nor INTERNAL: Stalled with reason SCHEMA_MISSING and a
// message saying to run `manager migrate`, the state left as it was.
func TestEnvtest_SchemaMissingStalls(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "noschema", 20, 0.2)
	if _, err := f.pool.Exec(context.Background(), `DROP TABLE projection_catchup_cursor, projection_catchup_lease CASCADE`); err != nil {
		t.Fatal(err)
	}
	lbl, sel := shard(t, "noschema")
	stop, rec, err := startManager("noschema", sel, false, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	obj := f.recovery(ns, "noschema", lbl, nil)
	got, _ := waitState(t, ns, obj.Name, 30*time.Second, "a report", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.ObservedGeneration == o.Generation && o.Status.Reason != ""
	})
	if got.Status.Reason != string(codes.SchemaMissing) || got.Status.State != "" {
		t.Fatalf("state/reason = %q/%q, want no state and SCHEMA_MISSING (message %q)", got.Status.State, got.Status.Reason, got.Status.Message)
	}
	c := meta.FindStatusCondition(got.Status.Conditions, recoveryv1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "manager migrate") {
		t.Fatalf("Stalled = %+v, want True saying to run `manager migrate`", c)
	}
	// The condition gauge carries it (what the SchemaMissing alert selects);
	// it follows the status write, so it may trail the read above.
	stalled := rec.Metrics.condition.WithLabelValues(ns, obj.Name, obj.Spec.Scope, recoveryv1.ConditionStalled, recoveryv1.ReasonSchemaMissing)
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(stalled) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("projection_recovery_condition{type=Stalled,reason=SchemaMissing} = %v, want 1", testutil.ToFloat64(stalled))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEnvtest_ReplacedDatabaseGetsTheSchemaAgain: a manager allowed to apply
// the schema finds recovery's tables gone under a CURRENT scope (the database
// was replaced, or restored without them). It applies the schema again and
// re-verifies from genesis on its own, without a restart; the earlier success
// of its schema step must not stand for the new database.
func TestEnvtest_ReplacedDatabaseGetsTheSchemaAgain(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "replaced", 60, 0.2)
	f.dsn = f.pool.Config().ConnString() // the schema owner: may create recovery's tables
	lbl, sel := shard(t, "replaced")
	stop, _, err := startManager("replaced", sel, true, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	obj := f.recovery(ns, "replaced", lbl, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.Interval = &metav1.Duration{Duration: time.Second}
	})
	waitState(t, ns, obj.Name, 90*time.Second, "CURRENT", isCurrentAt(f.boundary()))

	if _, err := f.pool.Exec(context.Background(), `DROP TABLE projection_catchup_cursor, projection_catchup_lease,
projection_recovery_schema_version CASCADE`); err != nil {
		t.Fatal(err)
	}
	waitState(t, ns, obj.Name, 30*time.Second, "the missing schema reported", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.Reason == string(codes.SchemaMissing)
	})
	waitState(t, ns, obj.Name, 60*time.Second, "CURRENT again, re-verified", func(o *recoveryv1.ProjectionRecovery) bool {
		ready := meta.FindStatusCondition(o.Status.Conditions, recoveryv1.ConditionReady)
		return isCurrentAt(f.boundary())(o) && o.Status.Reason == "" && ready != nil && ready.Status == metav1.ConditionTrue
	})
	storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())
}
