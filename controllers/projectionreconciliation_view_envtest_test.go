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
	"fmt"
	"testing"
	"time"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// TestEnvtest_ApproverSeesEveryActionItApproves: a scope with more orphan
// trades than status can show (51 > 50). Status shows fifty actions whole
// (target, each changed field before → after, risk, rollback) and every
// finding with both sides and its cause; an approval of the whole plan is
// refused plan_not_shown and writes nothing; an approval of the shown page
// applies exactly those; the next dry run shows the last one.
func TestEnvtest_ApproverSeesEveryActionItApproves(t *testing.T) {
	installApprovalManifests(t)
	ns := newNamespace(t)
	grantApprove(t, ns, "alice")
	f := newFixture(t, "viewed", 120, 0.2)
	rec := f.recovery(ns, "viewed", nil, nil)
	waitState(t, ns, rec.Name, 60*time.Second, "CURRENT", isCurrentAt(f.boundary()))
	const orphans = maxShownItems + 1
	if _, err := f.pool.Exec(bg, `INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity,
  buy_order_id, sell_order_id, buy_account, sell_account, ts, booking_status, written_by)
SELECT t.scope, 'orphan-' || lpad(g::text, 3, '0'), 1000000 + g, $2, t.instrument, t.price, t.quantity, t.buy_order_id, t.sell_order_id,
       t.buy_account, t.sell_account, t.ts, 'BOOKED', 'live'
  FROM (SELECT * FROM trades WHERE scope = $1 ORDER BY seq DESC LIMIT 1) t, generate_series(1, $3) g`, f.scope, f.boundary()+1, orphans); err != nil {
		t.Fatal(err)
	}
	f.step(40)
	waitState(t, ns, rec.Name, 60*time.Second, "BLOCKED", func(o *recoveryv1.ProjectionRecovery) bool { return o.Status.State == recoveryv1.StateBlocked })
	pr := createRepairReconciliation(t, f, ns, "fix-viewed", rec.Name)
	o := waitRecon(t, ns, pr.Name, "a plan of every orphan", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.RunState == recoveryv1.RunReported && o.Status.Plan != nil && o.Status.Plan.Actions == orphans
	})
	plan, rep := o.Status.Plan, o.Status.Report
	if len(plan.Items) != maxShownItems || !plan.WouldSucceed {
		t.Fatalf("plan shows %d of %d actions (preflight %q), want %d", len(plan.Items), plan.Actions, plan.Preflight, maxShownItems)
	}
	for i, it := range plan.Items {
		want := fmt.Sprintf("%s:trades/trade_id=orphan-%03d", recon.ActionQuarantineTrade, i+1)
		if it.ID != want || len(it.Changes) == 0 || it.Rollback == "" || it.Risk == "" || len(it.Target) == 0 || len(it.Findings) == 0 {
			t.Fatalf("item %d = %+v, want %s shown whole", i, it, want)
		}
	}
	t.Logf("first item: %+v", plan.Items[0])
	top := rep.Top[0]
	if len(rep.Top) != maxTopFindings || rep.Findings != orphans || top.RootCause == nil || top.RootCause.Code != string(recon.CauseNotInConsensus) ||
		len(top.Actual) == 0 || !top.ExpectedAbsent || top.Statement == "" {
		t.Fatalf("report shows %d findings; first %+v: want the SQL row, the source's absence and the cause", len(rep.Top), top)
	}

	// The whole plan: one action was never shown, so nothing is applied.
	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) {
		s.Approval = approvalOf(o, "alice", nil)
		s.Approval.MaxActions = 100
	})
	o = waitRecon(t, ns, pr.Name, resultNotShown, outcomeIs(opApply, resultNotShown, plan.PlanID))
	if n := orphanCount(t, f); n != orphans {
		t.Fatalf("a refused approval quarantined %d orphans", orphans-n)
	}

	// The page status showed: exactly those.
	var page []string
	for _, it := range plan.Items {
		page = append(page, it.ID)
	}
	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval.Only = page })
	o = waitRecon(t, ns, pr.Name, "the shown page applied", outcomeIs(opApply, resultOK, plan.PlanID))
	if n := orphanCount(t, f); n != 1 || o.Status.Outcome.Applied != maxShownItems {
		t.Fatalf("after the page: %d orphans left, %d applied; want 1 and %d", n, o.Status.Outcome.Applied, maxShownItems)
	}
	o = waitRecon(t, ns, pr.Name, "the rest shown", func(o *recoveryv1.ProjectionReconciliation) bool {
		p := o.Status.Plan
		return p != nil && p.PlanID != plan.PlanID && p.Actions == 1 && len(p.Items) == 1
	})
	if got := o.Status.Plan.Items[0].ID; got != fmt.Sprintf("%s:trades/trade_id=orphan-%03d", recon.ActionQuarantineTrade, orphans) {
		t.Fatalf("the rest: %s", got)
	}
}

func orphanCount(t *testing.T, f *fixture) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(bg, `SELECT count(*) FROM trades WHERE scope = $1 AND trade_id LIKE 'orphan-%'`, f.scope).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
