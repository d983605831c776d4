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
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

var bg = context.Background()

// grantApprove lets user approve ProjectionReconciliations in ns (RBAC): the
// SubjectAccessReview the controller sends at apply time then allows it.
func grantApprove(t *testing.T, ns, user string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "approver"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{recoveryv1.GroupVersion.Group}, Resources: []string{"projectionreconciliations"},
			Verbs: []string{recoveryv1.ApproveVerb, "get", "update", "patch"}}}}
	if err := k8sClient.Create(bg, role); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "approver-" + user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "approver"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}
	if err := k8sClient.Create(bg, rb); err != nil {
		t.Fatal(err)
	}
}

func getRecon(t *testing.T, ns, name string) *recoveryv1.ProjectionReconciliation {
	t.Helper()
	o := &recoveryv1.ProjectionReconciliation{}
	if err := k8sClient.Get(bg, client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
		t.Fatal(err)
	}
	return o
}

// waitRecon polls the reconciliation until cond holds.
func waitRecon(t *testing.T, ns, name, what string, cond func(*recoveryv1.ProjectionReconciliation) bool) *recoveryv1.ProjectionReconciliation {
	t.Helper()
	var got *recoveryv1.ProjectionReconciliation
	eventually(t, 90*time.Second, what, func() (bool, error) {
		got = getRecon(t, ns, name)
		return cond(got), nil
	})
	return got
}

// setSpec mutates the spec as the envtest admin: for changes that are no
// approval act (an approval or rollback is written as its approver: specAs).
func setSpec(t *testing.T, ns, name string, mut func(*recoveryv1.ProjectionReconciliationSpec)) {
	t.Helper()
	o := getRecon(t, ns, name)
	mut(&o.Spec)
	if err := k8sClient.Update(bg, o); err != nil {
		t.Fatal(err)
	}
}

func outcomeIs(op, result, planID string) func(*recoveryv1.ProjectionReconciliation) bool {
	return func(o *recoveryv1.ProjectionReconciliation) bool {
		oc := o.Status.Outcome
		return oc != nil && oc.Operation == op && oc.Result == result && (planID == "" || oc.PlanID == planID) && o.Status.ObservedGeneration == o.Generation
	}
}

