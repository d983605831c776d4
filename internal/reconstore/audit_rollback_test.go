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

package reconstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// An audit record round-trips the whole action through PostgreSQL (as the
// runtime role): target, reversibility, risk, lifecycle event, rollback
// text, and an absent record as absent (nil), never as {}; without that a
// drop_position (After absent) rolled back from the audit trail would
// compare the missing row with {} and refuse. A row written before
// migration 00004 reads back as legacy.
func TestPersist_AuditRecordRoundTripsTheAction(t *testing.T) {
	t.Parallel()
	db := recoverydb.New(t)
	a := &Auditor{Pool: pgtest.Pool(t, db.Reconciliation)}
	for _, c := range []struct {
		name   string
		action recon.Action
	}{
		{"after absent", recon.Action{ID: "drop_position:positions/account=A,instrument=BOLT", Kind: recon.ActionDropPosition,
			Target: recon.Fields{"scope": "s", "table": "positions", "account": "A", "instrument": "BOLT"},
			Before: recon.Fields{"quantity": "5.00"}, After: nil, Reversible: true, Risk: recon.RiskHigh, Rollback: "re-insert"}},
		{"before absent", recon.Action{ID: "restore_trade:trades/trade_id=t1", Kind: recon.ActionRestoreTrade,
			Target: recon.Fields{"scope": "s", "table": "trades", "trade_id": "t1"}, Before: nil, After: recon.Fields{"price": "1.50"},
			Reversible: true, Risk: recon.RiskMedium, Rollback: "delete"}},
		{"irreversible", recon.Action{ID: "collapse:x", Kind: recon.ActionCollapse, Target: recon.Fields{"scope": "s"},
			Before: recon.Fields{"id": "2"}, After: recon.Fields{"collapse_into_id": "1"}, LifecycleEvent: "outbox.collapsed",
			Risk: recon.RiskMedium, Rollback: "none: re-insert a copy of Before by hand"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			corr := "corr-" + strings.ReplaceAll(c.name, " ", "-")
			if err := a.Audit(ctxb, recon.AuditRecord{Action: recon.AuditAction, CorrelationID: corr, PlanID: "p", Scope: "s",
				ActionID: c.action.ID, Kind: c.action.Kind, Outcome: recon.AuditApplied, Target: c.action.Target, Before: c.action.Before,
				After: c.action.After, LifecycleEvent: c.action.LifecycleEvent, Reversible: c.action.Reversible, Risk: c.action.Risk,
				Rollback: c.action.Rollback, Principal: "ada", At: time.Now()}); err != nil {
				t.Fatal(err)
			}
			recs, err := a.StoredRecords(ctxb, corr)
			if err != nil || len(recs) != 1 {
				t.Fatalf("records %+v %v", recs, err)
			}
			if got := recs[0].RepairAction(); recs[0].Legacy || !recon.SameRepair(got, c.action) {
				t.Fatalf("read back %+v (legacy %v)\nwant %+v", got, recs[0].Legacy, c.action)
			}
		})
	}
	admin := pgtest.Pool(t, db.Admin)
	if _, err := admin.Exec(ctxb, `INSERT INTO projection_reconciliation_audit
    (action, correlation_id, plan_id, scope, action_id, kind, outcome, before, after, principal, at)
VALUES ('reconciliation.repaired', 'old', 'p', 's', 'x', 'drop_position', 'applied', '{}', '{}', 'ada', now())`); err != nil {
		t.Fatal(err)
	}
	if recs, err := a.StoredRecords(ctxb, "old"); err != nil || len(recs) != 1 || !recs[0].Legacy {
		t.Fatalf("a record from before 00004: %+v %v", recs, err)
	}
}

