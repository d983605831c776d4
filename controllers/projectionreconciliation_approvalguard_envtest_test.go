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

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// personGroups are the groups an impersonated person is authenticated with:
// what an approval records (the admission policy compares them).
var personGroups = []string{"system:authenticated"}

// listedServiceAccount is the one service account the suite's
// reconciliation controller executes approvals of (--approver-service-accounts).
const listedServiceAccount = "projection-ci:approver-bot"

// specAs changes a ProjectionReconciliation's spec as user, impersonated
// with groups (personGroups when none), as kubectl would: through the
// admission policy when it is installed.
func specAs(t *testing.T, user string, groups []string, ns, name string, mut func(*recoveryv1.ProjectionReconciliationSpec)) {
	t.Helper()
	if groups == nil {
		groups = personGroups
	}
	c := approvalClientAs(t, user, groups...)
	eventually(t, 10*time.Second, "updating "+name+" as "+user, func() (bool, error) {
		o := &recoveryv1.ProjectionReconciliation{}
		if err := c.Get(bg, client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
			return false, err
		}
		mut(&o.Spec)
		err := c.Update(bg, o)
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// approvalOf is the approval kubectl projection approve writes for user:
// the plan and binding status shows.
func approvalOf(o *recoveryv1.ProjectionReconciliation, user string, groups []string) *recoveryv1.ReconciliationApproval {
	if groups == nil {
		groups = personGroups
	}
	return &recoveryv1.ReconciliationApproval{PlanID: o.Status.Plan.PlanID, Binding: o.Status.Plan.Binding,
		Approver: user, ApproverGroups: groups, MaxActions: 10}
}

// nothingRepaired fails when the orphan trade was touched or a journal
// entry written.
func nothingRepaired(t *testing.T, f *fixture, what string) {
	t.Helper()
	if n := tradeCount(t, f, "orphan-1"); n != 1 {
		t.Fatalf("%s: the orphan trade is there %d times, want 1 (untouched)", what, n)
	}
	var journal int64
	if err := f.pool.QueryRow(bg, `SELECT count(*) FROM projection_reconciliation_journal WHERE scope = $1`, f.scope).Scan(&journal); err != nil {
		t.Fatal(err)
	}
	if journal != 0 {
		t.Fatalf("%s: %d journal entries, want none", what, journal)
	}
}

// quarantined waits for the apply of planID to succeed and fails unless it
// took the orphan trade out of trades.
func quarantined(t *testing.T, f *fixture, ns, name, planID, what string) *recoveryv1.ProjectionReconciliation {
	t.Helper()
	o := waitRecon(t, ns, name, what, outcomeIs(opApply, resultOK, planID))
	if n := tradeCount(t, f, "orphan-1"); n != 0 {
		t.Fatalf("%s left the orphan trade (%d)", what, n)
	}
	return o
}

// stalledWith waits for a refusal of op with result, Stalled with reason.
func stalledWith(t *testing.T, ns, name, op, result, reason string) *recoveryv1.ProjectionReconciliation {
	t.Helper()
	o := waitRecon(t, ns, name, op+" "+result, outcomeIs(op, result, ""))
	c := meta.FindStatusCondition(o.Status.Conditions, recoveryv1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason {
		t.Fatalf("Stalled = %+v, want True/%s", c, reason)
	}
	return o
}

// TestEnvtest_ApprovalRefusedWithoutThePolicy: with the approval admission
// policy's binding deleted, an editor (no approve verb) stores an approval
// naming itself with groups [system:masters] — which the controller's
// SubjectAccessReview would allow — and nothing is applied: the outcome is
// approval_policy_missing, Stalled names the missing binding. A real
// approver's approval stored meanwhile is refused too (nothing tells who
// wrote it), and so is a rollback; with the policy back, an approval
// written through it applies.
func TestEnvtest_ApprovalRefusedWithoutThePolicy(t *testing.T) {
	installApprovalManifests(t)
	ns := newNamespace(t)
	f, pr, o := reportedOrphanPlan(t, ns, "recon-nopolicy", "nopolicy")
	approvalBind(t, ns, "bob", "projection-recovery-edit")

	withoutApprovalPolicy(t)
	specAs(t, "bob", personGroups, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) {
		s.Approval = approvalOf(o, "bob", []string{"system:masters"})
	})
	got := stalledWith(t, ns, pr.Name, opApply, resultPolicyMissing, ReasonApprovalPolicyMissing)
	if !strings.Contains(got.Status.Outcome.Message, "ValidatingAdmissionPolicyBinding projection-reconciliation-approval is not installed") {
		t.Fatalf("outcome message %q does not name the missing binding", got.Status.Outcome.Message)
	}
	nothingRepaired(t, f, "an editor's approval without the policy")

	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval = approvalOf(o, "alice", nil) })
	waitRecon(t, ns, pr.Name, "alice's approval refused", func(o *recoveryv1.ProjectionReconciliation) bool {
		return outcomeIs(opApply, resultPolicyMissing, "")(o) && o.Status.Outcome.Approver == "alice"
	})
	nothingRepaired(t, f, "an approver's approval stored without the policy")

	// The policy back: an approval written through it applies.
	installApprovalManifests(t)
	waitApprovalPolicyInEffect(t, approvalClientAs(t, "bob"), ns)
	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval.MaxActions = 9 })
	applied := quarantined(t, f, ns, pr.Name, o.Status.Plan.PlanID, "the approved apply")

	// Its rollback, asked while the policy is gone again: refused.
	withoutApprovalPolicy(t)
	corr := applied.Status.Outcome.CorrelationID
	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) {
		s.Approval = nil
		s.Rollback = &recoveryv1.ReconciliationRollback{CorrelationID: corr, Binding: applied.Status.Plan.Binding, Approver: "alice", ApproverGroups: personGroups}
	})
	stalledWith(t, ns, pr.Name, opRollback, resultPolicyMissing, ReasonApprovalPolicyMissing)
	if n := tradeCount(t, f, "orphan-1"); n != 0 {
		t.Fatalf("a rollback without the policy put the orphan trade back (%d)", n)
	}
}

