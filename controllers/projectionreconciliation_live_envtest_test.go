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
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// reportedOrphanPlan is the orphan-trade scene (orphanBlockedScope) with a
// ProjectionReconciliation "fix-<name>" that may repair (a repair DSN) and
// alice allowed to approve, once its plan for the current generation is in
// status.
func reportedOrphanPlan(t *testing.T, ns, scope, name string) (*fixture, *recoveryv1.ProjectionReconciliation, *recoveryv1.ProjectionReconciliation) {
	t.Helper()
	grantApprove(t, ns, "alice")
	f, rec := orphanBlockedScope(t, ns, scope, name)
	pr := createRepairReconciliation(t, f, ns, "fix-"+name, rec.Name)
	o := waitRecon(t, ns, pr.Name, "a report with a plan", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.RunState == recoveryv1.RunReported && o.Status.Plan != nil && o.Status.Plan.Actions > 0 &&
			o.Status.Report != nil && o.Status.ObservedGeneration == o.Generation
	})
	return f, pr, o
}

// createRepairReconciliation creates a ProjectionReconciliation of the
// recovery with a repair DSN (the fixture's projection_reconciliation role).
func createRepairReconciliation(t *testing.T, f *fixture, ns, name, recovery string) *recoveryv1.ProjectionReconciliation {
	t.Helper()
	createSecret(t, ns, "repair-db", map[string]string{"dsn": f.reconDSN})
	pr := &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: recoveryv1.ProjectionReconciliationSpec{RecoveryRef: recoveryv1.RecoveryReference{Name: recovery},
			RepairDSNSecretRef: &recoveryv1.SecretKeySelector{Name: "repair-db", Key: "dsn"}}}
	if err := k8sClient.Create(bg, pr); err != nil {
		t.Fatal(err)
	}
	return pr
}

// laggingCache is a client whose reads of one ProjectionReconciliation
// answer an older copy, as an informer cache does until the watch event of
// a change arrives; every other call goes to the real API server.
type laggingCache struct {
	client.Client
	held *recoveryv1.ProjectionReconciliation
}

func (c laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if o, ok := obj.(*recoveryv1.ProjectionReconciliation); ok && key == client.ObjectKeyFromObject(c.held) {
		c.held.DeepCopyInto(o)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestReconcile_WithdrawnApprovalIsNeverExecutedFromTheCache, on real parts
// (the orphan-trade scene: apiserver, PostgreSQL with the documented roles,
// a reference member): the cache still holds a valid approval by an
// allowed approver of the current plan, but on the API server it was
// withdrawn (the object changed since), then the object was deleted. A
// reconcile on that cache executes nothing either time: the orphan trade
// stays, the journal is empty, no outcome is written (confirmLive). Without
// the live confirmation both reconciles quarantine the trade.
func TestReconcile_WithdrawnApprovalIsNeverExecutedFromTheCache(t *testing.T) {
	ns := newNamespace(t)
	f, pr, o := reportedOrphanPlan(t, ns, "recon-withdrawn", "withdrawn")

	// What the cache holds: the approval of the plan status shows, a
	// generation the status has not observed yet (decideReconciliation:
	// apply).
	held := o.DeepCopy()
	held.Generation++
	held.Spec.Approval = &recoveryv1.ReconciliationApproval{PlanID: o.Status.Plan.PlanID, Approver: "alice", MaxActions: 10}
	if d := decideReconciliation(&held.Spec, &held.Status, held.Generation, reconClock.Now()); d.action != reconApply {
		t.Fatalf("the held copy decides %q (%s), want an apply", d.action, d.why)
	}
	r := &ProjectionReconciliationReconciler{Client: laggingCache{Client: k8sClient, held: held}, APIReader: k8sClient,
		Clock: reconClock, Connections: &Connections{}, Metrics: NewReconciliationMetrics(prometheus.NewRegistry())}
	t.Cleanup(r.Connections.Close)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pr)}
	unchanged := func(what string) {
		t.Helper()
		if n := tradeCount(t, f, "orphan-1"); n != 1 {
			t.Fatalf("%s: the orphan trade was quarantined from a withdrawn approval (%d left)", what, n)
		}
		var journal int64
		if err := f.pool.QueryRow(bg, `SELECT count(*) FROM projection_reconciliation_journal`).Scan(&journal); err != nil {
			t.Fatal(err)
		}
		if journal != 0 {
			t.Fatalf("%s: the journal holds %d entries", what, journal)
		}
	}

	// The approval was withdrawn on the API server: the object moved on.
	bump := getRecon(t, ns, pr.Name)
	bump.Annotations = map[string]string{"test/withdrawn": "approval removed"}
	if err := k8sClient.Update(bg, bump); err != nil {
		t.Fatal(err)
	}
	res, err := r.Reconcile(bg, req)
	unchanged("the object changed since the cache read it")
	if err != nil || res.RequeueAfter <= 0 {
		t.Fatalf("Reconcile on a cache behind the API server = %+v, %v; want a requeue and no error", res, err)
	}
	if got := getRecon(t, ns, pr.Name); got.Status.Outcome != nil {
		t.Fatalf("an outcome was written: %+v", got.Status.Outcome)
	}

	// The object was deleted.
	if err := k8sClient.Delete(bg, getRecon(t, ns, pr.Name)); err != nil {
		t.Fatal(err)
	}
	res, err = r.Reconcile(bg, req)
	unchanged("the object was deleted")
	if err != nil || res.RequeueAfter != 0 {
		t.Fatalf("Reconcile of a deleted object = %+v, %v; want nothing to do", res, err)
	}
}

