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
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// Outcome results of the guards the controller runs before the workflow's
// own (an apply or rollback refused here wrote nothing, and is tried again
// only when a person edits the spec).
const (
	// resultPolicyMissing: the cluster does not run the shipped approval
	// admission policy with a Deny binding, so the approver fields may have
	// been written by anyone who can edit the object.
	resultPolicyMissing = "approval_policy_missing"
	// resultUnbound: the approval (or rollback) does not echo the binding
	// of what the plan was made under, or that has changed since.
	resultUnbound = "approval_unbound"
)

// serviceAccountPrefix starts every service account's user name.
const serviceAccountPrefix = "system:serviceaccount:"

// guardApproval returns the refusal (result, message) of an apply or
// rollback, or "" to go on: not scheduled, the approval policy installed as
// shipped, no unlisted service account, the plan's binding unchanged
// (docs/security.md, "Guards", says what each stops). An error reading what
// a check needs is returned and retried: a guard never passes on an unknown.
func (r *ProjectionReconciliationReconciler) guardApproval(ctx context.Context, s *reconScope, approver, binding string) (result, message string, err error) {
	if isScheduled(s.obj) {
		return resultRefused, "a scheduled reconciliation only reports and plans; create a ProjectionReconciliation of your own to apply or roll back", nil
	}
	problem, err := checkApprovalPolicy(ctx, r.APIReader)
	if err != nil {
		return "", "", err
	}
	if problem != "" {
		return resultPolicyMissing, problem + "; nothing is applied or rolled back until it is installed as shipped (charts: approvalPolicy.create), then approved again", nil
	}
	if !serviceAccountMayApprove(r.ApproverServiceAccounts, approver) {
		return string(recon.ResultRepairDenied), fmt.Sprintf("%s is a service account: approvals and rollbacks come from people unless the operator lists the account (--approver-service-accounts)", approver), nil
	}
	now, err := approvalBinding(ctx, r.APIReader, s.obj, s.recovery)
	if err != nil {
		return "", "", err
	}
	switch {
	case binding == "":
		return resultUnbound, "spec binding is empty: echo status.plan.binding (kubectl projection approve does) so the approval covers what the plan was made under", nil
	case now != s.binding:
		return resultUnbound, "a referenced Secret or the ProjectionRecovery changed while this reconcile read them; run a dry run and approve again", nil
	case binding != now:
		return resultUnbound, fmt.Sprintf("the approval was given for binding %s, the referenced ProjectionRecovery or a Secret it or this object names has changed since (now %s): run a dry run and approve again", binding, now), nil
	}
	return "", "", nil
}

// isScheduled: the scheduler's object (labelled, or controlled by the
// ProjectionRecovery it watches), which must never apply even if an
// approver wrote an approval into it before the scheduler reverted it.
func isScheduled(o *recoveryv1.ProjectionReconciliation) bool {
	if o.Labels[LabelManagedBy] == ManagedBySchedule {
		return true
	}
	c := metav1.GetControllerOf(o)
	return c != nil && c.Kind == recoveryKind
}

// serviceAccountMayApprove: people always pass this check (their verb is
// the SubjectAccessReview's to judge); a service account only when listed
// as namespace:name.
func serviceAccountMayApprove(listed []string, user string) bool {
	sa, ok := strings.CutPrefix(user, serviceAccountPrefix)
	if !ok {
		return true
	}
	return slices.Contains(listed, sa)
}

// approvalBinding hashes what an approval vouches for besides the plan:
// the ProjectionRecovery's identity and spec generation, and the identity
// and resourceVersion of every Secret the reconciliation reads (the
// recovery's DSN, token and CA, this object's repair DSN). It reads
// metadata only and holds no secret material. A Secret that is missing
// binds as missing: the dry run that needs it fails anyway.
func approvalBinding(ctx context.Context, rd client.Reader, o *recoveryv1.ProjectionReconciliation, rec *recoveryv1.ProjectionRecovery) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "recovery %s %s %d\n", rec.Name, rec.UID, rec.Generation)
	type secretRef struct {
		field string
		ref   *recoveryv1.SecretKeySelector
	}
	refs := []secretRef{
		{"database.dsnSecretRef", &rec.Spec.Database.DSNSecretRef},
		{"source.tokenSecretRef", rec.Spec.Source.TokenSecretRef},
		{"repairDsnSecretRef", o.Spec.RepairDSNSecretRef},
	}
	if t := rec.Spec.Source.TLS; t != nil {
		refs = append(refs, secretRef{"source.tls.caSecretRef", t.CASecretRef})
	}
	for _, f := range refs {
		if f.ref == nil {
			continue
		}
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		err := rd.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: f.ref.Name}, m)
		switch {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(h, "%s %s/%s missing\n", f.field, f.ref.Name, f.ref.Key)
		case err != nil:
			return "", fmt.Errorf("reading %s %q for the approval binding: %w", f.field, f.ref.Name, err)
		default:
			fmt.Fprintf(h, "%s %s/%s %s %s\n", f.field, f.ref.Name, f.ref.Key, m.UID, m.ResourceVersion)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
