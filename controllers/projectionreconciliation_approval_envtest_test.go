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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// The manifests this test installs, exactly as shipped (config/ is what
// kustomize deploys; the chart renders the same files, hack/chart-check.sh
// keeps its copies identical).
var approvalManifests = []string{
	"config/rbac/projection_view_role.yaml",
	"config/rbac/projection_edit_role.yaml",
	"config/rbac/reconciliation_approver_role.yaml",
	"config/admission/approval_policy.yaml",
	"config/admission/approval_policy_binding.yaml",
	"config/admission/secret_reference_policy.yaml",
	"config/admission/secret_reference_policy_binding.yaml",
}

// TestEnvtest_ApprovalOnlyTheAPIServerGrants: an approval (or a rollback
// request) is stored only when the requesting user holds the `approve` verb
// on that very object and names itself as the approver; editors keep editing
// everything else. The refusals come from the real kube-apiserver (RBAC
// authorizer + ValidatingAdmissionPolicy), with users impersonated, so the
// shipped roles and policy are what is tested, not a copy.
func TestEnvtest_ApprovalOnlyTheAPIServerGrants(t *testing.T) {
	ctx := context.Background()
	installApprovalManifests(t)
	ns := newNamespace(t)

	// alice and dave approve; bob edits; carol edits and may approve only the object
	// named "other" (a Role limited by resourceNames).
	approvalBind(t, ns, "alice", "projection-reconciliation-approver")
	approvalBind(t, ns, "dave", "projection-reconciliation-approver")
	approvalBind(t, ns, "bob", "projection-recovery-edit")
	approvalBind(t, ns, "carol", "projection-recovery-edit")
	approveOnly := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "approve-other-only"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{recoveryv1.GroupVersion.Group}, Resources: []string{"projectionreconciliations"},
			ResourceNames: []string{"other"}, Verbs: []string{recoveryv1.ApproveVerb},
		}},
	}
	approvalCreate(t, approveOnly)
	approvalCreate(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "carol-approve-other-only"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: approveOnly.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "carol"}},
	})

	alice, bob, carol, dave := approvalClientAs(t, "alice"), approvalClientAs(t, "bob"), approvalClientAs(t, "carol"), approvalClientAs(t, "dave")
	for _, name := range []string{"recon", "other"} {
		approvalCreate(t, &recoveryv1.ProjectionReconciliation{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       recoveryv1.ProjectionReconciliationSpec{RecoveryRef: recoveryv1.RecoveryReference{Name: "orders"}},
		})
	}
	waitApprovalPolicyInEffect(t, bob, ns)

	editorRefusal := "user bob may not approve repairs: it needs the 'approve' verb on projectionreconciliations.recovery.projection.io in namespace " + ns
	// An impersonated user is authenticated with exactly the group
	// system:authenticated: the groups an approval must record.
	authenticated := []string{"system:authenticated"}
	approval := func(approver string) *recoveryv1.ReconciliationApproval {
		return &recoveryv1.ReconciliationApproval{PlanID: "plan-1", Approver: approver, ApproverGroups: authenticated}
	}
	// The steps run in order on the same objects: each starts from the state
	// the previous accepted steps left.
	steps := []struct {
		name   string
		as     client.Client
		object string
		mutate func(*recoveryv1.ProjectionReconciliation)
		refuse string // "" = accepted; else a substring of the API server's refusal
	}{
		{"an editor cannot approve", bob, "recon",
			func(p *recoveryv1.ProjectionReconciliation) { p.Spec.Approval = approval("bob") }, editorRefusal},
		{"an approver cannot approve in someone else's name", alice, "recon",
			func(p *recoveryv1.ProjectionReconciliation) { p.Spec.Approval = approval("bob") },
			"spec.approval.approver must be the user approving: alice may not approve in the name of bob"},
		{"an editor still edits a spec without an approval", bob, "recon",
			func(p *recoveryv1.ProjectionReconciliation) {
				p.Spec.StaleAfter = &metav1.Duration{Duration: 10 * time.Minute}
			}, ""},
		{"an approver cannot claim a group it is not in", alice, "recon",
			func(p *recoveryv1.ProjectionReconciliation) {
				p.Spec.Approval = approval("alice")
				p.Spec.Approval.ApproverGroups = []string{"sre-approvers", "system:authenticated"}
			}, "spec.approval.approverGroups must be the groups of the user approving, as authenticated: system:authenticated"},
		{"an approver approves as itself", alice, "recon",
			func(p *recoveryv1.ProjectionReconciliation) { p.Spec.Approval = approval("alice") }, ""},
		{"an editor may label an approved object (metadata is not the approval)", bob, "recon",
			func(p *recoveryv1.ProjectionReconciliation) { p.Labels = map[string]string{"team": "ledger"} }, ""},
		{"an editor cannot widen an approval it did not give", bob, "recon",
			func(p *recoveryv1.ProjectionReconciliation) {
				p.Spec.Approval.AllowIrreversible = true
				p.Spec.Approval.MaxActions = 1000
			}, editorRefusal},
		// A field no other policy looks at: aiming the repair DSN at a Secret
		// bob may not read would also be refused by the Secret-reference
		// policy, and which of two denials the API server reports is not
		// fixed.
		{"an editor cannot change the spec an approval vouches for", bob, "recon",
			func(p *recoveryv1.ProjectionReconciliation) {
				p.Spec.StaleAfter = &metav1.Duration{Duration: 7 * time.Minute}
			}, editorRefusal},
		{"another approver changing an approved spec re-approves as itself", dave, "recon",
			func(p *recoveryv1.ProjectionReconciliation) {
				p.Spec.StaleAfter = &metav1.Duration{Duration: 20 * time.Minute}
			}, "spec.approval.approver must be the user approving: dave may not approve in the name of alice"},
		{"an editor may withdraw an approval", bob, "recon",
			func(p *recoveryv1.ProjectionReconciliation) { p.Spec.Approval = nil }, ""},
		{"an editor cannot ask for a rollback", bob, "recon",
			func(p *recoveryv1.ProjectionReconciliation) {
				p.Spec.Rollback = &recoveryv1.ReconciliationRollback{CorrelationID: "corr-1", Approver: "bob", ApproverGroups: authenticated}
			}, "user bob may not approve rollbacks: it needs the 'approve' verb on projectionreconciliations.recovery.projection.io in namespace " + ns},
		{"an approver cannot ask for a rollback in someone else's name", alice, "recon",
			func(p *recoveryv1.ProjectionReconciliation) {
				p.Spec.Rollback = &recoveryv1.ReconciliationRollback{CorrelationID: "corr-1", Approver: "bob", ApproverGroups: authenticated}
			}, "spec.rollback.approver must be the user asking: alice may not ask in the name of bob"},
		{"an approver asks for a rollback as itself", alice, "recon",
			func(p *recoveryv1.ProjectionReconciliation) {
				p.Spec.Rollback = &recoveryv1.ReconciliationRollback{CorrelationID: "corr-1", Approver: "alice", ApproverGroups: authenticated}
			}, ""},
		{"approve granted by resourceNames does not reach other objects", carol, "recon",
			func(p *recoveryv1.ProjectionReconciliation) {
				p.Spec.Rollback = nil
				p.Spec.Approval = approval("carol")
			}, "user carol may not approve repairs"},
		{"approve granted by resourceNames reaches the object it names", carol, "other",
			func(p *recoveryv1.ProjectionReconciliation) { p.Spec.Approval = approval("carol") }, ""},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			// The reconciliation controller writes status meanwhile: an
			// update from a stale read conflicts, which says nothing about
			// admission; read again and retry.
			var p recoveryv1.ProjectionReconciliation
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				p = recoveryv1.ProjectionReconciliation{}
				if err := s.as.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.object}, &p); err != nil {
					t.Fatalf("get %s: %v", s.object, err)
				}
				s.mutate(&p)
				return s.as.Update(ctx, &p)
			})
			assertAdmission(t, err, s.refuse)
			if err != nil {
				return
			}
			// What was accepted is what is stored.
			var stored recoveryv1.ProjectionReconciliation
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.object}, &stored); err != nil {
				t.Fatal(err)
			}
			if (stored.Spec.Approval == nil) != (p.Spec.Approval == nil) || (stored.Spec.Rollback == nil) != (p.Spec.Rollback == nil) {
				t.Fatalf("stored spec %+v differs from the accepted update %+v", stored.Spec, p.Spec)
			}
		})
	}

	t.Run("creating an object that carries an approval is an approval act", func(t *testing.T) {
		p := &recoveryv1.ProjectionReconciliation{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "born-approved"},
			Spec: recoveryv1.ProjectionReconciliationSpec{
				RecoveryRef: recoveryv1.RecoveryReference{Name: "orders"}, Approval: approval("bob"),
			},
		}
		assertAdmission(t, bob.Create(ctx, p), editorRefusal)
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &recoveryv1.ProjectionReconciliation{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the refused object exists (get: %v)", err)
		}
	})
}

