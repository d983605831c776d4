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
	"strings"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/codes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

func TestRetryBackoff_DoublesToTheCap(t *testing.T) {
	base, maxDelay := 200*time.Millisecond, 2*time.Second
	cases := []struct {
		name     string
		failures int32
		want     time.Duration
	}{
		{"zero failures counts as the first", 0, 200 * time.Millisecond},
		{"first failure waits the base", 1, 200 * time.Millisecond},
		{"second failure doubles", 2, 400 * time.Millisecond},
		{"third failure doubles again", 3, 800 * time.Millisecond},
		{"fourth failure still below the cap", 4, 1600 * time.Millisecond},
		{"fifth failure reaches the cap", 5, 2 * time.Second},
		{"sixth failure stays at the cap", 6, 2 * time.Second},
		{"a billion failures neither overflow nor loop", 1 << 30, 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryBackoff(tc.failures, base, maxDelay); got != tc.want {
				t.Errorf("retryBackoff(%d) = %s, want %s", tc.failures, got, tc.want)
			}
		})
	}
}

func TestRequeueAfter_PerState(t *testing.T) {
	spec := &recoveryv1.ProjectionRecoverySpec{
		Interval: &metav1.Duration{Duration: 30 * time.Second},
		Backoff:  &recoveryv1.BackoffSpec{Base: metav1.Duration{Duration: time.Second}, Cap: metav1.Duration{Duration: 10 * time.Second}},
	}
	cases := []struct {
		name     string
		state    recoveryv1.RecoveryState
		failures int32
		want     time.Duration
	}{
		{"catching up requeues at once", recoveryv1.StateCatchingUp, 0, catchingUpRequeue},
		{"current waits the interval", recoveryv1.StateCurrent, 0, 30 * time.Second},
		{"retrying after one failure waits the base", recoveryv1.StateRetrying, 1, time.Second},
		{"retrying after three failures backs off", recoveryv1.StateRetrying, 3, 4 * time.Second},
		{"retrying after nine failures is capped", recoveryv1.StateRetrying, 9, 10 * time.Second},
		{"blocked rechecks on its own period", recoveryv1.StateBlocked, 4, blockedRecheck},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := requeueAfter(tc.state, tc.failures, spec); got != tc.want {
				t.Errorf("requeueAfter(%s, %d) = %s, want %s", tc.state, tc.failures, got, tc.want)
			}
		})
	}
	long := &recoveryv1.ProjectionRecoverySpec{Interval: &metav1.Duration{Duration: time.Hour}}
	if got := requeueAfter(recoveryv1.StateBlocked, 1, long); got != time.Hour {
		t.Errorf("a BLOCKED recheck is never more frequent than the interval: got %s", got)
	}
}

func TestConditionsFor_AtMostOneTrue(t *testing.T) {
	cases := []struct {
		name                        string
		state                       recoveryv1.RecoveryState
		reason                      string
		ready, reconciling, stalled metav1.ConditionStatus
		wantReason                  string
	}{
		{"current is ready", recoveryv1.StateCurrent, "", "True", "False", "False", recoveryv1.ReasonCurrent},
		{"catching up is reconciling", recoveryv1.StateCatchingUp, "", "False", "True", "False", recoveryv1.ReasonCatchingUp},
		{"retrying is reconciling", recoveryv1.StateRetrying, "SOURCE_UNAVAILABLE", "False", "True", "False", recoveryv1.ReasonRetrying},
		{"blocked is stalled", recoveryv1.StateBlocked, "ORPHAN_TRADE", "False", "False", "True", recoveryv1.ReasonBlocked},
		{"secret not found is stalled", "", recoveryv1.ReasonSecretNotFound, "False", "False", "True", recoveryv1.ReasonSecretNotFound},
		{"invalid spec is stalled", "", recoveryv1.ReasonInvalidSpec, "False", "False", "True", recoveryv1.ReasonInvalidSpec},
		{"schema missing is stalled", "", string(codes.SchemaMissing), "False", "False", "True", recoveryv1.ReasonSchemaMissing},
		{"suspended is none of them, without Ready", "", recoveryv1.ReasonSuspended, conditionAbsent, "False", "False", recoveryv1.ReasonSuspended},
		{"auto recovery disabled while behind is stalled", "", recoveryv1.ReasonAutoRecoveryDisabled, "False", "False", "True", recoveryv1.ReasonAutoRecoveryDisabled},
		{"awaiting the first cycle is reconciling", "", "", "False", "True", "False", recoveryv1.ReasonAwaitingFirstCycle},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := conditionsFor(tc.state, tc.reason, "m")
			if got.ready != tc.ready || got.reconciling != tc.reconciling || got.stalled != tc.stalled || got.reason != tc.wantReason {
				t.Errorf("conditionsFor(%q, %q) = %+v", tc.state, tc.reason, got)
			}
		})
	}
}

func TestApplyConditions_IdempotentKeepsTransitionTime(t *testing.T) {
	var conds []metav1.Condition
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	applyConditions(&conds, conditionsFor(recoveryv1.StateCurrent, "", "ok"), 3, t0)
	first := append([]metav1.Condition(nil), conds...)
	applyConditions(&conds, conditionsFor(recoveryv1.StateCurrent, "", "ok"), 3, metav1.NewTime(t0.Add(time.Hour)))
	for i := range conds {
		if conds[i] != first[i] {
			t.Fatalf("re-applying the same set changed %s: %+v → %+v", conds[i].Type, first[i], conds[i])
		}
		if conds[i].ObservedGeneration != 3 {
			t.Fatalf("observedGeneration = %d, want 3", conds[i].ObservedGeneration)
		}
	}
}

