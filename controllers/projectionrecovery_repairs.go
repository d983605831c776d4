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
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// What the recovery learns from the ProjectionReconciliations of its scope:
// whether an approved repair waits for the scope's lease (the recovery then
// steps aside), and whether a report holds open findings (status.openDrift,
// the DriftDetected condition, the completeness endpoint).

// recoveryRefIndexField indexes ProjectionReconciliations by the recovery
// they reconcile (same namespace).
const recoveryRefIndexField = "spec.recoveryRef.name"

// repairPendingRequeue is how soon a recovery that stepped aside looks again.
const repairPendingRequeue = 2 * time.Second

// repairAwaited: pr's approved apply or rollback found the scope's lease
// held and is retrying (waiting_for_lease, younger than leaseWaitLimit),
// and its spec still asks for it. Only an operation the reconciliation
// controller has already tried counts: an approval it has yet to see, or
// one it refuses, never pauses the recovery. Pure.
func repairAwaited(pr *recoveryv1.ProjectionReconciliation, now time.Time) bool {
	o := pr.Status.Outcome
	if o == nil || o.Result != resultWaiting || o.WaitingSince == nil || !now.Before(o.WaitingSince.Add(leaseWaitLimit)) {
		return false
	}
	switch o.Operation {
	case opApply:
		return pr.Spec.Approval != nil && pr.Spec.Approval.PlanID == o.PlanID
	case opRollback:
		return pr.Spec.Rollback != nil && pr.Spec.Rollback.CorrelationID == o.CorrelationID
	}
	return false
}