// TestReconcile_TwoManagersExecuteOneApprovalOnce, on real parts: the
// reconciliation controller runs in every manager (no leader election is
// needed), so an approval reaches two of them at once. A second reconciler
// (its own pools, reading the API server directly) reconciles the approval
// at the moment the suite manager's does: the orphan trade is quarantined
// once, the journal holds one apply, and status ends with the success and
// its clean report, never the loser's refusal (outcomeSuperseded).
func TestReconcile_TwoManagersExecuteOneApprovalOnce(t *testing.T) {
	installApprovalManifests(t)
	ns := newNamespace(t)
	f, pr, o := reportedOrphanPlan(t, ns, "recon-twice", "twice")
	second := &ProjectionReconciliationReconciler{Client: k8sClient, APIReader: k8sClient,
		Clock: reconClock, Connections: &Connections{}, Metrics: NewReconciliationMetrics(prometheus.NewRegistry())}
	t.Cleanup(second.Connections.Close)

	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval = approvalOf(o, "alice", nil) })
	res, err := second.Reconcile(bg, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pr)})
	if err != nil {
		t.Fatalf("the second manager's reconcile: %v", err)
	}
	t.Logf("the second manager's reconcile: %+v", res)
	got := waitRecon(t, ns, pr.Name, "the apply's success with a fresh report", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.Outcome != nil && o.Status.Outcome.Result == resultOK && o.Status.Report != nil && o.Status.Report.Clean
	})
	// Both managers settle (their retries of a transient refusal included).
	for i := 0; i < 3; i++ {
		if _, err := second.Reconcile(bg, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pr)}); err != nil {
			t.Fatal(err)
		}
	}
	if now := getRecon(t, ns, pr.Name); now.Status.Outcome == nil || now.Status.Outcome.Result != resultOK ||
		now.Status.Outcome.CorrelationID != got.Status.Outcome.CorrelationID {
		t.Fatalf("outcome %+v after both managers settled, want the success %s", now.Status.Outcome, got.Status.Outcome.CorrelationID)
	}
	if n := tradeCount(t, f, "orphan-1"); n != 0 {
		t.Fatalf("the orphan trade is still there (%d)", n)
	}
	var applies int64
	if err := f.pool.QueryRow(bg, `SELECT count(DISTINCT correlation_id) FROM projection_reconciliation_journal`).Scan(&applies); err != nil {
		t.Fatal(err)
	}
	if applies != 1 {
		rows, _ := f.pool.Query(bg, `SELECT correlation_id || ' ' || plan_id || ' ' || state || ' ' || action_id || ' ' || coalesce(error, '') || ' ' || at::text FROM projection_reconciliation_journal ORDER BY at`)
		lines, _ := pgx.CollectRows(rows, pgx.RowTo[string])
		t.Fatalf("the journal holds %d applies, want 1:\n%s", applies, strings.Join(lines, "\n"))
	}
}
