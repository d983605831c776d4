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

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// TestEnvtest_SecretReferencesNeedTheirReader: with the shipped
// Secret-reference policy, a user who may edit ProjectionRecoveries and
// ProjectionReconciliations but not read Secrets (bob, the projection
// edit role) cannot aim the manager at a Secret: not by naming one in a
// new recovery, not by pointing an existing recovery's source (and so its
// token) at a URL of their choosing, not by swapping the DSN, not by
// naming a repair DSN. Changes that steer no Secret still pass, and a user
// who may read the Secret (alice) may do all of it.
func TestEnvtest_SecretReferencesNeedTheirReader(t *testing.T) {
	installApprovalManifests(t)
	ns := newNamespace(t)
	approvalBind(t, ns, "bob", "projection-recovery-edit")
	approvalBind(t, ns, "alice", "projection-recovery-edit")
	approvalCreate(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}})
	approvalCreate(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-reads-secrets"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "secret-reader"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}}})
	createSecret(t, ns, "member-token", map[string]string{"token": "s3cr3t-member-token"})
	createSecret(t, ns, "venue-db", map[string]string{"dsn": "postgres://projection_recovery@db.invalid/venue"})
	createSecret(t, ns, "other-app-db", map[string]string{"dsn": "postgres://billing@db.invalid/billing"})

	bob, alice := approvalClientAs(t, "bob"), approvalClientAs(t, "alice")
	recovery := func(name string) *recoveryv1.ProjectionRecovery {
		return &recoveryv1.ProjectionRecovery{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: recoveryv1.ProjectionRecoverySpec{
				Scope:    "secret-ref-" + name,
				Source:   recoveryv1.SourceSpec{URL: "https://member.invalid:8443", TokenSecretRef: &recoveryv1.SecretKeySelector{Name: "member-token", Key: "token"}},
				Database: recoveryv1.DatabaseSpec{DSNSecretRef: recoveryv1.SecretKeySelector{Name: "venue-db", Key: "dsn"}},
				Suspend:  true,
			},
		}
	}
	refusedFor := func(err error, secret string) bool {
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) && strings.Contains(err.Error(), "Secret "+secret+": it needs get on that Secret itself")
	}
	// The policy takes effect asynchronously: wait for bob's create to be refused.
	eventually(t, 30*time.Second, "the Secret-reference policy to refuse bob", func() (bool, error) {
		err := bob.Create(bg, recovery("probe"), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "it needs get on that Secret itself"), nil
	})

	if err := bob.Create(bg, recovery("bobs")); !refusedFor(err, "member-token") {
		t.Fatalf("bob created a recovery naming a Secret he may not read: %v", err)
	}
	if err := alice.Create(bg, recovery("venue")); err != nil {
		t.Fatalf("alice, who may read the Secrets, was refused: %v", err)
	}

	update := func(c client.Client, mut func(*recoveryv1.ProjectionRecoverySpec)) error {
		for {
			cur := &recoveryv1.ProjectionRecovery{}
			if err := c.Get(bg, client.ObjectKey{Namespace: ns, Name: "venue"}, cur); err != nil {
				t.Fatal(err)
			}
			mut(&cur.Spec)
			if err := c.Update(bg, cur); !apierrors.IsConflict(err) {
				return err
			}
		}
	}
	steps := []struct {
		name   string
		mut    func(*recoveryv1.ProjectionRecoverySpec)
		secret string // "" passes for bob
	}{
		{"the token's URL moved elsewhere", func(s *recoveryv1.ProjectionRecoverySpec) { s.Source.URL = "https://collector.example.net" }, "member-token"},
		{"TLS verification changed", func(s *recoveryv1.ProjectionRecoverySpec) {
			s.Source.TLS = &recoveryv1.SourceTLS{ServerName: "collector.example.net"}
		}, "member-token"},
		{"the DSN swapped for another application's", func(s *recoveryv1.ProjectionRecoverySpec) { s.Database.DSNSecretRef.Name = "other-app-db" }, "other-app-db"},
		{"a change that steers no Secret", func(s *recoveryv1.ProjectionRecoverySpec) { s.PageSize = 77 }, ""},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			err := update(bob, st.mut)
			if st.secret == "" {
				if err != nil {
					t.Fatalf("bob was refused a change that steers no Secret: %v", err)
				}
				return
			}
			if !refusedFor(err, st.secret) {
				t.Fatalf("bob's change was not refused for Secret %s: %v", st.secret, err)
			}
			if err := update(alice, st.mut); err != nil {
				t.Fatalf("alice was refused the same change: %v", err)
			}
			// Back to what it was, by alice.
			if err := update(alice, func(s *recoveryv1.ProjectionRecoverySpec) {
				s.Source.URL, s.Source.TLS, s.Database.DSNSecretRef.Name = "https://member.invalid:8443", nil, "venue-db"
			}); err != nil {
				t.Fatal(err)
			}
		})
	}

	pr := func(withRepair bool) *recoveryv1.ProjectionReconciliation {
		o := &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "fix-"},
			Spec: recoveryv1.ProjectionReconciliationSpec{RecoveryRef: recoveryv1.RecoveryReference{Name: "venue"}}}
		if withRepair {
			o.Spec.RepairDSNSecretRef = &recoveryv1.SecretKeySelector{Name: "other-app-db", Key: "dsn"}
		}
		return o
	}
	if err := bob.Create(bg, pr(true)); !refusedFor(err, "other-app-db") {
		t.Fatalf("bob created a reconciliation naming a repair DSN he may not read: %v", err)
	}
	if err := bob.Create(bg, pr(false)); err != nil {
		t.Fatalf("bob was refused a reconciliation that names no Secret: %v", err)
	}
}