// openDrift is what the reconciliations' last reports know: the one with
// the most findings (ties: by name), nil when none holds any. A failed or
// running dry run keeps its previous report, which still counts. Pure.
func openDrift(prs []recoveryv1.ProjectionReconciliation) *recoveryv1.OpenDrift {
	sorted := append([]recoveryv1.ProjectionReconciliation{}, prs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var out *recoveryv1.OpenDrift
	for i := range sorted {
		pr := &sorted[i]
		rep := pr.Status.Report
		if rep == nil || rep.Findings == 0 || (out != nil && rep.Findings <= out.Findings) {
			continue
		}
		out = &recoveryv1.OpenDrift{Reconciliation: pr.Name, Findings: rep.Findings, Clean: rep.Clean, ReportedAt: pr.Status.LastRunAt}
	}
	return out
}

// applyDriftCondition sets DriftDetected from drift; it is removed when no
// reconciliation of the recovery exists (nothing is known either way).
func applyDriftCondition(conds *[]metav1.Condition, drift *recoveryv1.OpenDrift, reconciliations int, generation int64, now metav1.Time) {
	c := metav1.Condition{Type: recoveryv1.ConditionDriftDetected, ObservedGeneration: generation, LastTransitionTime: now}
	switch {
	case reconciliations == 0:
		meta.RemoveStatusCondition(conds, recoveryv1.ConditionDriftDetected)
		return
	case drift != nil:
		c.Status, c.Reason = metav1.ConditionTrue, recoveryv1.ReasonOpenFindings
		c.Message = fmt.Sprintf("ProjectionReconciliation %s reports %d open finding(s): records the recovery does not re-read are known to be wrong ('kubectl projection report %s')",
			drift.Reconciliation, drift.Findings, drift.Reconciliation)
	default:
		c.Status, c.Reason = metav1.ConditionFalse, recoveryv1.ReasonNoOpenFindings
		c.Message = "every ProjectionReconciliation of this recovery reports no finding"
	}
	meta.SetStatusCondition(conds, c)
}

// reconcileRepairs reads the reconciliations of the recovery (from the
// cache): their open drift always, and, when an approved repair waits for
// the lease, it releases this manager's lease on the scope and runs no
// cycle, so the repair takes the lease at its next try instead of waiting
// for it to expire.
func (r *ProjectionRecoveryReconciler) reconcileRepairs(ctx context.Context, s *recoveryScope) error {
	var list recoveryv1.ProjectionReconciliationList
	if err := r.List(ctx, &list, client.InNamespace(s.obj.Namespace), client.MatchingFields{recoveryRefIndexField: s.obj.Name}); err != nil {
		return fmt.Errorf("listing the reconciliations of %s: %w", s.obj.Name, err)
	}
	s.reconsRead, s.reconciliations, s.drift = true, len(list.Items), openDrift(list.Items)
	if !r.AutoRecovery {
		return nil // a read-only manager holds no lease to hand over
	}
	for i := range list.Items {
		pr := &list.Items[i]
		if !repairAwaited(pr, s.now) {
			continue
		}
		r.stepAside(ctx, s)
		s.reason, s.done = recoveryv1.ReasonRepairPending, true
		s.message = fmt.Sprintf("the approved %s of ProjectionReconciliation %s waits for the scope's lease: cycles pause until it has run", pr.Status.Outcome.Operation, pr.Name)
		return nil
	}
	return nil
}

// stepAside releases this manager's lease on the scope, if it holds it.
// Best effort: a lease it cannot release expires on its own.
func (r *ProjectionRecoveryReconciler) stepAside(ctx context.Context, s *recoveryScope) {
	log := logf.FromContext(ctx)
	st, err := r.Connections.Store(ctx, resourceKey(s.obj), s.secrets.dsn)
	if err != nil {
		return
	}
	held, err := st.ReadLease(ctx, s.obj.Spec.Scope)
	if err != nil || held.Owner != r.leaseOwner(s.obj.Namespace) || !held.ExpiresAt.After(s.now) {
		return // not ours, or released already
	}
	if err := st.ReleaseLease(ctx, held); err != nil {
		log.Info("could not release the scope's lease for an approved repair; it expires on its own", "err", redact(err.Error(), s.secrets))
		return
	}
	log.Info("released the scope's lease for an approved repair", "scope", s.obj.Spec.Scope, "fence", held.Fence)
}

// setupRepairWatch indexes ProjectionReconciliations by recovery and wakes
// the recovery when one's report or outcome changes.
func (r *ProjectionRecoveryReconciler) setupRepairWatch(mgr ctrl.Manager, b *builder.TypedBuilder[reconcile.Request]) (*builder.TypedBuilder[reconcile.Request], error) {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &recoveryv1.ProjectionReconciliation{}, recoveryRefIndexField, func(o client.Object) []string {
		pr, ok := o.(*recoveryv1.ProjectionReconciliation)
		if !ok || pr.Spec.RecoveryRef.Name == "" {
			return nil
		}
		return []string{pr.Spec.RecoveryRef.Name}
	}); err != nil {
		return nil, fmt.Errorf("indexing ProjectionReconciliations by %s: %w", recoveryRefIndexField, err)
	}
	changed := predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*recoveryv1.ProjectionReconciliation)
			n, ok2 := e.ObjectNew.(*recoveryv1.ProjectionReconciliation)
			return ok1 && ok2 && (!equality.Semantic.DeepEqual(o.Status.Outcome, n.Status.Outcome) || reportCounts(o) != reportCounts(n))
		},
	}
	toRecovery := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		pr, ok := o.(*recoveryv1.ProjectionReconciliation)
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: pr.Namespace, Name: pr.Spec.RecoveryRef.Name}}}
	})
	return b.Watches(&recoveryv1.ProjectionReconciliation{}, toRecovery, builder.WithPredicates(changed)), nil
}

// reportCounts is what openDrift reads of a report.
func reportCounts(pr *recoveryv1.ProjectionReconciliation) [2]int32 {
	if rep := pr.Status.Report; rep != nil {
		clean := int32(0)
		if rep.Clean {
			clean = 1
		}
		return [2]int32{rep.Findings, clean}
	}
	return [2]int32{-1, -1}
}