func TestDecide_TransitionEvent(t *testing.T) {
	st := func(s recoveryv1.RecoveryState, reason string) *recoveryv1.ProjectionRecoveryStatus {
		return &recoveryv1.ProjectionRecoveryStatus{State: s, Reason: reason, Message: "m"}
	}
	cases := []struct {
		name       string
		prev       recoveryv1.RecoveryState
		prevReason string
		now        *recoveryv1.ProjectionRecoveryStatus
		wantOK     bool
		wantType   string
		wantReason string
	}{
		{"first cycle catching up", "", "", st(recoveryv1.StateCatchingUp, ""), true, corev1.EventTypeNormal, recoveryv1.ReasonCatchingUp},
		{"still catching up", recoveryv1.StateCatchingUp, "", st(recoveryv1.StateCatchingUp, ""), false, "", ""},
		{"became current", recoveryv1.StateCatchingUp, "", st(recoveryv1.StateCurrent, ""), true, corev1.EventTypeNormal, recoveryv1.ReasonCurrent},
		{"blocked warns with the code", recoveryv1.StateCurrent, "", st(recoveryv1.StateBlocked, "ORPHAN_TRADE"), true, corev1.EventTypeWarning, "ORPHAN_TRADE"},
		{"still blocked on the same code", recoveryv1.StateBlocked, "ORPHAN_TRADE", st(recoveryv1.StateBlocked, "ORPHAN_TRADE"), false, "", ""},
		{"retrying on a new code", recoveryv1.StateRetrying, "SOURCE_UNAVAILABLE", st(recoveryv1.StateRetrying, "LEASE_HELD"), true, corev1.EventTypeWarning, "LEASE_HELD"},
		{"no state", "", "", st("", recoveryv1.ReasonSuspended), false, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			typ, reason, _, ok := transitionEvent(tc.prev, tc.prevReason, tc.now)
			if ok != tc.wantOK || typ != tc.wantType || reason != tc.wantReason {
				t.Errorf("%s: got (%s, %s, %v), want (%s, %s, %v)", tc.name, typ, reason, ok, tc.wantType, tc.wantReason, tc.wantOK)
			}
		})
	}
}

// TestDecide_WithdrawnEvent: a verified-through that goes down is a
// withdrawn completeness claim, worth a Warning of its own whatever the
// state does; it names the reconciliation that last touched the scope.
func TestDecide_WithdrawnEvent(t *testing.T) {
	st := func(v int64) *recoveryv1.ProjectionRecoveryStatus {
		return &recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateCatchingUp, VerifiedThroughSeq: v}
	}
	for _, tc := range []struct {
		name         string
		prev         int64
		now          *recoveryv1.ProjectionRecoveryStatus
		reconciledBy string
		wantOK       bool
		wantIn       []string
	}{
		{"first cycle", 0, st(120), "", false, nil},
		{"progress", 120, st(240), "", false, nil},
		{"unchanged", 240, st(240), "", false, nil},
		{"reset to genesis by a rollback", 240, st(0), "fix-orphan/plan-1-abc", true, []string{"verified through 240 is withdrawn", "went back to 0", "fix-orphan/plan-1-abc"}},
		{"reset by hand, part-way", 240, st(100), "", true, []string{"verified through 240 is withdrawn", "went back to 100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			note, ok := withdrawnEvent(tc.prev, tc.now, tc.reconciledBy)
			if ok != tc.wantOK {
				t.Fatalf("withdrawnEvent(%d, %d) ok = %v, want %v (%q)", tc.prev, tc.now.VerifiedThroughSeq, ok, tc.wantOK, note)
			}
			for _, w := range tc.wantIn {
				if !strings.Contains(note, w) {
					t.Errorf("note %q lacks %q", note, w)
				}
			}
			if !tc.wantOK && note != "" {
				t.Errorf("no event, but a note %q", note)
			}
		})
	}
}

func TestRedact_RemovesCredentials(t *testing.T) {
	sec := resolvedSecrets{dsn: "postgres://app:p%40ss-w0rd@db.internal:5432/proj", token: "tok-123456"}
	msg := `failed to connect to postgres://app:p%40ss-w0rd@db.internal:5432/proj (password p@ss-w0rd), bearer tok-123456`
	got := redact(msg, sec)
	for _, leak := range []string{"p@ss-w0rd", "p%40ss-w0rd", "tok-123456"} {
		if strings.Contains(got, leak) {
			t.Fatalf("redact left %q in %q", leak, got)
		}
	}
	kv := resolvedSecrets{dsn: "host=db user=app password='hunter22' dbname=proj"}
	if got := redact("auth failed for password hunter22", kv); strings.Contains(got, "hunter22") {
		t.Fatalf("redact left a key/value password in %q", got)
	}
	if s := (resolvedSecrets{dsn: "x"}).String(); strings.Contains(s, "x}") {
		t.Fatalf("resolvedSecrets prints its content: %s", s)
	}
}

func TestDecide_ObserverRequeue(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		expires  time.Time
		interval time.Duration
		want     time.Duration
	}{
		{"just after the lease would lapse", now.Add(5 * time.Second), 30 * time.Second, 5*time.Second + 100*time.Millisecond},
		{"never later than the interval", now.Add(5 * time.Minute), 30 * time.Second, 30 * time.Second},
		{"expired already: soon, not hot", now.Add(-time.Second), 30 * time.Second, observerMinRequeue},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := observerRequeue(now, tc.expires, tc.interval); got != tc.want {
				t.Errorf("observerRequeue(expires in %s) = %s, want %s", tc.expires.Sub(now), got, tc.want)
			}
		})
	}
}

// TestProgressMessage_DependsOnTheCursorOnly: the holder and the observers
// write the same message for the same cursor (no status flapping), and a
// drained DRAINING run says why its lag is 0 below the member's boundary.
