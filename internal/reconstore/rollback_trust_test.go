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
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// forgedRestore is a restore_trade action "applied" to the trades row id as
// it is now (its After), the way a forger would write it: its revert
// (unrestoreTrade) DELETEs that row, a right projection_recovery never has.
func (s *scene) forgedRestore(id string) recon.Action {
	s.t.Helper()
	tx, err := s.admin.Begin(ctxb)
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctxb) }()
	after, err := tradeFields(ctxb, tx, "trades", s.scope, id)
	if err != nil || after == nil {
		s.t.Fatalf("trade %s: %v %v", id, after, err)
	}
	spec, _ := recon.SpecOf(recon.ActionRestoreTrade)
	return recon.Action{ID: string(recon.ActionRestoreTrade) + ":trades/trade_id=" + id, Kind: recon.ActionRestoreTrade,
		Target: recon.Fields{"scope": s.scope, "table": "trades", "trade_id": id}, After: after,
		Reversible: spec.Reversible, Risk: spec.Risk, Rollback: spec.Rollback}
}

// forge writes a matching audit record and journal entry of action a,
// applied, under corr through the package's own Auditor and Journal on pool: what
// a process connected as pool's role, running this code, would write.
func forge(pool *pgxpool.Pool, corr, planID, scope string, seq int, a recon.Action) error {
	at := time.Now()
	if err := (&Auditor{Pool: pool}).Audit(ctxb, recon.AuditRecord{Action: recon.AuditAction, CorrelationID: corr, PlanID: planID,
		Scope: scope, ActionID: a.ID, Kind: a.Kind, Outcome: recon.AuditApplied, Target: a.Target, Before: a.Before, After: a.After,
		LifecycleEvent: a.LifecycleEvent, Reversible: a.Reversible, Risk: a.Risk, Rollback: a.Rollback, Principal: approver, At: at}); err != nil {
		return err
	}
	return (&Journal{Pool: pool}).Append(ctxb, recon.JournalEntry{CorrelationID: corr, PlanID: planID, Scope: scope, Seq: seq,
		Event: recon.JournalApplied, Action: a, At: at})
}

// recordState is the journal, the audit trail and the scope's lease row as
// the admin reads them: a refused rollback changes none of them.
func (s *scene) recordState() string {
	s.t.Helper()
	var v string
	s.one(`SELECT (SELECT count(*) FROM projection_reconciliation_journal)::text || ' journal, ' ||
       (SELECT count(*) FROM projection_reconciliation_audit)::text || ' audit, lease ' ||
       coalesce((SELECT owner || '/' || fence::text || '/' || expires_at::text FROM projection_catchup_lease WHERE scope = $1), '-')`,
		[]any{s.scope}, &v)
	return v
}

