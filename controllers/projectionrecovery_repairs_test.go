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
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/recon"
)

func TestRepairAwaited(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	waiting := func(op string, since time.Duration) *recoveryv1.OutcomeSummary {
		return &recoveryv1.OutcomeSummary{Operation: op, Result: resultWaiting, PlanID: "p1", CorrelationID: "c1",
			At: nowTime(now), WaitingSince: nowTime(now.Add(-since))}
	}
	approval := recoveryv1.ProjectionReconciliationSpec{Approval: &recoveryv1.ReconciliationApproval{PlanID: "p1"}}
	rollback := recoveryv1.ProjectionReconciliationSpec{Rollback: &recoveryv1.ReconciliationRollback{CorrelationID: "c1"}}
	cases := []struct {
		name string
		spec recoveryv1.ProjectionReconciliationSpec
		out  *recoveryv1.OutcomeSummary
		want bool
	}{
		{"no outcome: the controller has not tried yet", approval, nil, false},
		{"apply waiting", approval, waiting(opApply, time.Second), true},
		{"apply waiting past the limit", approval, waiting(opApply, leaseWaitLimit), false},
		{"apply waiting, approval withdrawn", recoveryv1.ProjectionReconciliationSpec{}, waiting(opApply, time.Second), false},
		{"apply waiting, another plan approved", recoveryv1.ProjectionReconciliationSpec{Approval: &recoveryv1.ReconciliationApproval{PlanID: "p2"}}, waiting(opApply, time.Second), false},
		{"rollback waiting", rollback, waiting(opRollback, time.Second), true},
		{"refused apply", approval, &recoveryv1.OutcomeSummary{Operation: opApply, Result: string(recon.ResultRepairDenied), PlanID: "p1"}, false},
		{"lease_unavailable after the wait", approval, &recoveryv1.OutcomeSummary{Operation: opApply, Result: string(recon.ResultLeaseUnavailable), PlanID: "p1"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pr := &recoveryv1.ProjectionReconciliation{Spec: tc.spec, Status: recoveryv1.ProjectionReconciliationStatus{Outcome: tc.out}}
			if got := repairAwaited(pr, now); got != tc.want {
				t.Fatalf("repairAwaited = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestWaitForLease(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	unavailable := func() *recoveryv1.OutcomeSummary {
		return &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p1", Result: string(recon.ResultLeaseUnavailable), Message: "held"}
	}
	cases := []struct {
		name      string
		prev      *recoveryv1.OutcomeSummary
		out       *recoveryv1.OutcomeSummary
		want      string
		wantSince time.Time
	}{
		{"first meeting of the lease waits", nil, unavailable(), resultWaiting, now},
		{"the wait keeps its start", &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p1", Result: resultWaiting, WaitingSince: nowTime(now.Add(-time.Minute))},
			unavailable(), resultWaiting, now.Add(-time.Minute)},
		{"past the limit it is lease_unavailable", &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p1", Result: resultWaiting, WaitingSince: nowTime(now.Add(-leaseWaitLimit))},
			unavailable(), string(recon.ResultLeaseUnavailable), time.Time{}},
		{"another plan's wait starts again", &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p0", Result: resultWaiting, WaitingSince: nowTime(now.Add(-leaseWaitLimit))},
			unavailable(), resultWaiting, now},
		{"a refusal is left as it is", nil, &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p1", Result: string(recon.ResultPlanStale)}, string(recon.ResultPlanStale), time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			waitForLease(tc.prev, tc.out, now)
			if tc.out.Result != tc.want {
				t.Fatalf("result %q, want %q", tc.out.Result, tc.want)
			}
			if !tc.wantSince.IsZero() && (tc.out.WaitingSince == nil || !tc.out.WaitingSince.Time.Equal(tc.wantSince)) {
				t.Fatalf("waitingSince %v, want %v", tc.out.WaitingSince, tc.wantSince)
			}
		})
	}
}

func TestDecide_RetriesAWaitSoon(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	spec := &recoveryv1.ProjectionReconciliationSpec{Approval: &recoveryv1.ReconciliationApproval{PlanID: "p1"}}
	st := &recoveryv1.ProjectionReconciliationStatus{ObservedGeneration: 1, Plan: &recoveryv1.PlanSummary{PlanID: "p1"},
		Outcome: &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p1", Result: resultWaiting, At: nowTime(now), WaitingSince: nowTime(now)}}
	if d := decideReconciliation(spec, st, 1, now); d.action != reconNothing || d.requeueAfter <= 0 || d.requeueAfter > leaseWaitRetry+time.Second {
		t.Fatalf("right after the wait: %+v, want a requeue within %s", d, leaseWaitRetry+time.Second)
	}
	if d := decideReconciliation(spec, st, 1, now.Add(leaseWaitRetry)); d.action != reconApply {
		t.Fatalf("after %s: %+v, want the apply again", leaseWaitRetry, d)
	}
}

func TestOpenDrift(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	pr := func(name string, findings int32) recoveryv1.ProjectionReconciliation {
		return recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: recoveryv1.ProjectionReconciliationStatus{LastRunAt: &at, Report: &recoveryv1.ReportSummary{Findings: findings}}}
	}
	cases := []struct {
		name string
		prs  []recoveryv1.ProjectionReconciliation
		want string
	}{
		{"none", nil, ""},
		{"clean reports", []recoveryv1.ProjectionReconciliation{pr("a", 0), pr("b", 0)}, ""},
		{"no report yet", []recoveryv1.ProjectionReconciliation{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}, ""},
		{"the one with most findings", []recoveryv1.ProjectionReconciliation{pr("a", 1), pr("b", 3), pr("c", 2)}, "b"},
		{"ties by name", []recoveryv1.ProjectionReconciliation{pr("z", 2), pr("m", 2)}, "m"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := openDrift(tc.prs)
			if got := ""; d != nil {
				got = d.Reconciliation
				if got != tc.want {
					t.Fatalf("openDrift names %q, want %q", got, tc.want)
				}
				return
			}
			if tc.want != "" {
				t.Fatalf("openDrift nil, want %q", tc.want)
			}
		})
	}
}

// TestDecide_TooLargeWaitsLonger: a dry run refused snapshot_too_large is
// not re-read every reconRetry: it stays Stalled and is tried again after
// tooLargeRetry, or at once after a spec change.
func TestDecide_TooLargeWaitsLonger(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	spec := &recoveryv1.ProjectionReconciliationSpec{}
	st := &recoveryv1.ProjectionReconciliationStatus{ObservedGeneration: 1, RunState: recoveryv1.RunFailed, LastRunAt: nowTime(now),
		Conditions: []metav1.Condition{{Type: recoveryv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: ReasonSnapshotTooLarge}}}
	cases := []struct {
		name string
		gen  int64
		at   time.Time
		want reconAction
	}{
		{"after reconRetry: still waiting", 1, now.Add(2 * reconRetry), reconNothing},
		{"after tooLargeRetry: tried again", 1, now.Add(tooLargeRetry), reconDryRun},
		{"a spec change: tried at once", 2, now.Add(time.Second), reconDryRun},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if d := decideReconciliation(spec, st, tc.gen, tc.at); d.action != tc.want {
				t.Fatalf("decided %+v, want %s", d, tc.want)
			}
		})
	}
	plain := st.DeepCopy()
	plain.Conditions = nil
	if d := decideReconciliation(spec, plain, 1, now.Add(2*reconRetry)); d.action != reconDryRun {
		t.Fatalf("another failure after reconRetry: %+v, want a dry run", d)
	}
}
