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

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// releaseLease expires this manager's lease on the resource's scope when the
// resource is deleted, so a new resource for the scope (or another manager)
// does not wait a lease duration. A lease held by another manager is left to
// that manager: releasing it here could let a third owner interleave with its
// in-flight page. Best-effort: a missing Secret or database must not block
// the deletion forever; the lease then simply expires.
func (r *ProjectionRecoveryReconciler) releaseLease(ctx context.Context, obj *recoveryv1.ProjectionRecovery) {
	log := logf.FromContext(ctx)
	// The lease identity is the manager's in this namespace, shared by the
	// namespace's resources: one that does not own its scope (a refused
	// duplicate) would release the owner's lease here.
	if owns, err := r.ownsScope(ctx, obj); err != nil || !owns {
		if err != nil {
			log.Info("lease not released on deletion: scope ownership unknown; it expires on its own", "err", err.Error())
		}
		return
	}
	dsn, err := r.secretReader().value(ctx, obj.Namespace, "spec.database.dsnSecretRef", &obj.Spec.Database.DSNSecretRef)
	if err != nil {
		log.Info("lease not released on deletion: database Secret unavailable; it expires on its own", "reason", err.Error())
		return
	}
	st, err := r.Connections.Store(ctx, resourceKey(obj), dsn)
	if err != nil {
		log.Info("lease not released on deletion: database unavailable; it expires on its own")
		return
	}
	held, err := st.ReadLease(ctx, obj.Spec.Scope)
	if err != nil || held.Owner != r.leaseOwner(obj.Namespace) {
		return
	}
	if err := st.ReleaseLease(ctx, held); err != nil {
		log.Info("lease not released on deletion; it expires on its own", "err", redact(err.Error(), resolvedSecrets{dsn: dsn}))
		return
	}
	log.Info("released the scope's lease on deletion", "fence", held.Fence)
}

// leaseOwner is the lease identity of this manager's resources in ns. The
// SQL lease and cursor know the scope only, so the namespace is part of the
// identity: two resources on one scope in different namespaces are two
// owners, and if they reach the same database the fenced lease lets one
// commit while the other only observes (as two managers do). Within a
// namespace the scope claim keeps one resource per scope. Without the
// namespace here, resources of two namespaces on one scope and database
// would share a fence, and the claim would have to be cluster-wide, which
// let a resource in any namespace stall another's.
func (r *ProjectionRecoveryReconciler) leaseOwner(ns string) string { return r.Owner + "/" + ns }
