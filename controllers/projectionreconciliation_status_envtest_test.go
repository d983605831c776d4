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
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// TestReconcile_OutcomeNeverLandsOnARecreatedObject: an apply's outcome must
// reach status, so a conflicting write is retried on a fresh read; but when
// the object was deleted and recreated under its name meanwhile (the
// scheduler recreates a scheduled reconciliation at once), the fresh read is
// another object that never carried the approval, and the outcome must not
// be written onto it. On the same object, the retry still lands it.
func TestReconcile_OutcomeNeverLandsOnARecreatedObject(t *testing.T) {
	ns := newNamespace(t)
	bg := context.Background()
	create := func() *recoveryv1.ProjectionReconciliation {
		t.Helper()
		o := &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "replaced"},
			Spec: recoveryv1.ProjectionReconciliationSpec{RecoveryRef: recoveryv1.RecoveryReference{Name: "no-such-recovery"}}}
		if err := k8sClient.Create(bg, o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	get := func() *recoveryv1.ProjectionReconciliation {
		t.Helper()
		o := &recoveryv1.ProjectionReconciliation{}
		if err := k8sClient.Get(bg, client.ObjectKey{Namespace: ns, Name: "replaced"}, o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	outcome := func(o *recoveryv1.ProjectionReconciliation) *recoveryv1.ProjectionReconciliation {
		o = o.DeepCopy()
		now := metav1.Now()
		o.Status.Outcome = &recoveryv1.OutcomeSummary{Operation: opApply, Result: "refused", PlanID: "plan-x", Approver: "admin", At: &now}
		return o
	}
	r := &ProjectionReconciliationReconciler{Client: k8sClient, APIReader: k8sClient}

	old := create()
	if err := k8sClient.Delete(bg, old); err != nil {
		t.Fatal(err)
	}
	replacement := create()
	err := r.writeStatus(bg, old, outcome(old), true)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("writeStatus for a deleted object = %v, want NotFound", err)
	}
	if got := get(); got.UID != replacement.UID || got.Status.Outcome != nil {
		t.Fatalf("the replacement (uid %s) carries outcome %+v of the deleted object (uid %s)", got.UID, got.Status.Outcome, old.UID)
	}

	// The same object, changed since it was read: the outcome still lands.
	// The bump reads afresh on a conflict: the test manager reconciles the
	// object too and may write its status between a read and the update.
	stale := get()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		bump := get()
		bump.Annotations = map[string]string{"test/bump": "1"}
		return k8sClient.Update(bg, bump)
	}); err != nil {
		t.Fatal(err)
	}
	if err := r.writeStatus(bg, stale, outcome(stale), true); err != nil {
		t.Fatalf("writeStatus after a conflicting change of the same object: %v", err)
	}
	if got := get(); got.Status.Outcome == nil || got.Status.Outcome.PlanID != "plan-x" {
		t.Fatalf("the outcome did not land on its own object: %+v", got.Status.Outcome)
	}
}

// TestReconcile_ARefusalNeverReplacesAnotherWritersOutcome: two managers
// reconcile one approval from the same read; one applies and records ok
// (with its refreshed report), the other is refused (the lease is held, or
// the plan is no longer pending) and its status write conflicts. Its retry
// must not replace the recorded success by its refusal; the other way
// round, a success still lands over a refusal recorded meanwhile.
func TestReconcile_ARefusalNeverReplacesAnotherWritersOutcome(t *testing.T) {
	ns := newNamespace(t)
	o := &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "two-writers"},
		Spec: recoveryv1.ProjectionReconciliationSpec{RecoveryRef: recoveryv1.RecoveryReference{Name: "no-such-recovery"}}}
	if err := k8sClient.Create(bg, o); err != nil {
		t.Fatal(err)
	}
	r := &ProjectionReconciliationReconciler{Client: k8sClient, APIReader: k8sClient}
	with := func(read *recoveryv1.ProjectionReconciliation, result string) *recoveryv1.ProjectionReconciliation {
		c := read.DeepCopy()
		now := metav1.Now()
		c.Status.Outcome = &recoveryv1.OutcomeSummary{Operation: opApply, Result: result, PlanID: "plan-x", Approver: "alice", At: &now}
		return c
	}
	read := getRecon(t, ns, o.Name)

	// The first manager's success lands; the second's refusal, from the
	// same read, conflicts and is dropped.
	if err := r.writeStatus(bg, read, with(read, resultOK), true); err != nil {
		t.Fatal(err)
	}
	if err := r.writeStatus(bg, read, with(read, "lease_unavailable"), true); err != nil {
		t.Fatalf("the superseded refusal: %v", err)
	}
	if got := getRecon(t, ns, o.Name).Status.Outcome; got == nil || got.Result != resultOK {
		t.Fatalf("outcome %+v: a refusal replaced the recorded success", got)
	}

	// A refusal recorded first, then a success from the same read: it lands.
	read = getRecon(t, ns, o.Name)
	if err := r.writeStatus(bg, read, with(read, "lease_unavailable"), true); err != nil {
		t.Fatal(err)
	}
	if err := r.writeStatus(bg, read, with(read, resultOK), true); err != nil {
		t.Fatal(err)
	}
	if got := getRecon(t, ns, o.Name).Status.Outcome; got == nil || got.Result != resultOK {
		t.Fatalf("outcome %+v: the success did not land over a refusal recorded meanwhile", got)
	}
}