// freshRunner is a second workflow on the scene's database and member,
// sharing nothing with s.wf but its telemetry (so the scene's counts hold):
// what an operator has after a restart, with no Outcome object.
func (s *scene) freshRunner() *Runner {
	s.t.Helper()
	w, err := NewRunner(RunnerConfig{
		Store:      store.New(pgtest.Pool(s.t, s.db.Reconciliation)),
		ReadPool:   pgtest.Pool(s.t, s.db.ReadOnly),
		Source:     s.client,
		Permission: recon.PermissionFunc(func(_ context.Context, p string) (bool, error) { return p == approver, nil }),
		Telemetry:  s.wf.tel,
		StaleAfter: 5 * time.Minute,
		Log:        s.wf.log,
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return w
}

// TestAuditRollback_IrreversibleComesBackManual: an apply of a reversible
// rederive_position and an irreversible collapse (opted in), rolled back
// from the audit trail alone by a fresh workflow: the position is restored
// exactly as before the apply, the collapse comes back in Manual with its
// strategy's rollback text (the deleted outbox copy stays deleted). Before
// that, an unknown correlation id is nothing_selected and an audit trail
// that disagrees with the journal refuses; neither writes anything.
func TestAuditRollback_IrreversibleComesBackManual(t *testing.T) {
	t.Parallel()
	s := newScene(t, "venue-audit", sceneOpts{})
	record, _ := breakages[1].corrupt(s) // UNEXPLAINED_BALANCE: rederive_position
	s.exec(`INSERT INTO projection_catchup_outbox (msg_id, scope, account, instrument, quantity, avg_cost, cursor_seq, created_at)
SELECT msg_id || '-copy', scope, account, instrument, quantity, avg_cost, cursor_seq, created_at
  FROM projection_catchup_outbox WHERE scope = $1 AND sent_at IS NULL ORDER BY id LIMIT 1`, s.scope)
	d := s.dryRun()
	var kinds []string
	for _, a := range d.Plan.Actions {
		kinds = append(kinds, string(a.Kind))
	}
	if strings.Join(kinds, ",") != "rederive_position,collapse" || d.Plan.Actions[0].ID != "rederive_position:"+record {
		t.Fatalf("plan:\n%s", recon.FormatPlan(d.Plan))
	}
	pre := s.dump(false)
	o, err := s.wf.Apply(ctxb, d.Plan, recon.ApplyOptions{Principal: approver, Confirm: d.Plan.PlanID, AllowIrreversible: true})
	if err != nil || len(o.Applied) != 2 {
		t.Fatalf("apply: %v %+v", err, o)
	}
	applied := s.dump(false)

	w := s.freshRunner()
	if ro, err := w.RollbackRun(ctxb, s.scope, "no-such-run", approver, 0); recon.CodeOf(err) != recon.ResultNothingSelected || ro.Code != recon.ResultNothingSelected {
		t.Fatalf("rollback of an unknown correlation id: %v %+v", err, ro)
	}
	// A run of another scope, named through this scope (a resource's
	// spec.rollback copied from elsewhere): nothing_selected, nothing
	// reverted.
	if ro, err := w.RollbackRun(ctxb, "another-venue", o.CorrelationID, approver, 0); recon.CodeOf(err) != recon.ResultNothingSelected ||
		ro.Code != recon.ResultNothingSelected || len(ro.RolledBack) != 0 || !strings.Contains(ro.Detail, s.scope) {
		t.Fatalf("rollback of this scope's run through another scope: %v %+v", err, ro)
	}
	if diff := sameDump(s.dump(false), applied); len(diff) != 0 {
		t.Fatalf("a rollback refused for its scope wrote: %v", diff)
	}
	// The audit trail alone rebuilds what was applied, action for action.
	fromAudit, err := w.OutcomeFromAudit(ctxb, o.CorrelationID)
	if err != nil || len(fromAudit.Applied) != 2 || fromAudit.Scope != s.scope || fromAudit.PlanID != d.Plan.PlanID {
		t.Fatalf("outcome from the audit trail: %v %+v", err, fromAudit)
	}
	for i, a := range o.Applied {
		if !recon.SameRepair(fromAudit.Applied[i], a) {
			t.Fatalf("audit trail action #%d %+v, applied %+v", i, fromAudit.Applied[i], a)
		}
	}
	// A journal that says the rederive was reverted while the audit trail
	// does not (an audit write lost by the repair role itself, which wrote
	// both): refused, nothing reverted.
	if _, err := pgtest.Pool(t, s.db.Reconciliation).Exec(ctxb, `INSERT INTO projection_reconciliation_journal (correlation_id, position, plan_id, scope, state, action_id, action, at)
SELECT correlation_id, 99, plan_id, scope, 'reverted', action_id, action, now() FROM projection_reconciliation_journal
 WHERE correlation_id = $1 AND position = 1`, o.CorrelationID); err != nil {
		t.Fatal(err)
	}
	if ro, err := w.RollbackRun(ctxb, s.scope, o.CorrelationID, approver, 0); !errors.Is(err, ErrRecordsDisagree) || recon.CodeOf(err) != recon.ResultInternal ||
		len(ro.RolledBack) != 0 {
		t.Fatalf("rollback while audit and journal disagree: %v %+v", err, ro)
	}
	if diff := sameDump(s.dump(false), applied); len(diff) != 0 {
		t.Fatalf("a refused rollback wrote: %v", diff)
	}
	s.exec(`DELETE FROM projection_reconciliation_journal WHERE correlation_id = $1 AND position = 99`, o.CorrelationID)

	verified := s.cursor().VerifiedThroughSeq
	// The collapse stays in place: partial, never ok.
	ro, err := w.RollbackRun(ctxb, s.scope, o.CorrelationID, approver, 0)
	if recon.CodeOf(err) != recon.ResultPartial || ro.Code != recon.ResultPartial || len(ro.RolledBack) != 1 ||
		ro.RolledBack[0].Kind != recon.ActionRederivePosition || len(ro.RollbackFailed) != 0 {
		t.Fatalf("rollback from the audit trail: %v %+v", err, ro)
	}
	spec, _ := recon.SpecOf(recon.ActionCollapse)
	if len(ro.Manual) != 1 || ro.Manual[0].Action.Kind != recon.ActionCollapse || ro.Manual[0].Rollback != spec.Rollback || spec.Rollback == "" {
		t.Fatalf("the irreversible collapse: %+v, want it manual with %q", ro.Manual, spec.Rollback)
	}
	if left := ro.Left(); len(left) != 1 || left[0].Kind != recon.ActionCollapse || left[0].Rollback != spec.Rollback {
		t.Fatalf("left in place: %+v, want the collapse with its rollback text", left)
	}
	// The position is back as the hand edit left it, inside the window the
	// cursor verified: that verification is withdrawn (store.WithdrawTx),
	// with the bases that were its folds.
	got := s.dump(false)
	diff := sameDump(withoutCursor(got), withoutCursor(pre))
	if len(diff) != 2 || !strings.HasPrefix(diff[0], "projection_catchup_basis:") || !strings.HasPrefix(diff[1], "projection_catchup_outbox:") {
		t.Fatalf("after the rollback, want only the collapsed outbox copy gone and the bases dropped: %v", diff)
	}
	if got["positions"] != pre["positions"] || !strings.HasPrefix(got["projection_catchup_basis"], "0 rows") {
		t.Fatal("the position was not restored, or the withdrawn cursor's bases stayed")
	}
	if c := s.cursor(); verified == 0 || ro.WithdrawnThrough != verified || c.VerifiedThroughSeq != 0 || c.State != store.StateCatchingUp {
		t.Fatalf("rollback withdrew %d, cursor %+v; want the verification through %d withdrawn", ro.WithdrawnThrough, c, verified)
	}
	// Rolled back once: the audit trail now says so, and a second rollback
	// has nothing reversible left (the collapse stays manual).
	again, err := w.OutcomeFromAudit(ctxb, o.CorrelationID)
	if err != nil || len(again.Applied) != 1 || again.Applied[0].Kind != recon.ActionCollapse {
		t.Fatalf("audit trail after the rollback: %v %+v", err, again)
	}
}
