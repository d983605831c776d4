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
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/reference/member"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/notify"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

// waitState polls the resource until cond holds, recording every state seen.
func waitState(t *testing.T, ns, name string, timeout time.Duration, what string, cond func(*recoveryv1.ProjectionRecovery) bool) (*recoveryv1.ProjectionRecovery, []recoveryv1.RecoveryState) {
	t.Helper()
	var got *recoveryv1.ProjectionRecovery
	var seen []recoveryv1.RecoveryState
	eventually(t, timeout, what, func() (bool, error) {
		got = getRecovery(t, ns, name)
		if s := got.Status.State; s != "" && (len(seen) == 0 || seen[len(seen)-1] != s) {
			seen = append(seen, s)
		}
		return cond(got), nil
	})
	return got, seen
}

func isCurrentAt(boundary int64) func(*recoveryv1.ProjectionRecovery) bool {
	return func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.State == recoveryv1.StateCurrent && o.Status.VerifiedThroughSeq == boundary && o.Status.ObservedGeneration == o.Generation
	}
}

// TestController_LossyProjectionCatchesUpToCurrent: the live feed dropped a
// third of the events; the controller pages from genesis in bounded cycles
// (CATCHING_UP) to the boundary (CURRENT), and afterwards every SQL key
// equals an independent replay of the source (FR-APR06/07/10/11).
func TestController_LossyProjectionCatchesUpToCurrent(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "lossy", 400, 0.33)
	// Position notifications (R2) are published after commit on the
	// manager's NATS connection.
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", suiteNATSPort))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	notes, err := nc.SubscribeSync(notify.DefaultSubjectPrefix + ".lossy")
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	obj := f.recovery(ns, "lossy", nil, nil)

	got, seen := waitState(t, ns, obj.Name, 90*time.Second, "CURRENT at the boundary", isCurrentAt(f.boundary()))
	if len(seen) < 2 || seen[0] != recoveryv1.StateCatchingUp || seen[len(seen)-1] != recoveryv1.StateCurrent {
		t.Fatalf("states seen = %v, want CATCHING_UP ... CURRENT", seen)
	}
	storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())

	st := got.Status
	if st.Lag != 0 || st.ObservedBoundarySeq != f.boundary() || st.EventCount != int64(len(f.allEvents())) || len(st.ChainDigest) != 64 {
		t.Fatalf("status does not mirror the cursor: %+v", st)
	}
	if st.Lease == nil || st.Lease.Owner != "suite-manager/"+ns || st.Lease.Fence < 1 || st.LastSuccessfulVerification == nil {
		t.Fatalf("lease/verification not mirrored: lease=%+v last=%v", st.Lease, st.LastSuccessfulVerification)
	}
	cur, err := f.store.ReadCursor(context.Background(), f.scope)
	if err != nil || cur.VerifiedThroughSeq != st.VerifiedThroughSeq || cur.ChainDigest != st.ChainDigest || cur.State != store.StateCurrent {
		t.Fatalf("SQL cursor %+v (err %v) disagrees with status %+v", cur, err, st)
	}
	if c := meta.FindStatusCondition(st.Conditions, recoveryv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready condition = %+v, want True", c)
	}

	// The catch-up changed positions, so notifications went out after
	// commit, each with its idempotency key.
	msg, err := notes.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no position notification published after the catch-up: %v", err)
	}
	var n notify.Notification
	if err := json.Unmarshal(msg.Data, &n); err != nil || n.Scope != f.scope || msg.Header.Get("Nats-Msg-Id") == "" {
		t.Fatalf("notification %s (header %v): %v", msg.Data, msg.Header, err)
	}

	// Prometheus series mirror the same numbers.
	lbl := []string{ns, obj.Name, f.scope}
	if v := testutil.ToFloat64(suiteRec.Metrics.verified.WithLabelValues(lbl...)); v != float64(f.boundary()) {
		t.Fatalf("verified_through_seq metric = %v, want %d", v, f.boundary())
	}
	if v := testutil.ToFloat64(suiteRec.Metrics.lag.WithLabelValues(lbl...)); v != 0 {
		t.Fatalf("lag metric = %v, want 0", v)
	}
	if v := testutil.ToFloat64(suiteRec.Metrics.pages.WithLabelValues(lbl...)); v < 2 {
		t.Fatalf("pages_applied_total = %v, want the catch-up's pages", v)
	}

	// The member keeps trading: the periodic interval (independent of NATS)
	// picks the new boundary up and the projection stays exact.
	f.step(150)
	waitState(t, ns, obj.Name, 60*time.Second, "CURRENT at the grown boundary", isCurrentAt(f.boundary()))
	storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())

	// The completeness endpoint separates completeness from liveness (FR-APR11).
	var found bool
	for _, s := range suiteRec.Registry.Snapshot().Scopes {
		if s.Namespace == ns && s.Name == obj.Name {
			found = true
			if s.Completeness.State != string(recoveryv1.StateCurrent) || s.Completeness.VerifiedThroughSeq != f.boundary() || s.Worker.LastCycleEnd == nil || !s.Worker.AutoRecovery {
				t.Fatalf("completeness entry = %+v", s)
			}
		}
	}
	if !found {
		t.Fatal("the completeness registry has no entry for the scope")
	}
}

