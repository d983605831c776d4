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
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// Runs is recon.RunStore on projection_reconciliation_runs (migration
// 00002). Each Save is its own committed statement: a run whose manager
// dies stays in the last phase it reached (collecting, analyzing), readable
// like a job's status, never silently "reported".
type Runs struct{ Pool *pgxpool.Pool }

var _ recon.RunStore = (*Runs)(nil)

// A terminal run (reported, failed, cancelled) is never moved again: the
// conflict update only applies to a row still in a non-terminal state of the
// same scope. Without the guard a late, retried Save of an earlier phase
// could resurrect a failed run as "analyzing".
const saveRunSQL = `INSERT INTO projection_reconciliation_runs
    (id, scope, correlation_id, state, code, error, findings, clean, plan_id, started_at, updated_at)
VALUES ($1, $2, $1, $3, nullif($4, ''), nullif($5, ''), $6, $7, nullif($8, ''), $9, $10)
ON CONFLICT (id) DO UPDATE SET state = excluded.state, code = excluded.code, error = excluded.error,
    findings = excluded.findings, clean = excluded.clean, plan_id = excluded.plan_id, updated_at = excluded.updated_at
 WHERE projection_reconciliation_runs.scope = excluded.scope
   AND projection_reconciliation_runs.state NOT IN ('reported', 'failed', 'cancelled')`