// TestAuditRollback_RefusesRecordsTheRepairRoleDidNotWrite: a rollback
// turns audit and journal rows into reverts that run as
// projection_reconciliation, which may DELETE; projection_recovery, the
// unattended worker's role, must not choose them. Under the documented
// grants it cannot write either table at all. On a database that still
// holds its grant from before migration 00006, a matching audit+journal
// pair it writes (a restore_trade whose revert deletes a real trade),
// as a run of its own or appended to a real repair's run, is refused
// records_untrusted: nothing reverted, journaled, audited or leased.
func TestAuditRollback_RefusesRecordsTheRepairRoleDidNotWrite(t *testing.T) {
	t.Parallel()
	s := newScene(t, "venue-forged", sceneOpts{})
	recovery := pgtest.Pool(t, s.db.Recovery)
	id, _, _, _ := s.windowTrade()
	victim := s.forgedRestore(id)

	if err := forge(recovery, "forged-0", "p-forged", s.scope, 1, victim); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("projection_recovery wrote the audit trail under the documented grants: %v", err)
	}
	// The grant of before 00006, as the tables' owner gave it.
	if _, err := pgtest.Pool(t, s.db.Migrator).Exec(ctxb,
		`GRANT SELECT, INSERT ON projection_reconciliation_journal, projection_reconciliation_audit TO projection_recovery`); err != nil {
		t.Fatal(err)
	}
	// A real repair (written by projection_reconciliation) to ride on.
	breakages[1].corrupt(s)
	d := s.dryRun()
	o, err := s.wf.Apply(ctxb, d.Plan, recon.ApplyOptions{Principal: approver, Confirm: d.Plan.PlanID})
	if err != nil || len(o.Applied) != 1 {
		t.Fatalf("apply: %v %+v", err, o)
	}
	w := s.freshRunner()
	parent := s.t
	for _, c := range []struct {
		name, corr, plan string
		seq              int
	}{
		{"a forged run", "forged-1", "p-forged", 1},
		{"a forged action appended to a real run", o.CorrelationID, o.PlanID, o.Journaled + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.t = t
			defer func() { s.t = parent }()
			if err := forge(recovery, c.corr, c.plan, s.scope, c.seq, victim); err != nil {
				t.Fatalf("forge as projection_recovery with the old grant: %v", err)
			}
			pre, records := s.dump(true), s.recordState()
			ro, err := w.RollbackRun(ctxb, s.scope, c.corr, approver, 0)
			if recon.CodeOf(err) != ResultRecordsUntrusted || ro == nil || ro.Code != ResultRecordsUntrusted || len(ro.RolledBack) != 0 ||
				!strings.Contains(ro.Detail, "projection_recovery") {
				t.Fatalf("rollback of rows projection_recovery wrote: %v %+v; want %s naming the writer", err, ro, ResultRecordsUntrusted)
			}
			if diff := sameDump(s.dump(true), pre); len(diff) != 0 {
				t.Fatalf("a refused rollback wrote: %v", diff)
			}
			if got := s.recordState(); got != records {
				t.Fatalf("a refused rollback changed the records: %s, before %s", got, records)
			}
		})
	}
}

// TestAuditRollback_RespectsTheBlastRadius: a rollback reverts no more
// actions than maxActions (0: recon.DefaultMaxActions), like an apply.
// Over it the rollback is refused blast_radius_exceeded and audited as
// such, action by action, with nothing reverted or journaled; a principal
// who may not roll back is refused repair_denied first (the guards'
// order). Within the radius the same run rolls back.
func TestAuditRollback_RespectsTheBlastRadius(t *testing.T) {
	t.Parallel()
	s := newScene(t, "venue-blast", sceneOpts{})
	s.exec(`UPDATE positions SET quantity = quantity + 7 WHERE scope = $1 AND (account, instrument) IN (
  SELECT DISTINCT p.account, p.instrument FROM positions p JOIN trades t
      ON t.scope = p.scope AND t.instrument = p.instrument AND p.account IN (t.buy_account, t.sell_account)
   WHERE p.scope = $1 AND t.seq > $2 ORDER BY 1, 2 LIMIT 2)`, s.scope, s.v)
	d := s.dryRun()
	o, err := s.wf.Apply(ctxb, d.Plan, recon.ApplyOptions{Principal: approver, Confirm: d.Plan.PlanID})
	n := len(o.Applied)
	if err != nil || n < 2 {
		t.Fatalf("apply: %v %+v; want two reversible actions of:\n%s", err, o, recon.FormatPlan(d.Plan))
	}
	w := s.freshRunner()
	parent := s.t
	for _, c := range []struct {
		name, principal string
		want            recon.ResultCode
	}{
		{"more actions than maxActions", approver, recon.ResultBlastRadius},
		{"a principal who may not roll back is denied first", "mallory", recon.ResultRepairDenied},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.t = t
			defer func() { s.t = parent }()
			pre := s.dump(true)
			var journal, refused int
			count := func() {
				s.one(`SELECT (SELECT count(*) FROM projection_reconciliation_journal WHERE correlation_id = $1),
       (SELECT count(*) FROM projection_reconciliation_audit WHERE correlation_id = $1 AND outcome = 'refused' AND code = $2 AND principal = $3)`,
					[]any{o.CorrelationID, string(c.want), c.principal}, &journal, &refused)
			}
			count()
			journalBefore := journal
			ro, err := w.RollbackRun(ctxb, s.scope, o.CorrelationID, c.principal, n-1)
			if recon.CodeOf(err) != c.want || ro == nil || ro.Code != c.want || len(ro.RolledBack) != 0 {
				t.Fatalf("rollback of %d actions with maxActions %d by %s: %v %+v; want %s", n, n-1, c.principal, err, ro, c.want)
			}
			if diff := sameDump(s.dump(true), pre); len(diff) != 0 {
				t.Fatalf("a refused rollback wrote: %v", diff)
			}
			count()
			if journal != journalBefore || refused != n {
				t.Fatalf("journal %d entries (before %d), %d refused audit records with %s; want the journal unchanged and %d", journal, journalBefore, refused, c.want, n)
			}
		})
	}
	ro, err := w.RollbackRun(ctxb, s.scope, o.CorrelationID, approver, 0)
	if err != nil || len(ro.RolledBack) != n {
		t.Fatalf("rollback within the default blast radius: %v %+v", err, ro)
	}
}