// TestEnvtest_ServiceAccountApprovalsRefusedUnlessListed: a service account
// bound to cluster-admin (every verb on every resource, as a GitOps
// controller often is) passes the admission policy in its own name and
// groups, and the controller refuses its approval (repair_denied), nothing
// written; the one service account the operator lists approves. The
// controller's SubjectAccessReview still refuses a user without the verb.
func TestEnvtest_ServiceAccountApprovalsRefusedUnlessListed(t *testing.T) {
	installApprovalManifests(t)
	ns := newNamespace(t)
	f, pr, o := reportedOrphanPlan(t, ns, "recon-sa", "sa")

	saUser := func(nsName string) (string, []string) {
		saNS, _, _ := strings.Cut(nsName, ":")
		return serviceAccountPrefix + nsName, []string{"system:serviceaccounts", "system:serviceaccounts:" + saNS, "system:authenticated"}
	}
	for _, sa := range []string{ns + ":flux", listedServiceAccount} {
		saNS, saName, _ := strings.Cut(sa, ":")
		approvalCreate(t, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "sa-admin-"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: saName}},
		})
	}
	flux, fluxGroups := saUser(ns + ":flux")
	specAs(t, flux, fluxGroups, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval = approvalOf(o, flux, fluxGroups) })
	got := stalledWith(t, ns, pr.Name, opApply, string(recon.ResultRepairDenied), ReasonRefused)
	if !strings.Contains(got.Status.Outcome.Message, "service account") {
		t.Fatalf("outcome message %q does not say why", got.Status.Outcome.Message)
	}
	nothingRepaired(t, f, "a service account's approval")

	// The controller's own review, for a user the policy never saw.
	p := &sarPermission{c: k8sClient, namespace: ns, name: pr.Name, approver: "mallory", groups: personGroups}
	if ok, err := p.Allowed(bg, "mallory"); ok || err != nil {
		t.Fatalf("SubjectAccessReview for a user without the approve verb = %t, %v; want denied", ok, err)
	}

	bot, botGroups := saUser(listedServiceAccount)
	specAs(t, bot, botGroups, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval = approvalOf(o, bot, botGroups) })
	quarantined(t, f, ns, pr.Name, o.Status.Plan.PlanID, "the listed service account's apply")
}