// TestController_OrphanTradeBlocks: a retained trade positioned in the next
// window but absent from the source is refused (FR-APR06): BLOCKED with the
// code, a Warning event carrying it, Stalled=True, and nothing written.
func TestController_OrphanTradeBlocks(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "orphan", 120, 0.2)
	obj := f.recovery(ns, "orphan", nil, nil)
	waitState(t, ns, obj.Name, 60*time.Second, "CURRENT", isCurrentAt(f.boundary()))

	// A trade the source never produced, positioned just past the boundary.
	b := f.boundary()
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity,
  buy_order_id, sell_order_id, buy_account, sell_account, ts) VALUES ($1, 'ghost-1', 999999, $2, 'BTC-USD', 100, 1, 'gb', 'gs', 'acct-1', 'acct-2', now())`,
		f.scope, b+1); err != nil {
		t.Fatal(err)
	}
	var tradesBefore int
	_ = f.pool.QueryRow(context.Background(), `SELECT count(*) FROM trades WHERE scope = $1`, f.scope).Scan(&tradesBefore)
	f.step(40)

	got, _ := waitState(t, ns, obj.Name, 60*time.Second, "BLOCKED ORPHAN_TRADE", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.State == recoveryv1.StateBlocked
	})
	if got.Status.Reason != string(codes.OrphanTrade) || got.Status.VerifiedThroughSeq != b {
		t.Fatalf("reason=%s verified=%d, want ORPHAN_TRADE at %d", got.Status.Reason, got.Status.VerifiedThroughSeq, b)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, recoveryv1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != recoveryv1.ReasonBlocked {
		t.Fatalf("Stalled condition = %+v, want True/Blocked", c)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, recoveryv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Ready condition = %+v, want False", c)
	}
	// A BLOCKED scope has nothing to write until someone acts: its lease is
	// released at once (an approved repair must not wait a lease duration).
	var leaseLive bool
	if err := f.pool.QueryRow(context.Background(), `SELECT expires_at > clock_timestamp() FROM projection_catchup_lease WHERE scope = $1`, f.scope).Scan(&leaseLive); err != nil || leaseLive {
		t.Fatalf("the lease of a BLOCKED scope is still held (live=%v, err=%v)", leaseLive, err)
	}
	eventually(t, 20*time.Second, "a Warning event with reason ORPHAN_TRADE", func() (bool, error) {
		var evs eventsv1.EventList
		if err := k8sClient.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == obj.Name && e.Type == "Warning" && e.Reason == string(codes.OrphanTrade) && strings.Contains(e.Note, "BLOCKED") {
				return true, nil
			}
		}
		return false, nil
	})
	cur, _ := f.store.ReadCursor(context.Background(), f.scope)
	if cur.State != store.StateBlocked || cur.BlockedReason != string(codes.OrphanTrade) || cur.VerifiedThroughSeq != b {
		t.Fatalf("SQL cursor = %+v, want BLOCKED/ORPHAN_TRADE at %d", cur, b)
	}
}

// TestController_MemberDownRetriesWithBackoff: with the member unreachable the
// scope is RETRYING (SOURCE_UNAVAILABLE) and the delay between attempts grows
// exponentially up to the cap (FR-APR10); when the member comes back the
// scope returns to CURRENT.
func TestController_MemberDownRetriesWithBackoff(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "flaky", 80, 0.2)
	addr := f.addr
	f.stop()
	obj := f.recovery(ns, "flaky", nil, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.Backoff = &recoveryv1.BackoffSpec{Base: metav1.Duration{Duration: 200 * time.Millisecond}, Cap: metav1.Duration{Duration: 1600 * time.Millisecond}}
	})

	// Record when each consecutive failure count first appears.
	firstSeen := map[int32]time.Time{}
	waitState(t, ns, obj.Name, 60*time.Second, "six consecutive failures", func(o *recoveryv1.ProjectionRecovery) bool {
		if o.Status.State == recoveryv1.StateRetrying {
			if _, ok := firstSeen[o.Status.ConsecutiveFailures]; !ok {
				firstSeen[o.Status.ConsecutiveFailures] = time.Now()
			}
		}
		return o.Status.ConsecutiveFailures >= 6
	})
	got := getRecovery(t, ns, obj.Name)
	if got.Status.Reason != string(codes.SourceUnavailable) || got.Status.NextAttempt == nil {
		t.Fatalf("reason=%s nextAttempt=%v, want SOURCE_UNAVAILABLE with a next attempt", got.Status.Reason, got.Status.NextAttempt)
	}
	gap := func(a, b int32) time.Duration {
		ta, okA := firstSeen[a]
		tb, okB := firstSeen[b]
		if !okA || !okB {
			t.Fatalf("failure counts %d and %d not both observed: %v", a, b, firstSeen)
		}
		return tb.Sub(ta)
	}
	early, late := gap(1, 2), gap(4, 5)
	if late < 2*early || late < 1200*time.Millisecond {
		t.Fatalf("retry delays do not grow: 1→2 took %s, 4→5 took %s", early, late)
	}
	if capped := gap(5, 6); capped > 1600*time.Millisecond+1500*time.Millisecond {
		t.Fatalf("retry delay 5→6 = %s exceeds the 1.6s cap", capped)
	}

	f.serve(addr)
	waitState(t, ns, obj.Name, 30*time.Second, "CURRENT after the member returns", isCurrentAt(f.boundary()))
	if got := getRecovery(t, ns, obj.Name); got.Status.ConsecutiveFailures != 0 || got.Status.NextAttempt != nil {
		t.Fatalf("failures=%d nextAttempt=%v after recovery, want 0 and none", got.Status.ConsecutiveFailures, got.Status.NextAttempt)
	}
	storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())
}

// TestController_SlowMemberNeedsLongerRequestTimeout: a member slower than
// spec.source.requestTimeout (every non-idle page costs it a replay from
// genesis, NFR-APR02) leaves the scope RETRYING SOURCE_UNAVAILABLE with a
// message naming the field to raise, writes nothing, and raising the field
// (nothing else) lets it catch up to CURRENT with the projection the
// independent replay gives.
func TestController_SlowMemberNeedsLongerRequestTimeout(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "slow-member", 60, 0.3)
	f.delay.Store(int64(1500 * time.Millisecond))
	defer f.delay.Store(0)
	obj := f.recovery(ns, "slow-member", nil, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.Source.RequestTimeout = &metav1.Duration{Duration: time.Second}
	})
	cur0, err := f.store.ReadCursor(context.Background(), f.scope)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := waitState(t, ns, obj.Name, 60*time.Second, "RETRYING after two timeouts", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.State == recoveryv1.StateRetrying && o.Status.ConsecutiveFailures >= 2
	})
	if got.Status.Reason != string(codes.SourceUnavailable) || !strings.Contains(got.Status.Message, "spec.source.requestTimeout (1s)") {
		t.Fatalf("reason %s, message %q: want SOURCE_UNAVAILABLE naming spec.source.requestTimeout (1s)", got.Status.Reason, got.Status.Message)
	}
	if cur, err := f.store.ReadCursor(context.Background(), f.scope); err != nil || cur.VerifiedThroughSeq != cur0.VerifiedThroughSeq {
		t.Fatalf("cursor moved while every fetch timed out: %d → %d (%v)", cur0.VerifiedThroughSeq, cur.VerifiedThroughSeq, err)
	}

	orig := got.DeepCopy()
	got.Spec.Source.RequestTimeout = &metav1.Duration{Duration: 10 * time.Second}
	if err := k8sClient.Patch(context.Background(), got, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	waitState(t, ns, obj.Name, 90*time.Second, "CURRENT with the longer timeout", isCurrentAt(f.boundary()))
	storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())
}

// TestController_NATSReconnectTriggersCycle: a CURRENT scope with a one-hour
// interval gets a cycle as soon as the NATS connection comes back after a
// server restart (FR-APR10), long before its periodic one.
func TestController_NATSReconnectTriggersCycle(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "natsedge", 60, 0.2)
	obj := f.recovery(ns, "natsedge", nil, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.Interval = &metav1.Duration{Duration: time.Hour}
	})
	waitState(t, ns, obj.Name, 60*time.Second, "CURRENT", isCurrentAt(f.boundary()))
	before := f.boundary()
	f.step(30)

	// Nothing wakes the scope for an hour...
	time.Sleep(1500 * time.Millisecond)
	if got := getRecovery(t, ns, obj.Name); got.Status.VerifiedThroughSeq != before {
		t.Fatalf("verified moved to %d without a trigger; the test cannot tell the edge apart", got.Status.VerifiedThroughSeq)
	}
	// ...until the NATS server restarts and the client reconnects.
	suiteNATS.Shutdown()
	suiteNATS.WaitForShutdown()
	var err error
	if suiteNATS, err = startNATS(suiteNATSPort); err != nil {
		t.Fatal(err)
	}
	waitState(t, ns, obj.Name, 30*time.Second, "CURRENT at the new boundary after the reconnect edge", isCurrentAt(f.boundary()))
}

// TestController_DeletionReleasesLease: deleting the resource releases the
// scope's lease (finalizer), so a successor does not wait a lease duration.
func TestController_DeletionReleasesLease(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "deleted", 60, 0.2)
	obj := f.recovery(ns, "deleted", nil, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.LeaseDuration = &metav1.Duration{Duration: 10 * time.Minute}
	})
	waitState(t, ns, obj.Name, 60*time.Second, "CURRENT", isCurrentAt(f.boundary()))
	l, err := f.store.ReadLease(context.Background(), f.scope)
	if err != nil || l.Owner != "suite-manager/"+ns || !l.ExpiresAt.After(dbNow(t, f.store)) {
		t.Fatalf("lease before deletion = %+v (err %v), want held by suite-manager", l, err)
	}
	if err := k8sClient.Delete(context.Background(), getRecovery(t, ns, obj.Name)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the resource to be gone", func() (bool, error) {
		err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), &recoveryv1.ProjectionRecovery{})
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})
	l, err = f.store.ReadLease(context.Background(), f.scope)
	if err != nil || l.ExpiresAt.After(dbNow(t, f.store)) {
		t.Fatalf("lease after deletion = %+v (err %v), want expired", l, err)
	}
}

// TestController_SuspendRunsNoCycle: a suspended resource runs no cycle (no
// request reaches the member) and says so; resuming catches up.
func TestController_SuspendRunsNoCycle(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "suspended", 40, 0.2)
	obj := f.recovery(ns, "suspended", nil, func(s *recoveryv1.ProjectionRecoverySpec) { s.Suspend = true })
	got, _ := waitState(t, ns, obj.Name, 20*time.Second, "Suspended", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.Reason == recoveryv1.ReasonSuspended && o.Status.ObservedGeneration == o.Generation
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, recoveryv1.ConditionReconciling); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Reconciling = %+v, want False while suspended", c)
	}
	time.Sleep(300 * time.Millisecond)
	if n := f.requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the member while suspended", n)
	}
	orig := got.DeepCopy()
	got.Spec.Suspend = false
	if err := k8sClient.Patch(context.Background(), got, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	waitState(t, ns, obj.Name, 30*time.Second, "CURRENT after resuming", isCurrentAt(f.boundary()))
}

// TestController_TLSAndBearerToken: a member served over TLS with a private
// CA and a bearer token is reached with the CA and token from the referenced
// Secrets; an unusable CA bundle stalls the resource as InvalidSpec, and a
// wrong token blocks with the member's refusal, the token never shown.
func TestController_TLSAndBearerToken(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "tls", 60, 0.2)
	const token = "member-token-0123456789"
	srv := httptest.NewUnstartedServer(member.NewHandler(f.log, member.HandlerOptions{Token: token}))
	srv.StartTLS()
	defer srv.Close()
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	createSecret(t, ns, "member-ca", map[string]string{"ca.crt": caPEM, "bad.crt": "not a certificate"})
	createSecret(t, ns, "member-token", map[string]string{"token": token, "wrong": "not-the-token"})

	// Each resource gets its own scope (with its own selected run): a second
	// resource on one scope is refused as a duplicate before it ever reaches
	// the member. The others are refused (by the CA check, by the member)
	// before anything would be written.
	withTLS := func(caKey, tokenKey string) func(*recoveryv1.ProjectionRecoverySpec) {
		return func(s *recoveryv1.ProjectionRecoverySpec) {
			if caKey != "ca.crt" || tokenKey != "token" {
				s.Scope = "tls-" + strings.TrimSuffix(caKey, ".crt") + "-" + tokenKey
			}
			s.Source = recoveryv1.SourceSpec{
				URL:            srv.URL,
				TokenSecretRef: &recoveryv1.SecretKeySelector{Name: "member-token", Key: tokenKey},
				TLS:            &recoveryv1.SourceTLS{CASecretRef: &recoveryv1.SecretKeySelector{Name: "member-ca", Key: caKey}},
			}
		}
	}
	good := f.recovery(ns, "tls", nil, withTLS("ca.crt", "token"))
	waitState(t, ns, good.Name, 60*time.Second, "CURRENT over TLS with a token", isCurrentAt(f.boundary()))

	f.addRun("tls-bad-token")
	f.addRun("tls-ca-wrong")
	badCA := f.recovery(ns, "tls-bad-ca", nil, withTLS("bad.crt", "token"))
	got, _ := waitState(t, ns, badCA.Name, 30*time.Second, "InvalidSpec", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.Reason == recoveryv1.ReasonInvalidSpec
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, recoveryv1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Stalled = %+v, want True for an unusable CA bundle", c)
	}

	wrong := f.recovery(ns, "tls-wrong-token", nil, withTLS("ca.crt", "wrong"))
	got, _ = waitState(t, ns, wrong.Name, 30*time.Second, "BLOCKED by the member's refusal", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.State == recoveryv1.StateBlocked
	})
	if got.Status.Reason != string(codes.SourceRefused) || strings.Contains(got.Status.Message, "not-the-token") {
		t.Fatalf("reason=%s message=%q, want SOURCE_REFUSED without the token", got.Status.Reason, got.Status.Message)
	}
}