func tradeCount(t *testing.T, f *fixture, id string) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(bg, `SELECT count(*) FROM trades WHERE scope = $1 AND trade_id = $2`, f.scope, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// orphanBlockedScope is the scene of the approval tests: a scope caught up
// (CURRENT), then an orphan trade 'orphan-1' the member never produced
// inserted as the live projector would, which BLOCKs the scope with
// ORPHAN_TRADE on its next cycle.
func orphanBlockedScope(t *testing.T, ns, scope, name string) (*fixture, *recoveryv1.ProjectionRecovery) {
	t.Helper()
	f := newFixture(t, scope, 120, 0.2)
	rec := f.recovery(ns, name, nil, nil)
	waitState(t, ns, rec.Name, 60*time.Second, "CURRENT", isCurrentAt(f.boundary()))

	b := f.boundary()
	if _, err := f.pool.Exec(bg, `INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity,
  buy_order_id, sell_order_id, buy_account, sell_account, ts, booking_status, written_by)
SELECT scope, 'orphan-1', 1000000, $2, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts, 'BOOKED', 'live'
  FROM trades WHERE scope = $1 ORDER BY seq DESC LIMIT 1`, f.scope, b+1); err != nil {
		t.Fatal(err)
	}
	f.step(40)
	got, _ := waitState(t, ns, rec.Name, 60*time.Second, "BLOCKED", func(o *recoveryv1.ProjectionRecovery) bool { return o.Status.State == recoveryv1.StateBlocked })
	if got.Status.Reason != string(codes.OrphanTrade) {
		t.Fatalf("recovery reason %s, want ORPHAN_TRADE", got.Status.Reason)
	}
	return f, rec
}

// TestEnvtest_ReconciliationRepairsBlockedScope, on real parts (apiserver,
// PostgreSQL with the documented roles, a reference member): an orphan
// trade BLOCKs the scope (ORPHAN_TRADE); a ProjectionReconciliation reports
// the invariant and its cause with a plan; an approval with a wrong planId
// is refused confirmation_required, one on an expired plan (injected clock)
// plan_expired, each writing nothing (approvers the controller refuses are
// projectionreconciliation_approvalguard_envtest_test.go's); the right approval by an approver,
// written through the admission policy, applies, verifies, re-triggers the recovery, which
// goes CURRENT with every SQL key equal to the independent replay and names
// the reconciliation in its status; a scheduled dry run never applies.
func TestEnvtest_ReconciliationRepairsBlockedScope(t *testing.T) {
	installApprovalManifests(t)
	ns := newNamespace(t)
	f, pr, o := reportedOrphanPlan(t, ns, "recon-orphan", "orphan")
	rep, plan := o.Status.Report, o.Status.Plan
	if rep.Findings == 0 || len(rep.Top) == 0 || plan.Actions != 1 || plan.Expires == nil || len(plan.Items) != 1 {
		t.Fatalf("report %+v plan %+v: want a finding and one action", rep, plan)
	}
	t.Logf("plan %s: %+v, preflight ok: %t", plan.PlanID, plan.Items, plan.WouldSucceed)
	top := rep.Top[0]
	if top.Invariant != string(recon.TradePresentInSource) || !strings.HasPrefix(top.Cause, string(recon.CauseNotInConsensus)+" (") || !strings.Contains(top.ID, "orphan-1") {
		t.Fatalf("top finding %+v: want %s caused by %s on orphan-1", top, recon.TradePresentInSource, recon.CauseNotInConsensus)
	}
	if c := meta.FindStatusCondition(o.Status.Conditions, recoveryv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonDrift {
		t.Fatalf("Ready = %+v, want False/%s", c, ReasonDrift)
	}
	if v := suiteRecon.Metrics.Drift(ns, pr.Name, f.scope, string(recon.TradePresentInSource)); v < 1 {
		t.Fatalf("drift gauge = %v, want >= 1", v)
	}

	// A wrong planId: confirmation_required, nothing applied.
	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) {
		s.Approval = approvalOf(o, "alice", nil)
		s.Approval.PlanID = "not-the-plan"
	})
	o = waitRecon(t, ns, pr.Name, "confirmation_required", outcomeIs(opApply, string(recon.ResultConfirmationNeeded), "not-the-plan"))
	if c := meta.FindStatusCondition(o.Status.Conditions, recoveryv1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Stalled = %+v, want True after confirmation_required", c)
	}
	if tradeCount(t, f, "orphan-1") != 1 {
		t.Fatal("a refused approval touched the orphan trade")
	}

	// The plan expired (the controller's clock is 16 minutes on): plan_expired.
	reconClock.shift(16 * time.Minute)
	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval.PlanID = plan.PlanID })
	waitRecon(t, ns, pr.Name, "plan_expired", outcomeIs(opApply, string(recon.ResultPlanExpired), plan.PlanID))
	reconClock.shift(0)
	if tradeCount(t, f, "orphan-1") != 1 {
		t.Fatal("an expired plan touched the orphan trade")
	}

	// The right approval by an approver, within the plan's lifetime.
	applies := reconCounter(t, "apply", "ok")
	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval.MaxActions = 9 })
	o = waitRecon(t, ns, pr.Name, "apply ok", outcomeIs(opApply, "ok", plan.PlanID))
	// The run is counted on the registry the manager serves at /metrics.
	if got := reconCounter(t, "apply", "ok"); got < applies+1 {
		t.Fatalf("projection_reconciliation_runs_total{operation=apply,code=ok} = %v, was %v: the apply is not on /metrics", got, applies)
	}
	oc := o.Status.Outcome
	if oc.Applied != 1 || !oc.VerificationRan || oc.Verified == 0 || oc.StillDrifting != 0 || oc.CorrelationID == "" || oc.Approver != "alice" {
		t.Fatalf("outcome %+v: want one action applied and verified", oc)
	}
	if tradeCount(t, f, "orphan-1") != 0 {
		t.Fatal("the approved quarantine left the orphan trade in trades")
	}
	got, _ := waitState(t, ns, pr.Spec.RecoveryRef.Name, 60*time.Second, "CURRENT after the repair", func(o *recoveryv1.ProjectionRecovery) bool {
		return isCurrentAt(f.boundary())(o) && o.Status.LastReconciliation != ""
	})
	if want := pr.Name + "/" + oc.CorrelationID; got.Status.LastReconciliation != want {
		t.Fatalf("recovery status.lastReconciliation = %q, want %q", got.Status.LastReconciliation, want)
	}
	storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())
	o = waitRecon(t, ns, pr.Name, "Ready after the repair", func(o *recoveryv1.ProjectionReconciliation) bool {
		c := meta.FindStatusCondition(o.Status.Conditions, recoveryv1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	if o.Status.Report == nil || !o.Status.Report.Clean || o.Status.Report.Findings != 0 {
		t.Fatalf("report after the repair %+v, want clean", o.Status.Report)
	}

	// A schedule only ever dry-runs: drift again, no approval, the
	// schedule's interval elapses (clock on) → a fresh report and plan,
	// lastRunAt moves, nothing applied.
	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) {
		s.Approval = nil
		s.Schedule = &recoveryv1.ReconciliationSchedule{Interval: metav1.Duration{Duration: time.Minute}}
	})
	o = waitRecon(t, ns, pr.Name, "the spec change observed", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.ObservedGeneration == o.Generation
	})
	if _, err := f.pool.Exec(bg, `UPDATE positions SET quantity = quantity + 7 WHERE scope = $1 AND (account, instrument) =
 (SELECT account, instrument FROM positions WHERE scope = $1 ORDER BY account, instrument LIMIT 1)`, f.scope); err != nil {
		t.Fatal(err)
	}
	last := o.Status.LastRunAt
	reconClock.shift(2 * time.Minute)
	defer reconClock.shift(0)
	patch := []byte(`{"metadata":{"annotations":{"` + recoveryv1.AnnotationRequestedAt + `":"scheduled-test"}}}`)
	if err := k8sClient.Patch(bg, o, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	o = waitRecon(t, ns, pr.Name, "a scheduled dry run reporting the new drift", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.LastRunAt != nil && last != nil && o.Status.LastRunAt.After(last.Time) && o.Status.Report != nil && o.Status.Report.Findings > 0
	})
	if o.Status.Outcome == nil || o.Status.Outcome.CorrelationID != oc.CorrelationID || o.Status.Outcome.Operation != opApply {
		t.Fatalf("a scheduled run changed the outcome: %+v", o.Status.Outcome)
	}
	if o.Status.Plan == nil || o.Status.Plan.Actions == 0 {
		t.Fatalf("the scheduled run planned nothing: %+v", o.Status.Plan)
	}
	time.Sleep(2 * time.Second)
	var q int64
	if err := f.pool.QueryRow(bg, `SELECT count(*) FROM projection_reconciliation_journal WHERE correlation_id <> $1`, oc.CorrelationID).Scan(&q); err != nil {
		t.Fatal(err)
	}
	if q != 0 {
		t.Fatalf("the journal holds %d entries of another run: a scheduled dry run applied", q)
	}
}

