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
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// A dry run's record goes through every phase to reported, with its report
// and plan stored as jsonb and read back as they were returned.
func TestPersist_DryRunIsRecordedAtEveryPhase(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "runs", 80, worldOpts{catchUp: true})
	w.exec(`UPDATE positions SET quantity = quantity + 1 WHERE scope = $1`, w.scope)
	runs := &Runs{Pool: pgtest.Pool(t, w.db.Recovery)}
	var seen []string
	p := w.provider(0)
	spy := recon.ProviderFunc(func(ctx context.Context, scope string) (*recon.Snapshot, error) {
		seen = append(seen, w.runStates(t))
		return p.Read(ctx, scope)
	})
	wf := &recon.Workflow{Provider: spy, Runs: runs, Clock: time.Now, StaleAfter: time.Minute}
	res, err := wf.DryRun(ctxb, w.scope)
	if err != nil {
		t.Fatal(err)
	}
	if err := runs.SaveResult(ctxb, res); err != nil {
		t.Fatal(err)
	}
	if want := []string{"collecting"}; !slices.Equal(seen, want) {
		t.Fatalf("while reading, the stored run was %v, want %v (committed before the read)", seen, want)
	}
	got, err := runs.Get(ctxb, res.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Phase != recon.RunReported || got.CorrelationID != res.Run.ID || got.Findings != len(res.Report.Findings) ||
		got.Findings == 0 || got.PlanID != res.Plan.PlanID || got.Report == nil || got.Plan == nil ||
		got.Plan.Fingerprint != recon.Fingerprint(got.Plan.Actions) || got.Plan.PlanID != res.Plan.PlanID ||
		len(got.Report.Findings) != len(res.Report.Findings) {
		t.Fatalf("stored run %+v", got)
	}
	// A reported run is terminal: a late save of an earlier phase and a
	// second result are refused, and the row is unchanged.
	late := res.Run
	late.Phase = recon.RunAnalyzing
	if err := runs.Save(ctxb, late); err == nil {
		t.Fatal("a terminal run was moved back to analyzing")
	}
	if err := runs.SaveResult(ctxb, res); err == nil {
		t.Fatal("a second result overwrote the first")
	}
	if again, _ := runs.Get(ctxb, res.Run.ID); again.Phase != recon.RunReported {
		t.Fatalf("run now %s", again.Phase)
	}
	// The plan an approval echoes is read back by scope and plan id, as
	// shown; another scope's or an unknown plan id is not stored.
	plan, err := runs.StoredPlan(ctxb, w.scope, res.Plan.PlanID)
	if err != nil || plan == nil || plan.PlanID != res.Plan.PlanID || plan.Fingerprint != res.Plan.Fingerprint {
		t.Fatalf("stored plan %+v, %v", plan, err)
	}
	for _, c := range []struct{ scope, planID string }{{"elsewhere", res.Plan.PlanID}, {w.scope, "no-such-plan"}} {
		if _, err := runs.StoredPlan(ctxb, c.scope, c.planID); err == nil || !strings.Contains(err.Error(), "is not stored") {
			t.Fatalf("StoredPlan(%q, %q) = %v, want not stored", c.scope, c.planID, err)
		}
	}
}