// TestPersist_Migration6OnAnUpgradedDatabase: `manager migrate` on a
// database of the release before migration 6 (no written_as; the recovery
// worker's role holding the INSERT that release granted) takes that INSERT
// away and leaves its SELECT (NFR-APR01: the upgrade is a migration, no
// hand step), and a run recorded before it, whose writer nobody recorded,
// is refused as a rollback source (records_untrusted) instead of trusted.
func TestPersist_Migration6OnAnUpgradedDatabase(t *testing.T) {
	t.Parallel()
	db := recoverydb.New(t)
	repair, recovery, migrator := pgtest.Pool(t, db.Reconciliation), pgtest.Pool(t, db.Recovery), pgtest.Pool(t, db.Migrator)
	a := recon.Action{ID: "restore_trade:trades/trade_id=t1", Kind: recon.ActionRestoreTrade, Target: recon.Fields{"scope": "s", "table": "trades", "trade_id": "t1"},
		After: recon.Fields{"trade_id": "t1"}, Reversible: true, Risk: recon.RiskMedium, Rollback: "delete"}
	if err := forge(repair, "before-6", "p", "s", 1, a); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`ALTER TABLE projection_reconciliation_journal DROP COLUMN written_as`,
		`ALTER TABLE projection_reconciliation_audit DROP COLUMN written_as`,
		`GRANT SELECT, INSERT ON projection_reconciliation_journal, projection_reconciliation_audit TO projection_recovery`,
		`DELETE FROM ` + store.VersionTable + ` WHERE version_id = 6`,
	} {
		if _, err := migrator.Exec(ctxb, stmt); err != nil {
			t.Fatalf("the release before migration 6: %s: %v", stmt, err)
		}
	}
	applied, err := store.New(migrator).ApplyMigrations(ctxb)
	if err != nil || len(applied) != 1 {
		t.Fatalf("manager migrate: %+v %v; want migration 6 applied", applied, err)
	}
	if err := forge(recovery, "forged", "p", "s", 1, a); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("projection_recovery writes the audit trail after the upgrade: %v", err)
	}
	if _, err := recovery.Exec(ctxb, `SELECT count(*) FROM projection_reconciliation_journal, projection_reconciliation_audit`); err != nil {
		t.Errorf("projection_recovery lost its SELECT: %v", err)
	}
	recs, err := (&Auditor{Pool: repair}).StoredRecords(ctxb, "before-6")
	if err != nil || len(recs) != 1 || recs[0].WrittenAs != pgtest.MigratorRole {
		t.Fatalf("a record from before migration 6: %+v %v; want it read as written by the role that migrated", recs, err)
	}
	w, err := NewRunner(RunnerConfig{Store: store.New(repair), Source: nopFetcher{}, StaleAfter: time.Minute,
		Permission: recon.PermissionFunc(func(context.Context, string) (bool, error) { return true, nil })})
	if err != nil {
		t.Fatal(err)
	}
	if ro, err := w.RollbackRun(ctxb, "s", "before-6", approver, 0); recon.CodeOf(err) != ResultRecordsUntrusted || len(ro.RolledBack) != 0 {
		t.Fatalf("rollback of a run recorded before migration 6: %v %+v; want %s", err, ro, ResultRecordsUntrusted)
	}
}