// grantEditReconciliations lets user read and update ProjectionReconciliations
// in ns (what the shipped edit role grants; the approve verb is separate).
func grantEditReconciliations(t *testing.T, ns, user string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reconciliation-editor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{recoveryv1.GroupVersion.Group}, Resources: []string{"projectionreconciliations"}, Verbs: []string{"get", "update", "patch"}}}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reconciliation-editor-" + user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}
	for _, o := range []client.Object{role, rb} {
		if err := k8sClient.Create(bg, o); err != nil {
			t.Fatal(err)
		}
	}
}

// updateSpecAs mutates the spec through c, read fresh and retried while
// it conflicts with the controllers' writes or the user's new RBAC binding
// is not in effect yet.
func updateSpecAs(t *testing.T, c client.Client, ns, name string, mut func(*recoveryv1.ProjectionReconciliationSpec)) {
	t.Helper()
	eventually(t, 30*time.Second, "the spec update of "+name+" stored", func() (bool, error) {
		o := &recoveryv1.ProjectionReconciliation{}
		if err := c.Get(bg, client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
			return false, err
		}
		mut(&o.Spec)
		err := c.Update(bg, o)
		return err == nil, err
	})
}

// TestEnvtest_ReconciliationRefusesTamperedPlan: after a dry run, the
// database admin edits the stored plan (projection_reconciliation_runs.plan:
// the quarantine action's after value); an approval with the right planId
// by a user allowed to approve is refused plan_tampered (the actions no
// longer hash to the fingerprint the planId binds), Stalled until a human
// acts, and nothing is applied: the orphan trade is still in trades, the
// journal is empty, no audit record says applied.
func TestEnvtest_ReconciliationRefusesTamperedPlan(t *testing.T) {
	installApprovalManifests(t)
	ns := newNamespace(t)
	grantApprove(t, ns, "alice")
	f, rec := orphanBlockedScope(t, ns, "recon-tamper", "tamper")

	createSecret(t, ns, "repair-db", map[string]string{"dsn": f.reconDSN})
	pr := &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fix-tamper"},
		Spec: recoveryv1.ProjectionReconciliationSpec{RecoveryRef: recoveryv1.RecoveryReference{Name: rec.Name},
			RepairDSNSecretRef: &recoveryv1.SecretKeySelector{Name: "repair-db", Key: "dsn"}}}
	if err := k8sClient.Create(bg, pr); err != nil {
		t.Fatal(err)
	}
	o := waitRecon(t, ns, pr.Name, "a report with a plan", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.RunState == recoveryv1.RunReported && o.Status.Plan != nil && o.Status.Plan.Actions == 1
	})
	plan := o.Status.Plan

	// The admin rewrites the action's after value inside the stored plan
	// (every run of this plan id: the controller reads back the newest).
	tag, err := f.pool.Exec(bg, `UPDATE projection_reconciliation_runs
   SET plan = jsonb_set(plan, '{actions,0,after}', coalesce(plan #> '{actions,0,after}', '{}'::jsonb) || '{"booking_status": "TAMPERED"}'::jsonb)
 WHERE scope = $1 AND plan_id = $2 AND plan IS NOT NULL`, f.scope, plan.PlanID)
	if err != nil || tag.RowsAffected() == 0 {
		t.Fatalf("tampering with the stored plan %s: rows %d, err %v", plan.PlanID, tag.RowsAffected(), err)
	}

	// alice approves as herself (the admission policy, when installed,
	// lets only her write an approval in her name).
	grantEditReconciliations(t, ns, "alice")
	updateSpecAs(t, approvalClientAs(t, "alice"), ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) {
		s.Approval = &recoveryv1.ReconciliationApproval{PlanID: plan.PlanID, Binding: plan.Binding, Approver: "alice",
			ApproverGroups: []string{"system:authenticated"}, MaxActions: 10}
	})
	o = waitRecon(t, ns, pr.Name, "an outcome for the approval", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.Outcome != nil && o.Status.Outcome.PlanID == plan.PlanID && o.Status.ObservedGeneration == o.Generation
	})
	if oc := o.Status.Outcome; oc.Operation != opApply || oc.Result != string(recon.ResultPlanTampered) || oc.Applied != 0 {
		t.Fatalf("outcome %+v: want apply refused %s with nothing applied", oc, recon.ResultPlanTampered)
	}
	if c := meta.FindStatusCondition(o.Status.Conditions, recoveryv1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonRefused {
		t.Fatalf("Stalled = %+v, want True/%s after plan_tampered", c, ReasonRefused)
	}
	// A resync must not try the refused approval again (it needs a human).
	time.Sleep(2 * time.Second)
	if tradeCount(t, f, "orphan-1") != 1 {
		t.Fatal("a tampered plan touched the orphan trade")
	}
	var journal, applied int64
	if err := f.pool.QueryRow(bg, `SELECT count(*) FROM projection_reconciliation_journal WHERE scope = $1`, f.scope).Scan(&journal); err != nil {
		t.Fatal(err)
	}
	if err := f.pool.QueryRow(bg, `SELECT count(*) FROM projection_reconciliation_audit WHERE scope = $1 AND outcome = 'applied'`, f.scope).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if journal != 0 || applied != 0 {
		t.Fatalf("a tampered plan wrote: %d journal rows, %d applied audit records", journal, applied)
	}
	if got := getRecon(t, ns, pr.Name).Status.Outcome; got.Result != string(recon.ResultPlanTampered) {
		t.Fatalf("outcome changed on a resync: %+v", got)
	}
}

