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

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// computeStatus folds the scope's outcome into obj.Status and returns the
// requeue decision. It only mutates the in-memory object; patchStatus decides
// whether anything needs to reach the API server.
func (r *ProjectionRecoveryReconciler) computeStatus(s *recoveryScope) ctrl.Result {
	st := &s.obj.Status
	st.ObservedGeneration = s.obj.Generation
	if s.state != "" {
		st.State = s.state
	}
	st.Reason, st.Message = s.reason, s.message
	applyConditions(&st.Conditions, conditionsFor(s.state, s.reason, s.message), s.obj.Generation, metav1.NewTime(s.now))
	return ctrl.Result{RequeueAfter: s.obj.Spec.EffectiveInterval()}
}

// patchStatus writes the status subresource once, and only when it changed.
// Skipping identical writes matters: every write bumps resourceVersion, wakes
// every watcher (Argo CD, Flux, kubectl get -w) and costs etcd a revision, for
// every scope at every interval.
func (r *ProjectionRecoveryReconciler) patchStatus(ctx context.Context, before, after *recoveryv1.ProjectionRecovery) error {
	if equality.Semantic.DeepEqual(before.Status, after.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, after, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("patching status: %w", err)
	}
	return nil
}