// Save records r in its current phase. The dry run's id is its correlation
// id (recon.Run carries no other).
func (s *Runs) Save(ctx context.Context, r recon.Run) error {
	tag, err := s.Pool.Exec(ctx, saveRunSQL, r.ID, r.Scope, string(r.Phase), string(r.Code), r.Detail,
		r.Findings, r.Clean, r.PlanID, r.StartedAt, r.UpdatedAt)
	if err != nil {
		return fmt.Errorf("reconstore: save run %s (%s): %w", r.ID, r.Phase, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("reconstore: save run %s (%s): the stored run is terminal or of another scope", r.ID, r.Phase)
	}
	return nil
}

// SaveResult stores a reported run's report and plan (jsonb), so the plan
// an approver echoes can be read back as it was shown. Only a reported run
// takes them.
func (s *Runs) SaveResult(ctx context.Context, res *recon.DryRunResult) error {
	if res == nil || res.Report == nil || res.Plan == nil {
		return errors.New("reconstore: save result: no report or plan")
	}
	report, err := json.Marshal(res.Report)
	if err != nil {
		return fmt.Errorf("reconstore: encode report of run %s: %w", res.Run.ID, err)
	}
	plan, err := json.Marshal(res.Plan)
	if err != nil {
		return fmt.Errorf("reconstore: encode plan of run %s: %w", res.Run.ID, err)
	}
	tag, err := s.Pool.Exec(ctx, `UPDATE projection_reconciliation_runs SET report = $2, plan = $3
 WHERE id = $1 AND state = 'reported' AND report IS NULL`, res.Run.ID, report, plan)
	if err != nil {
		return fmt.Errorf("reconstore: save result of run %s: %w", res.Run.ID, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("reconstore: save result of run %s: no reported run without a result", res.Run.ID)
	}
	return nil
}

// StoredRun is a runs row as stored.
type StoredRun struct {
	recon.Run
	CorrelationID string
	Report        *recon.Report
	Plan          *recon.Plan
}

// Get reads one run; pgx.ErrNoRows (wrapped) when absent.
func (s *Runs) Get(ctx context.Context, id string) (StoredRun, error) {
	var r StoredRun
	var state string
	var report, plan []byte
	err := s.Pool.QueryRow(ctx, `SELECT id, scope, correlation_id, state, coalesce(code, ''), coalesce(error, ''),
       findings, clean, coalesce(plan_id, ''), report, plan, started_at, updated_at
  FROM projection_reconciliation_runs WHERE id = $1`, id).Scan(&r.ID, &r.Scope, &r.CorrelationID, &state, &r.Code,
		&r.Detail, &r.Findings, &r.Clean, &r.PlanID, &report, &plan, &r.StartedAt, &r.UpdatedAt)
	if err != nil {
		return StoredRun{}, fmt.Errorf("reconstore: read run %s: %w", id, err)
	}
	r.Phase = recon.RunPhase(state)
	if report != nil {
		r.Report = &recon.Report{}
		if err := json.Unmarshal(report, r.Report); err != nil {
			return StoredRun{}, fmt.Errorf("reconstore: decode report of run %s: %w", id, err)
		}
	}
	if plan != nil {
		r.Plan = &recon.Plan{}
		if err := json.Unmarshal(plan, r.Plan); err != nil {
			return StoredRun{}, fmt.Errorf("reconstore: decode plan of run %s: %w", id, err)
		}
	}
	return r, nil
}

// StoredPlan reads back the plan a dry run of scope stored with its report
// under planID, exactly as it was shown: the latest reported run holding
// it. An approval echoes the plan id; applying anything but the stored plan
// would apply actions nobody was shown.
func (s *Runs) StoredPlan(ctx context.Context, scope, planID string) (*recon.Plan, error) {
	var id string
	err := s.Pool.QueryRow(ctx, `SELECT id FROM projection_reconciliation_runs
 WHERE scope = $1 AND plan_id = $2 AND state = 'reported' AND plan IS NOT NULL ORDER BY updated_at DESC LIMIT 1`, scope, planID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("plan %s of scope %q is not stored: run a dry run again", planID, scope)
	}
	if err != nil {
		return nil, fmt.Errorf("read the stored plan %s: %w", planID, err)
	}
	run, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return run.Plan, nil
}

// execer runs one statement: the pool (autocommitted) or a repair's
// transaction (committed with its write, Handlers.recordTx).
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Journal is recon.Journal on projection_reconciliation_journal. An entry
// is durable before the workflow runs the next action: the entry of a
// write commits in the write's own transaction (Handlers.recordTx), any
// other with Append (one autocommitted INSERT), so a crashed apply can be
// rolled back from these rows alone. A second entry at the same position
// of a run is refused (primary key), which stops the apply. Each row
// records the role it was written as (written_as, migration 00006).
type Journal struct {
	Pool *pgxpool.Pool
	// beforeInsert, when set (tests only), runs before each INSERT: the
	// crash injected between a repair's write and its records.
	beforeInsert func(ctx context.Context)
}

var _ recon.Journal = (*Journal)(nil)

// Append records one step. written_as is never passed: its column default
// (current_user) records the session's role, so no caller can forget or
// choose it; a rollback trusts only its own role's rows (RollbackRun).
func (j *Journal) Append(ctx context.Context, e recon.JournalEntry) error {
	return j.insert(ctx, j.Pool, e)
}

// insert writes e through db: the pool, or a repair's transaction.
func (j *Journal) insert(ctx context.Context, db execer, e recon.JournalEntry) error {
	action, err := json.Marshal(e.Action)
	if err != nil {
		return fmt.Errorf("reconstore: encode journal action %s: %w", e.Action.ID, err)
	}
	if j.beforeInsert != nil {
		j.beforeInsert(ctx)
	}
	if _, err := db.Exec(ctx, `INSERT INTO projection_reconciliation_journal
    (correlation_id, position, plan_id, scope, state, action_id, action, error, at)
VALUES ($1, $2, $3, $4, $5, $6, $7, nullif($8, ''), $9)`,
		e.CorrelationID, e.Seq, e.PlanID, e.Scope, e.Event, e.Action.ID, action, e.Error, e.At); err != nil {
		return fmt.Errorf("reconstore: journal %s #%d (%s %s): %w", e.CorrelationID, e.Seq, e.Event, e.Action.ID, err)
	}
	return nil
}

var _ recon.AppliedPlans = (*Journal)(nil)

// appliedBySQL finds the oldest run of a plan with an applied action that
// its run has not reverted since (reverts are journaled by the run that
// applied, after its entries: an apply's automatic rollback or Rollback).
const appliedBySQL = `SELECT j.correlation_id FROM projection_reconciliation_journal j
 WHERE j.scope = $1 AND j.plan_id = $2 AND j.state = 'applied'
   AND NOT EXISTS (SELECT 1 FROM projection_reconciliation_journal r
                    WHERE r.correlation_id = j.correlation_id AND r.action_id = j.action_id AND r.state = 'reverted')
 ORDER BY j.at, j.correlation_id LIMIT 1`

// AppliedBy implements recon.AppliedPlans: the run of planID whose applied
// actions are not all reverted ("" when none). It reads committed rows:
// every journal entry commits (with its write, or on its own) before the
// next action runs, and
// the caller holds the scope's lease, so a run that applied the plan
// before the caller took the lease is visible here.
func (j *Journal) AppliedBy(ctx context.Context, scope, planID string) (string, error) {
	var id string
	err := j.Pool.QueryRow(ctx, appliedBySQL, scope, planID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reconstore: read the runs of plan %s: %w", planID, err)
	}
	return id, nil
}

var _ recon.JournalReader = (*Journal)(nil)

// Entries reads a run's journal in order, whoever wrote its rows.
func (j *Journal) Entries(ctx context.Context, correlationID string) ([]recon.JournalEntry, error) {
	return j.entries(ctx, correlationID, false)
}

// entries reads a run's journal in order; own: only the rows written as
// the reading session's role (written_as = current_user).
func (j *Journal) entries(ctx context.Context, correlationID string, own bool) ([]recon.JournalEntry, error) {
	rows, err := j.Pool.Query(ctx, `SELECT correlation_id, position, plan_id, scope, state, action, coalesce(error, ''), at
  FROM projection_reconciliation_journal
 WHERE correlation_id = $1 AND (NOT $2 OR written_as = current_user) ORDER BY position`, correlationID, own)
	if err != nil {
		return nil, fmt.Errorf("reconstore: read journal %s: %w", correlationID, err)
	}
	defer rows.Close()
	var out []recon.JournalEntry
	for rows.Next() {
		var e recon.JournalEntry
		var action []byte
		if err := rows.Scan(&e.CorrelationID, &e.Seq, &e.PlanID, &e.Scope, &e.Event, &action, &e.Error, &e.At); err != nil {
			return nil, fmt.Errorf("reconstore: read journal %s: %w", correlationID, err)
		}
		if err := json.Unmarshal(action, &e.Action); err != nil {
			return nil, fmt.Errorf("reconstore: decode journal %s #%d: %w", correlationID, e.Seq, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reconstore: read journal %s: %w", correlationID, err)
	}
	return out, nil
}

// Auditor is recon.Auditor on projection_reconciliation_audit: one committed
// row per record (an applied or reverted action's in its write's own
// transaction, Handlers.recordTx), append-only (the repair role has no
// UPDATE or DELETE on it, the recovery worker's role only SELECT), each
// recording the role it was written as (written_as, migration 00006, its
// column default: Audit never passes it).
// Each row holds the whole action (migration 00004: target, the absence of
// before/after, reversibility, risk, lifecycle event, rollback text), so a
// successful apply can be rolled back from these rows alone
// (Runner.OutcomeFromAudit).
type Auditor struct {
	Pool *pgxpool.Pool
	// beforeInsert: as Journal's (tests only).
	beforeInsert func(ctx context.Context)
}

var _ recon.Auditor = (*Auditor)(nil)

// Audit records r.
func (a *Auditor) Audit(ctx context.Context, r recon.AuditRecord) error {
	return a.insert(ctx, a.Pool, r)
}

// insert writes r through db: the pool, or a repair's transaction.
func (a *Auditor) insert(ctx context.Context, db execer, r recon.AuditRecord) error {
	before, err := fieldsJSON(r.Before)
	if err != nil {
		return fmt.Errorf("reconstore: encode audit before of %s: %w", r.ActionID, err)
	}
	after, err := fieldsJSON(r.After)
	if err != nil {
		return fmt.Errorf("reconstore: encode audit after of %s: %w", r.ActionID, err)
	}
	target, err := fieldsJSON(r.Target)
	if err != nil {
		return fmt.Errorf("reconstore: encode audit target of %s: %w", r.ActionID, err)
	}
	if a.beforeInsert != nil {
		a.beforeInsert(ctx)
	}
	if _, err := db.Exec(ctx, `INSERT INTO projection_reconciliation_audit
    (action, correlation_id, plan_id, scope, action_id, kind, outcome, code, reason, before, after, principal, at,
     target, before_absent, after_absent, lifecycle_event, reversible, risk, rollback)
VALUES ($1, $2, $3, $4, $5, $6, $7, nullif($8, ''), nullif($9, ''), $10, $11, $12, $13,
     $14, $15, $16, $17, $18, $19, $20)`,
		r.Action, r.CorrelationID, r.PlanID, r.Scope, r.ActionID, string(r.Kind), r.Outcome, string(r.Code), r.Reason,
		before, after, r.Principal, r.At,
		target, r.Before == nil, r.After == nil, r.LifecycleEvent, r.Reversible, string(r.Risk), r.Rollback); err != nil {
		return fmt.Errorf("reconstore: audit %s %s (%s): %w", r.CorrelationID, r.ActionID, r.Outcome, err)
	}
	return nil
}

// StoredAuditRecord is an audit row as stored. Legacy is true for a row
// written before migration 00004 (no target, reversibility or absence
// flags): it says what changed but not where, and can never drive a
// rollback. WrittenAs is the database role the row was written as
// (migration 00006; a row from before it reads as the role that ran it).
type StoredAuditRecord struct {
	recon.AuditRecord
	Legacy    bool
	WrittenAs string
}

// Records reads a run's audit records in order. Before and After read back
// nil when the record was absent (and {} when the row is legacy and its
// absence unknown).
func (a *Auditor) Records(ctx context.Context, correlationID string) ([]recon.AuditRecord, error) {
	stored, err := a.StoredRecords(ctx, correlationID)
	if err != nil {
		return nil, err
	}
	out := make([]recon.AuditRecord, len(stored))
	for i, s := range stored {
		out[i] = s.AuditRecord
	}
	return out, nil
}

// StoredRecords reads a run's audit records in order, each marked legacy
// or not, whoever wrote them.
func (a *Auditor) StoredRecords(ctx context.Context, correlationID string) ([]StoredAuditRecord, error) {
	return a.storedRecords(ctx, correlationID, false)
}

// storedRecords is StoredRecords; own: only the rows written as the
// reading session's role (written_as = current_user).
func (a *Auditor) storedRecords(ctx context.Context, correlationID string, own bool) ([]StoredAuditRecord, error) {
	rows, err := a.Pool.Query(ctx, `SELECT action, correlation_id, plan_id, scope, action_id, kind, outcome,
       coalesce(code, ''), coalesce(reason, ''), before, after, principal, at,
       target, coalesce(before_absent, false), coalesce(after_absent, false), coalesce(lifecycle_event, ''),
       reversible, coalesce(risk, ''), coalesce(rollback, ''), written_as
  FROM projection_reconciliation_audit
 WHERE correlation_id = $1 AND (NOT $2 OR written_as = current_user) ORDER BY id`, correlationID, own)
	if err != nil {
		return nil, fmt.Errorf("reconstore: read audit %s: %w", correlationID, err)
	}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StoredAuditRecord, error) {
		var s StoredAuditRecord
		r := &s.AuditRecord
		var kind, code, risk string
		var before, after, target []byte
		var beforeAbsent, afterAbsent bool
		var reversible *bool
		if err := row.Scan(&r.Action, &r.CorrelationID, &r.PlanID, &r.Scope, &r.ActionID, &kind, &r.Outcome, &code,
			&r.Reason, &before, &after, &r.Principal, &r.At,
			&target, &beforeAbsent, &afterAbsent, &r.LifecycleEvent, &reversible, &risk, &r.Rollback, &s.WrittenAs); err != nil {
			return s, err
		}
		r.Kind, r.Code, r.Risk = recon.ActionKind(kind), recon.ResultCode(code), recon.Risk(risk)
		s.Legacy = target == nil || reversible == nil
		if reversible != nil {
			r.Reversible = *reversible
		}
		if target != nil {
			if err := json.Unmarshal(target, &r.Target); err != nil {
				return s, err
			}
		}
		if err := json.Unmarshal(before, &r.Before); err != nil {
			return s, err
		}
		if err := json.Unmarshal(after, &r.After); err != nil {
			return s, err
		}
		if beforeAbsent {
			r.Before = nil
		}
		if afterAbsent {
			r.After = nil
		}
		return s, nil
	})
	if err != nil {
		return nil, fmt.Errorf("reconstore: read audit %s: %w", correlationID, err)
	}
	return recs, nil
}

// strangerRows is what of a run's journal and audit trail was written as
// another role than the reading session's.
type strangerRows struct {
	role  string   // the reading session's role (current_user)
	rows  int      // the run's rows written as another role
	roles []string // those roles, sorted
}

// strangersSQL counts a run's journal and audit rows not written as the
// session's role, in one statement (one snapshot of both tables).
const strangersSQL = `SELECT current_user::text, count(*)::int, coalesce(array_agg(DISTINCT written_as ORDER BY written_as), '{}')
  FROM (SELECT written_as FROM projection_reconciliation_journal WHERE correlation_id = $1
        UNION ALL
        SELECT written_as FROM projection_reconciliation_audit WHERE correlation_id = $1) r
 WHERE written_as IS DISTINCT FROM current_user`

// strangers reads strangerRows of the run correlationID on pool.
func strangers(ctx context.Context, pool *pgxpool.Pool, correlationID string) (strangerRows, error) {
	var s strangerRows
	if err := pool.QueryRow(ctx, strangersSQL, correlationID).Scan(&s.role, &s.rows, &s.roles); err != nil {
		return strangerRows{}, fmt.Errorf("reconstore: read who wrote the records of %s: %w", correlationID, err)
	}
	return s, nil
}

// fieldsJSON encodes primitive fields; nil is the empty object (the column
// is NOT NULL: "no values" is stated, not unknown).
func fieldsJSON(f recon.Fields) ([]byte, error) {
	if f == nil {
		f = recon.Fields{}
	}
	return json.Marshal(f)
}
