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
)

func TestReconDecide_OneActionPerReconcile(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { m := metav1.NewTime(now.Add(d)); return &m }
	plan := &recoveryv1.PlanSummary{PlanID: "p1"}
	approval := &recoveryv1.ReconciliationApproval{PlanID: "p1", Approver: "alice"}
	hourly := &recoveryv1.ReconciliationSchedule{Interval: metav1.Duration{Duration: time.Hour}}
	reported := func(mut func(*recoveryv1.ProjectionReconciliationStatus)) recoveryv1.ProjectionReconciliationStatus {
		st := recoveryv1.ProjectionReconciliationStatus{ObservedGeneration: 1, RunState: recoveryv1.RunReported, LastRunAt: at(-time.Minute), Plan: plan}
		if mut != nil {
			mut(&st)
		}
		return st
	}
	cases := []struct {
		name    string
		spec    recoveryv1.ProjectionReconciliationSpec
		st      recoveryv1.ProjectionReconciliationStatus
		gen     int64
		want    reconAction
		requeue time.Duration
	}{
		{name: "new resource: dry run", st: recoveryv1.ProjectionReconciliationStatus{}, gen: 1, want: reconDryRun},
		{name: "generation changed: dry run", st: reported(nil), gen: 2, want: reconDryRun},
		{name: "settled, no schedule: nothing", st: reported(nil), gen: 1, want: reconNothing},
		{name: "schedule not due: requeue at the interval", spec: recoveryv1.ProjectionReconciliationSpec{Schedule: hourly}, st: reported(nil), gen: 1,
			want: reconNothing, requeue: 59*time.Minute + time.Second},
		{name: "schedule due: a dry run, never an apply", spec: recoveryv1.ProjectionReconciliationSpec{Schedule: hourly},
			st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) { s.LastRunAt = at(-2 * time.Hour) }), gen: 1, want: reconDryRun},
		{name: "approval of the plan: apply", spec: recoveryv1.ProjectionReconciliationSpec{Approval: approval}, st: reported(nil), gen: 2, want: reconApply},
		{name: "approval with a wrong planId is still executed (the workflow refuses confirmation_required)",
			spec: recoveryv1.ProjectionReconciliationSpec{Approval: &recoveryv1.ReconciliationApproval{PlanID: "bogus", Approver: "alice"}}, st: reported(nil), gen: 2, want: reconApply},
		{name: "approval before any plan: dry run first", spec: recoveryv1.ProjectionReconciliationSpec{Approval: approval},
			st: recoveryv1.ProjectionReconciliationStatus{}, gen: 1, want: reconDryRun},
		{name: "approval executed: a resync never re-applies", spec: recoveryv1.ProjectionReconciliationSpec{Approval: approval},
			st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) {
				s.Outcome = &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p1", Result: resultOK, At: at(-time.Second)}
			}), gen: 1, want: reconNothing},
		{name: "approval refused for good (plan_expired): not retried", spec: recoveryv1.ProjectionReconciliationSpec{Approval: approval},
			st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) {
				s.Outcome = &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p1", Result: "plan_expired", At: at(-time.Hour)}
			}), gen: 1, want: reconNothing},
		{name: "refused approval edited (new generation): tried again", spec: recoveryv1.ProjectionReconciliationSpec{Approval: approval},
			st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) {
				s.Outcome = &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p1", Result: "repair_denied", At: at(-time.Hour)}
			}), gen: 2, want: reconApply},
		{name: "successful approval, spec edited: a dry run, never a second apply", spec: recoveryv1.ProjectionReconciliationSpec{Approval: approval},
			st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) {
				s.Outcome = &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p1", Result: resultOK, At: at(-time.Hour)}
			}), gen: 2, want: reconDryRun},
		{name: "approval refused lease_unavailable: retried after the delay", spec: recoveryv1.ProjectionReconciliationSpec{Approval: approval},
			st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) {
				s.Outcome = &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p1", Result: "lease_unavailable", At: at(-time.Minute)}
			}), gen: 1, want: reconApply},
		{name: "approval refused lease_unavailable just now: wait", spec: recoveryv1.ProjectionReconciliationSpec{Approval: approval},
			st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) {
				s.Outcome = &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p1", Result: "lease_unavailable", At: at(-10 * time.Second)}
			}), gen: 1, want: reconNothing, requeue: 21 * time.Second},
		{name: "rollback of the successful apply", spec: recoveryv1.ProjectionReconciliationSpec{Rollback: &recoveryv1.ReconciliationRollback{CorrelationID: "c1", Approver: "alice"}},
			st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) {
				s.Outcome = &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p1", CorrelationID: "c1", Result: resultOK}
			}), gen: 2, want: reconRollback},
		{name: "rollback done: never twice", spec: recoveryv1.ProjectionReconciliationSpec{Rollback: &recoveryv1.ReconciliationRollback{CorrelationID: "c1", Approver: "alice"}},
			st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) {
				s.Outcome = &recoveryv1.OutcomeSummary{Operation: opRollback, PlanID: "p1", CorrelationID: "c1", Result: resultOK}
			}), gen: 1, want: reconNothing},
		{name: "rollback naming a run status does not (a crashed apply), just set: rolled back once",
			spec: recoveryv1.ProjectionReconciliationSpec{Rollback: &recoveryv1.ReconciliationRollback{CorrelationID: "crashed", Approver: "alice"}},
			st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) {
				s.Outcome = &recoveryv1.OutcomeSummary{Operation: opApply, CorrelationID: "c1", Result: "plan_stale"}
			}), gen: 2, want: reconRollback},
		{name: "rollback naming a run status does not, on a resync: never re-attempted",
			spec: recoveryv1.ProjectionReconciliationSpec{Rollback: &recoveryv1.ReconciliationRollback{CorrelationID: "crashed", Approver: "alice"}},
			st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) {
				s.Outcome = &recoveryv1.OutcomeSummary{Operation: opApply, CorrelationID: "c1", Result: resultOK}
			}), gen: 1, want: reconNothing},
		{name: "rollback naming a run, no outcome yet, just set: rolled back",
			spec: recoveryv1.ProjectionReconciliationSpec{Rollback: &recoveryv1.ReconciliationRollback{CorrelationID: "crashed", Approver: "alice"}},
			st:   reported(nil), gen: 2, want: reconRollback},
		{name: "rollback of a refused apply: nothing to roll back",
			spec: recoveryv1.ProjectionReconciliationSpec{Rollback: &recoveryv1.ReconciliationRollback{CorrelationID: "c1", Approver: "alice"}},
			st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) {
				s.Outcome = &recoveryv1.OutcomeSummary{Operation: opApply, CorrelationID: "c1", Result: "plan_stale"}
			}), gen: 1, want: reconNothing},
		{name: "rollback refused lease_unavailable: retried after the delay",
			spec: recoveryv1.ProjectionReconciliationSpec{Rollback: &recoveryv1.ReconciliationRollback{CorrelationID: "c1", Approver: "alice"}},
			st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) {
				s.Outcome = &recoveryv1.OutcomeSummary{Operation: opRollback, CorrelationID: "c1", Result: "lease_unavailable", At: at(-time.Minute)}
			}), gen: 1, want: reconRollback},
		{name: "rollback refused lease_unavailable just now: wait",
			spec: recoveryv1.ProjectionReconciliationSpec{Rollback: &recoveryv1.ReconciliationRollback{CorrelationID: "c1", Approver: "alice"}},
			st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) {
				s.Outcome = &recoveryv1.OutcomeSummary{Operation: opRollback, CorrelationID: "c1", Result: "lease_unavailable", At: at(-10 * time.Second)}
			}), gen: 1, want: reconNothing, requeue: 21 * time.Second},
		{name: "rollback refused for good (nothing_selected): not retried",
			spec: recoveryv1.ProjectionReconciliationSpec{Rollback: &recoveryv1.ReconciliationRollback{CorrelationID: "c1", Approver: "alice"}},
			st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) {
				s.Outcome = &recoveryv1.OutcomeSummary{Operation: opRollback, CorrelationID: "c1", Result: "nothing_selected", At: at(-time.Hour)}
			}), gen: 1, want: reconNothing},
		{name: "refused rollback retried on a spec change",
			spec: recoveryv1.ProjectionReconciliationSpec{Rollback: &recoveryv1.ReconciliationRollback{CorrelationID: "c1", Approver: "bob"}},
			st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) {
				s.Outcome = &recoveryv1.OutcomeSummary{Operation: opRollback, CorrelationID: "c1", Result: "repair_denied"}
			}), gen: 2, want: reconRollback},
		{name: "failed dry run retried after the delay", st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) { s.RunState = recoveryv1.RunFailed }),
			gen: 1, want: reconDryRun},
		{name: "failed dry run just now: wait", st: reported(func(s *recoveryv1.ProjectionReconciliationStatus) {
			s.RunState, s.LastRunAt = recoveryv1.RunFailed, at(-5*time.Second)
		}), gen: 1, want: reconNothing, requeue: 26 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := decideReconciliation(&c.spec, &c.st, c.gen, now)
			if d.action != c.want || d.requeueAfter != c.requeue {
				t.Fatalf("decision %q (requeue %s, why %q), want %q (requeue %s)", d.action, d.requeueAfter, d.why, c.want, c.requeue)
			}
		})
	}
}

