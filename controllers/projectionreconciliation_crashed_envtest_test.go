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

	"github.com/prometheus/client_golang/prometheus"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/codes"
)

// rollbackWithdrewTheVerification: the rollback put the orphan trade back
// at a seq the recovery had verified since the apply (it caught up to
// CURRENT past it), so it withdrew that verification: its outcome says so,
// the recovery re-verifies from genesis and ends BLOCKED before the orphan's
// seq (the orphan's keys no longer add up, or the orphan's own page), and
// a Warning VerificationWithdrawn names the reconciliation. Without the
// withdrawal the scope stays CURRENT through a window holding a trade the
// source never had, and nothing would ever read that window again.
func rollbackWithdrewTheVerification(t *testing.T, f *fixture, ns, recovery string, oc *recoveryv1.OutcomeSummary) {
	t.Helper()
	if !strings.Contains(oc.Message, "verification is withdrawn") {
		t.Fatalf("rollback outcome message %q does not say the verification was withdrawn", oc.Message)
	}
	var orphanSeq int64
	if err := f.pool.QueryRow(bg, `SELECT seq FROM trades WHERE scope = $1 AND trade_id = 'orphan-1'`, f.scope).Scan(&orphanSeq); err != nil {
		t.Fatal(err)
	}
	rec, _ := waitState(t, ns, recovery, 90*time.Second, "BLOCKED before the orphan's seq", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.State == recoveryv1.StateBlocked && o.Status.VerifiedThroughSeq < orphanSeq
	})
	if r := rec.Status.Reason; r != string(codes.OrphanTrade) && r != string(codes.UnexplainedBalance) {
		t.Fatalf("recovery BLOCKED %s, want ORPHAN_TRADE or UNEXPLAINED_BALANCE", r)
	}
	eventually(t, 20*time.Second, "a Warning VerificationWithdrawn naming the reconciliation", func() (bool, error) {
		var evs eventsv1.EventList
		if err := k8sClient.List(bg, &evs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == recovery && e.Type == "Warning" && e.Reason == recoveryv1.ReasonVerificationWithdrawn &&
				strings.Contains(e.Note, oc.CorrelationID) {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestReconcile_ACrashedApplyIsRolledBackByItsRunID, on real parts (the
// orphan-trade scene: apiserver, PostgreSQL with the documented roles, a
// reference member): an approved apply quarantines the orphan trade, and
// status is then left as a manager killed between its journal and its
// status write leaves it: the run is journaled and audited, status never
// named it, and the approval's next attempt was refused plan_stale naming
// it. spec.rollback naming that run (kubectl projection rollback --run)
// rolls it back: the trade is back, status records the rollback of that
// run, and reconciles by a second manager revert nothing more. Before,
// spec.rollback acted only on the apply status named, so such a run could
// not be rolled back through the resource at all. The rollback withdraws
// the recovery's verification of the orphan's window
// (rollbackWithdrewTheVerification).
func TestReconcile_ACrashedApplyIsRolledBackByItsRunID(t *testing.T) {
	installApprovalManifests(t)
	ns := newNamespace(t)
	f, pr, o := reportedOrphanPlan(t, ns, "recon-crashed", "crashed")
	planID := o.Status.Plan.PlanID
	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval = approvalOf(o, "alice", nil) })
	applied := waitRecon(t, ns, pr.Name, "the apply's success", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.Outcome != nil && o.Status.Outcome.Operation == opApply && o.Status.Outcome.Result == resultOK
	})
	crashed := applied.Status.Outcome.CorrelationID
	if n := tradeCount(t, f, "orphan-1"); n != 0 {
		t.Fatalf("the apply left the orphan trade (%d)", n)
	}

	// Status as the crash leaves it.
	eventually(t, 30*time.Second, "status without the crashed run", func() (bool, error) {
		cur := getRecon(t, ns, pr.Name)
		now := metav1.Now()
		cur.Status.Outcome = &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: planID, Approver: "alice", At: &now,
			CorrelationID: crashed + "-retry", Result: "plan_stale", Message: "plan " + planID + " was applied by run " + crashed + " since this run's fresh read: run a new dry run"}
		err := k8sClient.Status().Update(bg, cur)
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})

	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) {
		s.Approval = nil
		s.Rollback = &recoveryv1.ReconciliationRollback{CorrelationID: crashed, Binding: applied.Status.Plan.Binding, Approver: "alice", ApproverGroups: personGroups}
	})
	// A rollback that meets the recovery worker's lease (it catches up
	// after the apply) waits while the recovery steps aside.
	got := waitRecon(t, ns, pr.Name, "the crashed run's rollback", func(o *recoveryv1.ProjectionReconciliation) bool {
		oc := o.Status.Outcome
		return oc != nil && oc.Operation == opRollback && oc.CorrelationID == crashed && !transientResult(oc.Result) && oc.Result != resultWaiting
	})
	if oc := got.Status.Outcome; oc.Result != resultOK || oc.RolledBack < 1 || oc.PlanID != planID {
		t.Fatalf("rollback outcome %+v, want ok with the run's actions rolled back and its plan %s", oc, planID)
	}
	if n := tradeCount(t, f, "orphan-1"); n != 1 {
		t.Fatalf("after the rollback the orphan trade is there %d times, want 1", n)
	}
	rollbackWithdrewTheVerification(t, f, ns, "crashed", got.Status.Outcome)

	second := &ProjectionReconciliationReconciler{Client: k8sClient, APIReader: k8sClient,
		Clock: reconClock, Connections: &Connections{}, Metrics: NewReconciliationMetrics(prometheus.NewRegistry())}
	t.Cleanup(second.Connections.Close)
	for i := 0; i < 3; i++ {
		if _, err := second.Reconcile(bg, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pr)}); err != nil {
			t.Fatal(err)
		}
	}
	var reverted, appliedN int
	if err := f.pool.QueryRow(bg, `SELECT count(*) FILTER (WHERE state = 'reverted'), count(*) FILTER (WHERE state = 'applied')
  FROM projection_reconciliation_journal WHERE correlation_id = $1`, crashed).Scan(&reverted, &appliedN); err != nil {
		t.Fatal(err)
	}
	if reverted != appliedN || reverted != int(got.Status.Outcome.RolledBack) {
		t.Fatalf("journal of %s: %d applied, %d reverted (status %d): a run is reverted once", crashed, appliedN, reverted, got.Status.Outcome.RolledBack)
	}
	if oc := getRecon(t, ns, pr.Name).Status.Outcome; oc == nil || oc.Operation != opRollback || oc.CorrelationID != crashed || oc.Result != resultOK {
		t.Fatalf("outcome %+v after a second manager's reconciles, want the rollback's success", oc)
	}
}