// startScheduler runs a manager with only the scheduler (--reconcile-every
// = every) over the ProjectionRecoveries matching sel, as cmd/manager
// registers it. The suite manager's reconciliation controller runs the
// scheduled objects it creates.
func startScheduler(t *testing.T, sel labels.Selector, every time.Duration) (stop func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{ByObject: map[client.Object]cache.ByObject{&recoveryv1.ProjectionRecovery{}: {Label: sel}}},
		Controller:             ctrlConfigUniqueNames(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&ProjectionReconciliationScheduler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("projection-reconciliation-schedule"), Every: every}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("scheduler manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitScheduled polls the scheduled reconciliation (absent counts as not yet).
func waitScheduled(t *testing.T, ns, name, what string, cond func(*recoveryv1.ProjectionReconciliation) bool) *recoveryv1.ProjectionReconciliation {
	t.Helper()
	var got *recoveryv1.ProjectionReconciliation
	eventually(t, 100*time.Second, what, func() (bool, error) {
		o := &recoveryv1.ProjectionReconciliation{}
		if err := k8sClient.Get(bg, client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
			return false, err
		}
		got = o
		return cond(o), nil
	})
	return got
}

// TestEnvtest_ScheduleReportsDriftAsEventAndMetric: scheduled reconciliation
// of every scope, off by default, reports drift as an Event and a metric:
// with --reconcile-every=1m the manager keeps a
// "<recovery>-scheduled" ProjectionReconciliation owned by the recovery
// (controller, same UID), labelled managed-by=schedule, without approval;
// its first dry run on the CURRENT scope is clean; an edit of its interval
// and an approval slipped into it are reverted, a deletion is undone; a
// drift introduced later is found by the next scheduled run on its own
// timer (no spec change, no poke: its requeue, on the controller's clock),
// which raises the DriftFound Warning event and the
// projection_reconciliation_drift_findings gauge, and applies nothing; the
// flag turned off removes the object and its series.
func TestEnvtest_ScheduleReportsDriftAsEventAndMetric(t *testing.T) {
	withoutApprovalPolicy(t) // the edit below slips an approval in as the admin, to see it reverted
	ns := newNamespace(t)
	lbl, sel := shard(t, "schedule")
	f := newFixture(t, "recon-sched", 120, 0.2)
	rec := f.recovery(ns, "sched", lbl, nil)
	stopRec, _, err := startManager("schedule", sel, true, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stopRec()
	waitState(t, ns, rec.Name, 60*time.Second, "CURRENT", isCurrentAt(f.boundary()))

	stopOn := startScheduler(t, sel, time.Minute)
	name := ScheduledReconciliationName(rec.Name)
	o := waitScheduled(t, ns, name, "a clean scheduled report", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.RunState == recoveryv1.RunReported && o.Status.Report != nil && o.Status.ObservedGeneration == o.Generation
	})
	if r := o.Status.Report; !r.Clean || r.Findings != 0 {
		t.Fatalf("first scheduled report %+v, want clean on a CURRENT scope", r)
	}
	c := metav1.GetControllerOf(o)
	if c == nil || c.UID != rec.UID || c.Kind != "ProjectionRecovery" || c.Name != rec.Name {
		t.Fatalf("owner %+v: want the ProjectionRecovery %s (uid %s) as controller", c, rec.Name, rec.UID)
	}
	if o.Labels[LabelManagedBy] != ManagedBySchedule || o.Spec.RecoveryRef.Name != rec.Name || o.Spec.Schedule == nil ||
		o.Spec.Schedule.Interval.Duration != time.Minute || o.Spec.Approval != nil || o.Spec.RepairDSNSecretRef != nil {
		t.Fatalf("scheduled reconciliation labels %v spec %+v: want managed-by=schedule, every 1m, no approval", o.Labels, o.Spec)
	}

	// An edit is reverted: the interval and an approval slipped in (the
	// envtest admin may approve).
	updateSpecAs(t, k8sClient, ns, name, func(s *recoveryv1.ProjectionReconciliationSpec) {
		s.Schedule.Interval.Duration = time.Hour
		s.Approval = &recoveryv1.ReconciliationApproval{PlanID: "plan-x", Approver: "admin"}
	})
	waitScheduled(t, ns, name, "the edit reverted", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Spec.Schedule != nil && o.Spec.Schedule.Interval.Duration == time.Minute && o.Spec.Approval == nil
	})
	// A deletion is undone (a new object, still owned).
	uid := o.UID
	if err := k8sClient.Delete(bg, o); err != nil {
		t.Fatal(err)
	}
	o = waitScheduled(t, ns, name, "the scheduled reconciliation recreated", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.UID != uid && o.Status.RunState == recoveryv1.RunReported && o.Status.Report != nil && o.Status.Report.Clean
	})
	if c := metav1.GetControllerOf(o); c == nil || c.UID != rec.UID {
		t.Fatalf("recreated without its owner: %+v", o.OwnerReferences)
	}

	// Drift the live feed could have caused; the next run is the schedule's own.
	if _, err := f.pool.Exec(bg, `UPDATE positions SET quantity = quantity + 7 WHERE scope = $1 AND (account, instrument) =
 (SELECT account, instrument FROM positions WHERE scope = $1 ORDER BY account, instrument LIMIT 1)`, f.scope); err != nil {
		t.Fatal(err)
	}
	last := o.Status.LastRunAt
	// The interval passes on the controller's clock, which also times its
	// work queue: the requeue the last run scheduled falls due at the
	// queue's next check, with no spec change and no poke.
	reconClock.shift(time.Minute)
	defer reconClock.shift(0)
	o = waitScheduled(t, ns, name, "the next scheduled run reporting the drift", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.LastRunAt != nil && o.Status.LastRunAt.After(last.Time) && o.Status.Report != nil && o.Status.Report.Findings > 0
	})
	if o.Generation != 1 {
		t.Fatalf("generation %d: the run must come from the schedule, not from a spec change", o.Generation)
	}
	if len(o.Status.Report.ByInvariant) == 0 {
		t.Fatalf("report %+v without invariants", o.Status.Report)
	}
	inv := o.Status.Report.ByInvariant[0].Name
	if v := suiteRecon.Metrics.Drift(ns, name, f.scope, inv); v < 1 {
		t.Fatalf("projection_reconciliation_drift_findings{invariant=%q} = %v, want >= 1", inv, v)
	}
	eventually(t, 20*time.Second, "a DriftFound Warning event on the scheduled reconciliation", func() (bool, error) {
		var evs eventsv1.EventList
		if err := k8sClient.List(bg, &evs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == name && e.Type == corev1.EventTypeWarning && e.Reason == ReasonDrift {
				return true, nil
			}
		}
		return false, nil
	})
	var journal int64
	if err := f.pool.QueryRow(bg, `SELECT count(*) FROM projection_reconciliation_journal WHERE scope = $1`, f.scope).Scan(&journal); err != nil {
		t.Fatal(err)
	}
	if journal != 0 || o.Status.Outcome != nil {
		t.Fatalf("a scheduled run applied: %d journal rows, outcome %+v", journal, o.Status.Outcome)
	}

	// Off (a restart without the flag): the scheduler removes what it
	// created, and the drift series goes with it.
	stopOn()
	startScheduler(t, sel, 0)
	eventually(t, 30*time.Second, "the scheduled reconciliation removed with the flag off", func() (bool, error) {
		err := k8sClient.Get(bg, client.ObjectKey{Namespace: ns, Name: name}, &recoveryv1.ProjectionReconciliation{})
		return apierrors.IsNotFound(err), err
	})
	eventually(t, 20*time.Second, "the drift series forgotten", func() (bool, error) {
		return suiteRecon.Metrics.Drift(ns, name, f.scope, inv) == 0, nil
	})
}

// withoutApprovalPolicy lifts the shipped admission policy's binding for one
// test and puts the shipped manifests back after it. The policy is the first
// layer (TestEnvtest_ApprovalOnlyTheAPIServerGrants proves it); a test that
// writes approvals as the envtest admin in other users' names reaches the
// second layer, the controller's own SubjectAccessReview at apply time, which
// must hold even where the policy is not installed. Envtest tests in this
// package run one at a time, so no other test sees the gap.
func withoutApprovalPolicy(t *testing.T) {
	t.Helper()
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "projection-reconciliation-approval"}}
	err := k8sClient.Delete(context.Background(), b)
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { installApprovalManifests(t) })
	eventually(t, 30*time.Second, "the approval policy lifted", func() (bool, error) {
		err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(b), b)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}