// assertAdmission checks an API call against the expected outcome: accepted
// (refuse == "") or refused as Forbidden with a message containing refuse.
func assertAdmission(t *testing.T, err error, refuse string) {
	t.Helper()
	switch {
	case refuse == "" && err != nil:
		t.Fatalf("refused, want accepted: %v", err)
	case refuse != "" && err == nil:
		t.Fatalf("accepted, want refused with %q", refuse)
	case refuse != "" && !apierrors.IsForbidden(err):
		t.Fatalf("refused with %v (reason %s), want Forbidden with %q", err, apierrors.ReasonForError(err), refuse)
	case refuse != "" && !strings.Contains(err.Error(), refuse):
		t.Fatalf("refusal %q does not say %q", err.Error(), refuse)
	}
}

// installApprovalManifests creates (or updates) the shipped roles, policy
// and binding with the admin client. They are cluster-scoped and shared by
// the suite; installing them again is a no-op.
func installApprovalManifests(t *testing.T) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range approvalManifests {
		raw, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(raw, &u.Object); err != nil {
			t.Fatalf("parsing %s: %v", rel, err)
		}
		err = k8sClient.Create(context.Background(), u)
		if apierrors.IsAlreadyExists(err) {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(u.GroupVersionKind())
			if err = k8sClient.Get(context.Background(), client.ObjectKeyFromObject(u), cur); err == nil {
				u.SetResourceVersion(cur.GetResourceVersion())
				err = k8sClient.Update(context.Background(), u)
			}
		}
		if err != nil {
			t.Fatalf("installing %s: %v", rel, err)
		}
	}
}

