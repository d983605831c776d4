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
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// One scope, one resource per namespace. The SQL cursor and the fenced
// lease are keyed by scope alone (FR-APR05/08) and the lease owner is the
// manager in the resource's namespace (leaseOwner), shared by the
// namespace's resources. Two resources of one namespace on one scope would
// therefore share one fence: both would run cycles as the same owner, flap
// each other's status, and deleting either would release the lease the
// other is working under. So exactly one resource of a namespace owns a
// scope, decided the same way by every manager from what it can see: the
// oldest by creationTimestamp, ties broken by name. The others are refused
// (DuplicateScope, Stalled) and never reach a lease, a SQL statement or a
// source request. Across namespaces the database decides: only resources
// that reach the same database meet at its lease, so one in another
// namespace (bogus Secrets, another database) can never stall yours.

// scopeIndexField indexes ProjectionRecoveries by spec.scope in the
// manager's cache, so the claim is one indexed lookup, not a list of all.
const scopeIndexField = "spec.scope"

// claimant is what the scope decision needs of one resource.
type claimant struct {
	namespace, name string
	created         time.Time
}

func (c claimant) String() string { return c.namespace + "/" + c.name }

// is compares identities (never times with ==: two decodings of one
// timestamp may differ in location and monotonic reading).
func (c claimant) is(o claimant) bool { return c.namespace == o.namespace && c.name == o.name }

// outranks is the total order of the claim: older first, then namespace,
// then name. creationTimestamp has second precision, so ties are common; the
// tie-break must not depend on anything a manager could see differently
// (arrival order, cache state), or two managers could pick two owners.
func (c claimant) outranks(o claimant) bool {
	if !c.created.Equal(o.created) {
		return c.created.Before(o.created)
	}
	if c.namespace != o.namespace {
		return c.namespace < o.namespace
	}
	return c.name < o.name
}

// scopeOwner decides which resource owns a scope among self and the others
// found on it (self may be among them). Pure; table-tested.
func scopeOwner(self claimant, others []claimant) claimant {
	owner := self
	for _, o := range others {
		if o.outranks(owner) {
			owner = o
		}
	}
	return owner
}

func claimantOf(obj *recoveryv1.ProjectionRecovery) claimant {
	return claimant{namespace: obj.Namespace, name: obj.Name, created: obj.CreationTimestamp.Time}
}

// scopeOwnerOf reads the resources on obj's scope in obj's namespace from
// the cache and decides the owner.
func (r *ProjectionRecoveryReconciler) scopeOwnerOf(ctx context.Context, obj *recoveryv1.ProjectionRecovery) (claimant, error) {
	var list recoveryv1.ProjectionRecoveryList
	// Read-only: the items share the cache's maps and slices (no deep copy
	// of every resource on the scope at every cycle); only their names and
	// creation times are read, nothing here may write to them.
	if err := r.List(ctx, &list, client.InNamespace(obj.Namespace), client.MatchingFields{scopeIndexField: obj.Spec.Scope}, client.UnsafeDisableDeepCopy); err != nil {
		return claimant{}, fmt.Errorf("listing the resources on scope %q: %w", obj.Spec.Scope, err)
	}
	others := make([]claimant, 0, len(list.Items))
	for i := range list.Items {
		others = append(others, claimantOf(&list.Items[i]))
	}
	return scopeOwner(claimantOf(obj), others), nil
}

// ownsScope reports whether obj owns its scope.
func (r *ProjectionRecoveryReconciler) ownsScope(ctx context.Context, obj *recoveryv1.ProjectionRecovery) (bool, error) {
	owner, err := r.scopeOwnerOf(ctx, obj)
	if err != nil {
		return false, err
	}
	return owner.is(claimantOf(obj)), nil
}

// reconcileScopeClaim is the first phase: a resource that does not own its
// scope stops here, before its Secrets are read or anything is connected.
// Its status keeps no state (no cursor mirror, no lease): what it showed
// before belongs to the owner's work. A resource being deleted still owns
// its scope until it is gone, so its successor cannot start while its
// finalizer is releasing the lease.
func (r *ProjectionRecoveryReconciler) reconcileScopeClaim(ctx context.Context, s *recoveryScope) error {
	owner, err := r.scopeOwnerOf(ctx, s.obj)
	if err != nil {
		return err
	}
	if owner.is(claimantOf(s.obj)) {
		return nil
	}
	s.reason, s.done = recoveryv1.ReasonDuplicateScope, true
	s.message = fmt.Sprintf("spec.scope %q is owned by ProjectionRecovery %s (the oldest resource on the scope in this namespace); this one runs no cycle while that one exists: delete one of them", s.obj.Spec.Scope, owner)
	s.obj.Status = recoveryv1.ProjectionRecoveryStatus{Conditions: s.obj.Status.Conditions}
	// A resource that lost its claim (an older one appeared in the cache
	// after it started) lets go of its connections and series.
	r.Connections.Forget(resourceKey(s.obj))
	r.Metrics.forget(s.obj)
	return nil
}

// setupScopeClaim registers the spec.scope index and a watch that wakes the
// other resources on a scope when one appears or goes: when the owner is
// deleted its successor takes over at once, not at its next interval.
func (r *ProjectionRecoveryReconciler) setupScopeClaim(mgr ctrl.Manager, b *builder.TypedBuilder[reconcile.Request]) (*builder.TypedBuilder[reconcile.Request], error) {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &recoveryv1.ProjectionRecovery{}, scopeIndexField, func(o client.Object) []string {
		pr, ok := o.(*recoveryv1.ProjectionRecovery)
		if !ok || pr.Spec.Scope == "" {
			return nil
		}
		return []string{pr.Spec.Scope}
	}); err != nil {
		return nil, fmt.Errorf("indexing ProjectionRecoveries by %s: %w", scopeIndexField, err)
	}
	// Only arrivals and departures change a claim: the scope is immutable
	// and creationTimestamp never changes.
	arrivals := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return true },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return b.Watches(&recoveryv1.ProjectionRecovery{}, handler.EnqueueRequestsFromMapFunc(r.othersOnScope), builder.WithPredicates(arrivals)), nil
}

// othersOnScope maps a resource to the other resources on its scope in its namespace.
func (r *ProjectionRecoveryReconciler) othersOnScope(ctx context.Context, o client.Object) []reconcile.Request {
	pr, ok := o.(*recoveryv1.ProjectionRecovery)
	if !ok {
		return nil
	}
	var list recoveryv1.ProjectionRecoveryList
	if err := r.List(ctx, &list, client.InNamespace(pr.Namespace), client.MatchingFields{scopeIndexField: pr.Spec.Scope}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the resources on a scope", "scope", pr.Spec.Scope)
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		it := &list.Items[i]
		if it.Namespace == pr.Namespace && it.Name == pr.Name {
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(it)})
	}
	return reqs
}