func TestReconDecide_Conditions(t *testing.T) {
	approval := &recoveryv1.ReconciliationApproval{PlanID: "p1", Approver: "alice"}
	cases := []struct {
		name              string
		spec              recoveryv1.ProjectionReconciliationSpec
		st                recoveryv1.ProjectionReconciliationStatus
		stall             string
		ready, rec, stuck metav1.ConditionStatus
		reason            string
	}{
		{name: "missing recovery: stalled", stall: ReasonRecoveryNotFound, ready: "False", rec: "False", stuck: "True", reason: ReasonRecoveryNotFound},
		{name: "no run yet: reconciling", ready: "False", rec: "True", stuck: "False", reason: ReasonRunning},
		{name: "clean report: ready", st: recoveryv1.ProjectionReconciliationStatus{RunState: recoveryv1.RunReported, Report: &recoveryv1.ReportSummary{Clean: true}},
			ready: "True", rec: "False", stuck: "False", reason: ReasonReported},
		{name: "drift awaiting an approver: stalled", st: recoveryv1.ProjectionReconciliationStatus{RunState: recoveryv1.RunReported, Report: &recoveryv1.ReportSummary{Findings: 1}},
			ready: "False", rec: "False", stuck: "True", reason: ReasonDrift},
		{name: "applied, verified, clean again: ready", st: recoveryv1.ProjectionReconciliationStatus{RunState: recoveryv1.RunReported, Report: &recoveryv1.ReportSummary{Clean: true},
			Outcome: &recoveryv1.OutcomeSummary{Operation: opApply, Result: resultOK, VerificationRan: true}}, ready: "True", rec: "False", stuck: "False", reason: ReasonRepaired},
		{name: "plan_expired while the approval stands: stalled", spec: recoveryv1.ProjectionReconciliationSpec{Approval: approval},
			st: recoveryv1.ProjectionReconciliationStatus{RunState: recoveryv1.RunReported, Report: &recoveryv1.ReportSummary{Findings: 1},
				Outcome: &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p1", Result: "plan_expired"}}, ready: "False", rec: "False", stuck: "True", reason: ReasonRefused},
		{name: "repair_denied, approval removed: stalled on the drift, no longer on the refusal",
			st: recoveryv1.ProjectionReconciliationStatus{RunState: recoveryv1.RunReported, Report: &recoveryv1.ReportSummary{Findings: 1},
				Outcome: &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p1", Result: "repair_denied"}}, ready: "False", rec: "False", stuck: "True", reason: ReasonDrift},
		{name: "lease_unavailable: not a human's job", spec: recoveryv1.ProjectionReconciliationSpec{Approval: approval},
			st: recoveryv1.ProjectionReconciliationStatus{RunState: recoveryv1.RunReported, Report: &recoveryv1.ReportSummary{Findings: 1},
				Outcome: &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p1", Result: "lease_unavailable"}}, ready: "False", rec: "False", stuck: "False", reason: ReasonDrift},
		{name: "failed run: reconciling", st: recoveryv1.ProjectionReconciliationStatus{RunState: recoveryv1.RunFailed}, ready: "False", rec: "True", stuck: "False", reason: ReasonRunFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set := reconConditions(&c.spec, &c.st, c.stall, "msg")
			if set.ready != c.ready || set.reconciling != c.rec || set.stalled != c.stuck || set.reason != c.reason {
				t.Fatalf("got %+v, want ready=%s reconciling=%s stalled=%s reason=%s", set, c.ready, c.rec, c.stuck, c.reason)
			}
		})
	}
}

// TestClassifyLive: an apply or rollback runs only on the object the API
// server holds now (confirmLive); every other answer withholds it.
func TestClassifyLive(t *testing.T) {
	cached := &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{UID: "u1", ResourceVersion: "10"}}
	with := func(mut func(*recoveryv1.ProjectionReconciliation)) *recoveryv1.ProjectionReconciliation {
		o := cached.DeepCopy()
		mut(o)
		return o
	}
	deleting := metav1.Now()
	for _, tc := range []struct {
		name     string
		live     *recoveryv1.ProjectionReconciliation
		notFound bool
		want     liveVerdict
	}{
		{"the same object, unchanged", cached.DeepCopy(), false, liveCurrent},
		{"deleted", nil, true, liveGone},
		{"no object and no error", nil, false, liveGone},
		{"recreated under its name", with(func(o *recoveryv1.ProjectionReconciliation) { o.UID = "u2" }), false, liveGone},
		{"recreated with the same resourceVersion text", with(func(o *recoveryv1.ProjectionReconciliation) { o.UID = "u2"; o.ResourceVersion = "10" }), false, liveGone},
		{"being deleted", with(func(o *recoveryv1.ProjectionReconciliation) { o.DeletionTimestamp = &deleting }), false, liveGone},
		{"changed since the cache read it", with(func(o *recoveryv1.ProjectionReconciliation) { o.ResourceVersion = "11" }), false, liveBehind},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classifyLive(cached, tc.live, tc.notFound); got != tc.want {
				t.Fatalf("classifyLive = %s, want %s", got, tc.want)
			}
		})
	}
}