// A manager that dies mid-read leaves its run in the phase it reached
// (collecting), inspectable; a read that fails ends it failed with the code.
func TestPersist_CrashedRunStaysInspectable(t *testing.T) {
	t.Parallel()
	db := recoverydb.New(t)
	runs := &Runs{Pool: pgtest.Pool(t, db.Recovery)}
	crash := recon.ProviderFunc(func(context.Context, string) (*recon.Snapshot, error) {
		runtime.Goexit() // the process is gone: no further save of any kind
		return nil, nil
	})
	wf := &recon.Workflow{Provider: crash, Runs: runs, Clock: time.Now, StaleAfter: time.Minute}
	done := make(chan struct{})
	go func() { defer close(done); _, _ = wf.DryRun(ctxb, "crash") }()
	<-done
	var id string
	if err := pgtest.Pool(t, db.ReadOnly).QueryRow(ctxb, `SELECT id FROM projection_reconciliation_runs WHERE scope = 'crash'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	got, err := runs.Get(ctxb, id)
	if err != nil || got.Phase != recon.RunCollecting || got.Report != nil {
		t.Fatalf("crashed run: %+v %v", got, err)
	}

	failing := recon.ProviderFunc(func(context.Context, string) (*recon.Snapshot, error) { return nil, errors.New("member down") })
	wf.Provider = failing
	res, err := wf.DryRun(ctxb, "fails")
	if recon.CodeOf(err) != recon.ResultSnapshotUnavailable {
		t.Fatal(err)
	}
	got, err = runs.Get(ctxb, res.Run.ID)
	if err != nil || got.Phase != recon.RunFailed || got.Code != recon.ResultSnapshotUnavailable || got.Detail == "" {
		t.Fatalf("failed run: %+v %v", got, err)
	}
}

// An apply journals each action, committed before the next action runs, and
// audits it; a failing action rolls the journaled ones back newest-first and
// the journal alone shows what happened.
func TestPersist_JournalCommittedBeforeTheNextAction(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "journal", 120, worldOpts{catchUp: true})
	w.exec(`UPDATE positions SET quantity = quantity + 3 WHERE scope = $1`, w.scope)
	rt := pgtest.Pool(t, w.db.Reconciliation)
	journal, auditor := &Journal{Pool: rt}, &Auditor{Pool: rt}
	var logged []string
	var applied []string
	failAt := 2
	h := recon.HandlerFuncs{
		ApplyFunc: func(ctx context.Context, a recon.Action) error {
			// Every earlier action's entry is already committed: another
			// session (the admin's) sees it.
			var n int
			if err := w.admin.QueryRow(ctx, `SELECT count(*) FROM projection_reconciliation_journal WHERE state = 'applied'`).Scan(&n); err != nil {
				return err
			}
			if n != len(applied) {
				return errors.New("journal behind the actions")
			}
			applied = append(applied, a.ID)
			if len(applied) == failAt {
				return errors.New("injected failure")
			}
			return nil
		},
		RevertFunc: func(context.Context, recon.Action) error { return nil },
	}
	wf := &recon.Workflow{Provider: w.provider(0), Clock: time.Now, StaleAfter: time.Minute, Journal: journal, Auditor: auditor,
		Permission: recon.PermissionFunc(func(context.Context, string) (bool, error) { return true, nil }),
		Handlers:   recon.Handlers{recon.ActionKind("rederive_position"): h}}
	// The runner's telemetry, as Runner.Apply emits the outcome's record.
	tel, err := NewTelemetry(funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := wf.DryRun(ctxb, w.scope)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range res.Plan.Actions {
		if a.Kind == "rederive_position" {
			ids = append(ids, a.ID)
		}
	}
	if len(ids) < 3 {
		t.Fatalf("want >= 3 rederive actions, plan %+v manual %+v", res.Plan.Actions, res.Plan.Manual)
	}
	out, err := wf.Apply(ctxb, res.Plan, recon.ApplyOptions{Principal: "alice", Confirm: res.Plan.PlanID, Only: ids})
	tel.Apply(out, err)
	if recon.CodeOf(err) != recon.ResultRepairFailed || len(out.RolledBack) != 1 {
		t.Fatalf("apply: %v, %+v", err, out)
	}
	entries, err := journal.Entries(ctxb, out.CorrelationID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Event+" "+e.Action.ID)
	}
	if want := []string{"applied " + applied[0], "reverted " + applied[0]}; !slices.Equal(got, want) {
		t.Fatalf("journal %q, want %q", got, want)
	}
	if entries[0].Action.Kind != "rederive_position" || entries[0].Scope != w.scope || entries[0].PlanID != res.Plan.PlanID {
		t.Fatalf("journal entry %+v", entries[0])
	}
	recs, err := auditor.Records(ctxb, out.CorrelationID)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, r := range recs {
		outcomes = append(outcomes, r.Outcome)
		if r.Principal != "alice" || r.Action != recon.AuditAction || r.Before == nil {
			t.Fatalf("audit record %+v", r)
		}
	}
	if !slices.Contains(outcomes, recon.AuditApplied) || !slices.Contains(outcomes, recon.AuditReverted) {
		t.Fatalf("audit outcomes %v", outcomes)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], `"code"="repair_failed"`) || !strings.Contains(logged[0], `"rolledBack"=1`) {
		t.Fatalf("telemetry %q", logged)
	}
	// A second entry at a journaled position is refused (it would rewrite history).
	if err := journal.Append(ctxb, entries[0]); err == nil {
		t.Fatal("a duplicate journal position was accepted")
	}
}

// The repair role may append to the journal and the audit trail but never
// rewrite or remove a record, and the recovery worker's role may not write
// them at all (PostgreSQL refuses, not only the code): a rollback is
// rebuilt from these rows and its reverts run as the repair role, which
// may DELETE, so a row the worker could write would choose what is
// deleted. Each row records the role that wrote it (written_as, 00006).
func TestPersist_JournalAndAuditAreAppendOnly(t *testing.T) {
	t.Parallel()
	db := recoverydb.New(t)
	rt := pgtest.Pool(t, db.Reconciliation)
	a := &Auditor{Pool: rt}
	if err := a.Audit(ctxb, recon.AuditRecord{Action: recon.AuditAction, CorrelationID: "c", PlanID: "p", Scope: "s", ActionID: "x",
		Kind: "drop_position", Outcome: recon.AuditRefused, Code: recon.ResultPlanStale, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := (&Journal{Pool: rt}).Append(ctxb, recon.JournalEntry{CorrelationID: "c", PlanID: "p", Scope: "s", Seq: 1,
		Event: recon.JournalApplied, Action: recon.Action{ID: "x"}, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	recovery := pgtest.Pool(t, db.Recovery)
	for _, c := range []struct {
		role string
		pool *pgxpool.Pool
		stmt string
	}{
		{pgtest.ReconciliationRole, rt, `UPDATE projection_reconciliation_audit SET outcome = 'applied'`},
		{pgtest.ReconciliationRole, rt, `DELETE FROM projection_reconciliation_audit`},
		{pgtest.ReconciliationRole, rt, `UPDATE projection_reconciliation_journal SET state = 'reverted'`},
		{pgtest.ReconciliationRole, rt, `DELETE FROM projection_reconciliation_journal`},
		{pgtest.ReconciliationRole, rt, `DELETE FROM projection_reconciliation_runs`},
		{pgtest.RecoveryRole, recovery, `INSERT INTO projection_reconciliation_audit (action, correlation_id, plan_id, scope, action_id, kind, outcome, before, after, principal, at)
SELECT action, correlation_id, plan_id, scope, action_id, kind, 'applied', before, after, principal, at FROM projection_reconciliation_audit`},
		{pgtest.RecoveryRole, recovery, `INSERT INTO projection_reconciliation_journal (correlation_id, position, plan_id, scope, state, action_id, action, at)
SELECT correlation_id, 2, plan_id, scope, state, action_id, action, at FROM projection_reconciliation_journal`},
		{pgtest.RecoveryRole, recovery, `UPDATE projection_reconciliation_audit SET outcome = 'applied'`},
		{pgtest.RecoveryRole, recovery, `DELETE FROM projection_reconciliation_journal`},
		{pgtest.RecoveryRole, recovery, `TRUNCATE projection_reconciliation_audit`},
	} {
		t.Run(c.role+": "+strings.SplitN(c.stmt, "\n", 2)[0], func(t *testing.T) {
			if _, err := c.pool.Exec(ctxb, c.stmt); err == nil || !strings.Contains(err.Error(), "permission denied") {
				t.Errorf("%s as %s: %v, want permission denied", c.stmt, c.role, err)
			}
		})
	}
	recs, err := a.StoredRecords(ctxb, "c")
	// Before was absent (nil): it reads back absent, never as {} (00004).
	if err != nil || len(recs) != 1 || recs[0].Outcome != recon.AuditRefused || recs[0].Code != recon.ResultPlanStale || recs[0].Before != nil ||
		recs[0].WrittenAs != pgtest.ReconciliationRole {
		t.Fatalf("records %+v %v", recs, err)
	}
}

// runStates lists the stored runs' states (as the admin: another session).
func (w *world) runStates(t *testing.T) string {
	t.Helper()
	var s string
	if err := w.admin.QueryRow(ctxb, `SELECT coalesce(string_agg(state, ',' ORDER BY started_at), '') FROM projection_reconciliation_runs`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJournal_AppliedBy (recon.AppliedPlans, recon.JournalReader) on
// PostgreSQL, as the reconciliation role: a plan counts as applied by a run
// while one of its applied actions is not reverted by that run; other
// plans, other scopes and fully reverted runs do not count; a failed revert
// leaves its action applied.
func TestJournal_AppliedBy(t *testing.T) {
	t.Parallel()
	db := recoverydb.New(t)
	j := &Journal{Pool: pgtest.Pool(t, db.Reconciliation)}
	at := time.Now()
	step := func(corr, plan, scope string, seq int, event, action string) {
		t.Helper()
		at = at.Add(time.Millisecond)
		if err := j.Append(ctxb, recon.JournalEntry{CorrelationID: corr, PlanID: plan, Scope: scope, Seq: seq,
			Event: event, Action: recon.Action{ID: action}, At: at}); err != nil {
			t.Fatal(err)
		}
	}
	want := func(scope, plan, corr string) {
		t.Helper()
		if got, err := j.AppliedBy(ctxb, scope, plan); err != nil || got != corr {
			t.Fatalf("AppliedBy(%s, %s) = %q, %v; want %q", scope, plan, got, err, corr)
		}
	}
	want("s", "p", "")
	step("other-scope", "p", "s2", 1, recon.JournalApplied, "x")
	step("other-plan", "q", "s", 1, recon.JournalApplied, "x")
	want("s", "p", "")
	step("run-a", "p", "s", 1, recon.JournalApplied, "x")
	step("run-a", "p", "s", 2, recon.JournalApplied, "y")
	want("s", "p", "run-a")
	step("run-a", "p", "s", 3, recon.JournalReverted, "y")
	want("s", "p", "run-a") // x is still applied
	step("run-a", "p", "s", 4, recon.JournalRevertFailed, "x")
	want("s", "p", "run-a") // a failed revert leaves it applied
	step("run-a", "p", "s", 5, recon.JournalReverted, "x")
	want("s", "p", "")
	notReverted := func(corr string, ids ...string) {
		t.Helper()
		entries, err := j.Entries(ctxb, corr)
		var got []string
		for _, a := range recon.StillApplied(entries) {
			got = append(got, a.ID)
		}
		if err != nil || strings.Join(got, ",") != strings.Join(ids, ",") {
			t.Fatalf("StillApplied(Entries(%s)) = %v, %v; want %v", corr, got, err, ids)
		}
	}
	notReverted("run-a")
	step("run-b", "p", "s", 1, recon.JournalApplied, "x")
	step("run-b", "p", "s", 2, recon.JournalApplied, "y")
	step("run-b", "p", "s", 3, recon.JournalApplied, "z")
	step("run-b", "p", "s", 4, recon.JournalReverted, "z")
	step("run-b", "p", "s", 5, recon.JournalRevertFailed, "y")
	notReverted("run-b", "x", "y")
	notReverted("no-such-run")
	want("s", "p", "run-b")
	want("s2", "p", "other-scope")
}