// waitApprovalPolicyInEffect retries a dry-run create of an approved object
// as the editor until the API server refuses it with the policy's message:
// policies and RBAC bindings take effect asynchronously. A dry run writes
// nothing, so an early acceptance leaves no trace.
func waitApprovalPolicyInEffect(t *testing.T, editor client.Client, ns string) {
	t.Helper()
	probe := func() *recoveryv1.ProjectionReconciliation {
		return &recoveryv1.ProjectionReconciliation{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "policy-probe"},
			Spec: recoveryv1.ProjectionReconciliationSpec{
				RecoveryRef: recoveryv1.RecoveryReference{Name: "orders"},
				Approval:    &recoveryv1.ReconciliationApproval{PlanID: "probe", Approver: "bob"},
			},
		}
	}
	eventually(t, 30*time.Second, "the approval policy to refuse an editor's approval", func() (bool, error) {
		err := editor.Create(context.Background(), probe(), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "may not approve repairs"), err
	})
}

func approvalBind(t *testing.T, ns, user, role string) {
	t.Helper()
	approvalCreate(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})
}

func approvalCreate(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8sClient.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// approvalClientAs returns an uncached client acting as user, in groups
// (the suite's admin is system:masters, which may impersonate).
func approvalClientAs(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(restCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEnvtest_ApprovalByGroup: the approve verb granted to a group works end
// to end: the admission policy accepts an approval that records the
// requester's groups as authenticated, and the controller's own check (a
// SubjectAccessReview with those groups) allows it; without the groups the
// same user is denied, which is why the approval records them.
func TestEnvtest_ApprovalByGroup(t *testing.T) {
	ctx := context.Background()
	installApprovalManifests(t)
	ns := newNamespace(t)
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sre-approvers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "projection-reconciliation-approver"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "sre-approvers"}},
	}
	if err := k8sClient.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
	p := &recoveryv1.ProjectionReconciliation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-group"},
		Spec:       recoveryv1.ProjectionReconciliationSpec{RecoveryRef: recoveryv1.RecoveryReference{Name: "orders"}},
	}
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	erin := approvalClientAs(t, "erin", "sre-approvers")
	groups := []string{"sre-approvers", "system:authenticated"}
	approvalBind(t, ns, "bob", "projection-recovery-edit")
	waitApprovalPolicyInEffect(t, approvalClientAs(t, "bob"), ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur recoveryv1.ProjectionReconciliation
		if err := erin.Get(ctx, client.ObjectKeyFromObject(p), &cur); err != nil {
			return err
		}
		cur.Spec.Approval = &recoveryv1.ReconciliationApproval{PlanID: "plan-1", Approver: "erin", ApproverGroups: groups}
		return erin.Update(ctx, &cur)
	})
	assertAdmission(t, err, "")
	for _, tc := range []struct {
		name   string
		groups []string
		want   bool
	}{
		{"with the recorded groups", groups, true},
		{"without groups", nil, false},
	} {
		t.Run("the controller's check "+tc.name, func(t *testing.T) {
			perm := &sarPermission{c: k8sClient, namespace: ns, name: p.Name, approver: "erin", groups: tc.groups}
			ok, err := perm.Allowed(ctx, "erin")
			if err != nil || ok != tc.want {
				t.Fatalf("Allowed = %v, %v; want %v", ok, err, tc.want)
			}
		})
	}
}