// TestEnvtest_ApprovalBoundToWhatWasPlanned: an approval echoes the binding
// of the plan status shows (the recovery's spec generation and the
// versions of the Secrets the repair reads). An editor rewriting the repair
// Secret, or the recovery's spec, after the dry run withdraws it: the
// approval is refused (approval_unbound), nothing written; an approval
// without a binding likewise. Once a dry run has seen the change, the
// approval of its plan applies.
func TestEnvtest_ApprovalBoundToWhatWasPlanned(t *testing.T) {
	installApprovalManifests(t)
	ns := newNamespace(t)
	f, pr, o := reportedOrphanPlan(t, ns, "recon-bound", "bound")
	if !strings.HasPrefix(o.Status.Plan.Binding, "sha256:") {
		t.Fatalf("status.plan.binding %q, want sha256:<hex>", o.Status.Plan.Binding)
	}
	// freshPlan withdraws the approval (a spec change: a new dry run) and
	// waits for the plan made after it.
	freshPlan := func(after string) *recoveryv1.ProjectionReconciliation {
		t.Helper()
		specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval = nil })
		return waitRecon(t, ns, pr.Name, "a fresh plan", func(o *recoveryv1.ProjectionReconciliation) bool {
			return o.Status.ObservedGeneration == o.Generation && o.Status.Plan != nil && o.Status.Plan.Binding != after
		})
	}

	// No binding.
	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) {
		s.Approval = approvalOf(o, "alice", nil)
		s.Approval.Binding = ""
	})
	stalledWith(t, ns, pr.Name, opApply, resultUnbound, ReasonApprovalUnbound)
	nothingRepaired(t, f, "an approval without a binding")

	// The repair Secret rewritten after the plan was shown.
	sec := &corev1.Secret{}
	if err := k8sClient.Get(bg, client.ObjectKey{Namespace: ns, Name: "repair-db"}, sec); err != nil {
		t.Fatal(err)
	}
	sec.StringData = map[string]string{"dsn": f.reconDSN + "&application_name=elsewhere"}
	if err := k8sClient.Update(bg, sec); err != nil {
		t.Fatal(err)
	}
	o = freshPlan("")
	planned := o.Status.Plan.Binding
	if err := k8sClient.Get(bg, client.ObjectKey{Namespace: ns, Name: "repair-db"}, sec); err != nil {
		t.Fatal(err)
	}
	sec.StringData = map[string]string{"dsn": f.reconDSN}
	if err := k8sClient.Update(bg, sec); err != nil {
		t.Fatal(err)
	}
	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval = approvalOf(o, "alice", nil) })
	got := stalledWith(t, ns, pr.Name, opApply, resultUnbound, ReasonApprovalUnbound)
	if !strings.Contains(got.Status.Outcome.Message, planned) {
		t.Fatalf("outcome message %q does not name the binding approved (%s)", got.Status.Outcome.Message, planned)
	}
	nothingRepaired(t, f, "an approval after the repair Secret changed")

	// The recovery's spec changed after the plan was shown.
	o = freshPlan(planned)
	rec := &recoveryv1.ProjectionRecovery{}
	if err := k8sClient.Get(bg, client.ObjectKey{Namespace: ns, Name: o.Spec.RecoveryRef.Name}, rec); err != nil {
		t.Fatal(err)
	}
	rec.Spec.PageSize++
	if err := k8sClient.Update(bg, rec); err != nil {
		t.Fatal(err)
	}
	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval = approvalOf(o, "alice", nil) })
	stalledWith(t, ns, pr.Name, opApply, resultUnbound, ReasonApprovalUnbound)
	nothingRepaired(t, f, "an approval after the recovery's spec changed")

	// A plan made after both changes: its approval applies.
	o = freshPlan(o.Status.Plan.Binding)
	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval = approvalOf(o, "alice", nil) })
	quarantined(t, f, ns, pr.Name, o.Status.Plan.PlanID, "the apply of the fresh plan")
}

// TestEnvtest_ScheduledReconciliationNeverApplies: an object the scheduler
// manages (managed-by=schedule) reports and plans, and an approver who
// writes an approval into it gets a refusal, nothing written, even with a
// repair DSN in its spec (the scheduler is not running here to revert
// either first).
func TestEnvtest_ScheduledReconciliationNeverApplies(t *testing.T) {
	installApprovalManifests(t)
	ns := newNamespace(t)
	grantApprove(t, ns, "alice")
	f, rec := orphanBlockedScope(t, ns, "recon-sched-apply", "schedapply")
	createSecret(t, ns, "repair-db", map[string]string{"dsn": f.reconDSN})
	name := ScheduledReconciliationName(rec.Name)
	if err := k8sClient.Create(bg, &recoveryv1.ProjectionReconciliation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{LabelManagedBy: ManagedBySchedule}},
		// The repair DSN set by someone who may read it (the scheduler never sets one).
		Spec: recoveryv1.ProjectionReconciliationSpec{RecoveryRef: recoveryv1.RecoveryReference{Name: rec.Name},
			RepairDSNSecretRef: &recoveryv1.SecretKeySelector{Name: "repair-db", Key: "dsn"}},
	}); err != nil {
		t.Fatal(err)
	}
	o := waitRecon(t, ns, name, "a scheduled plan", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.RunState == recoveryv1.RunReported && o.Status.Plan != nil && o.Status.Plan.Actions > 0
	})
	specAs(t, "alice", nil, ns, name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval = approvalOf(o, "alice", nil) })
	got := stalledWith(t, ns, name, opApply, resultRefused, ReasonRefused)
	if !strings.Contains(got.Status.Outcome.Message, "scheduled") {
		t.Fatalf("outcome message %q does not say why", got.Status.Outcome.Message)
	}
	nothingRepaired(t, f, "an approval of a scheduled reconciliation")
}
