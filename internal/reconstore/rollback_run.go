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
	"fmt"
	"strings"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// ResultRecordsUntrusted refuses a rollback (RollbackRun) of a run whose
// journal or audit rows were not all written as the rolling-back
// session's own role (written_as, migration 00006). Those rows choose what
// the rollback reverts, and the reverts run as that role, which may DELETE
// projection rows: a row another role wrote (projection_recovery, with a
// grant from before 00006; a human) could otherwise make the repair role
// delete what its writer never could. Nothing is reverted, journaled or
// audited (an audit record would copy the untrusted rows into the trusted
// trail); a human reads the run's rows and their written_as. Stable: status
// and alerts match on it.
const ResultRecordsUntrusted recon.ResultCode = "records_untrusted"

// ErrRecordsDisagree: the audit trail and the journal of a run name
// different actions as applied and not reverted (a lost audit or journal
// write, or a hand edit). A rollback from either would guess which
// record is right; it refuses instead and reverts nothing.
var ErrRecordsDisagree = errors.New("reconstore: the audit trail and the journal of the run disagree")

// RollbackRun rolls back the apply of correlationID without its Outcome:
// the run's reconciliation.repaired audit records say which actions are
// applied and not reverted, and each is restored through its handler,
// newest-first, as Rollback would. It refuses, reverting nothing: when the
// journal disagrees with the audit on any action (ErrRecordsDisagree); when
// the run holds a row not written as the repair role (records_untrusted);
// when the run is of another scope than scope (nothing_selected, before any
// lease or write); when more reversible actions than maxActions would be
// reverted (blast_radius_exceeded; 0: recon.DefaultMaxActions). A refusal of
// a run whose records were read is audited on each applied action. A
// correlation id without audit records is nothing_selected; irreversible
// actions come back in Manual (docs/design/repairs.md).
func (w *Runner) RollbackRun(ctx context.Context, scope, correlationID, principal string, maxActions int) (*recon.RollbackOutcome, error) {
	start := time.Now()
	var auditErrors []string
	o, err := w.rollbackSource(ctx, correlationID)
	if err == nil && o.Scope != scope {
		e := &recon.Error{Code: recon.ResultNothingSelected, Detail: fmt.Sprintf("run %s repaired scope %q, not %q: nothing of this scope to roll back", correlationID, o.Scope, scope)}
		auditErrors, err = w.auditRefusal(ctx, o, principal, e), e
	}
	if err == nil {
		auditErrors, err = w.rollbackRadius(ctx, o, principal, maxActions)
	}
	if err != nil {
		ro := &recon.RollbackOutcome{CorrelationID: correlationID, Code: recon.CodeOf(err), Detail: err.Error(), AuditErrors: auditErrors}
		w.log.Info("reconciliation rollback refused", "correlationID", correlationID, "code", ro.Code, "detail", ro.Detail)
		w.tel.Rollback("", ro, err, time.Since(start))
		return ro, err
	}
	return w.Rollback(ctx, o, principal)
}

// rollbackRadius refuses, before any lease or write, a rollback of more
// reversible actions than maxActions (0: recon.DefaultMaxActions);
// irreversible ones are not counted (Rollback returns them in Manual and
// writes nothing for them). The permission is checked first, so an
// unauthorized principal is answered repair_denied, as Rollback and Apply
// answer it; either refusal is audited on every applied action, as
// Rollback audits a denial. It never defers to Rollback once the radius is
// exceeded: a permission granted between two checks would revert them all.
func (w *Runner) rollbackRadius(ctx context.Context, o *recon.Outcome, principal string, maxActions int) ([]string, error) {
	if maxActions <= 0 {
		maxActions = recon.DefaultMaxActions
	}
	n := 0
	for _, a := range o.Applied {
		if a.Reversible {
			n++
		}
	}
	if n <= maxActions {
		return nil, nil
	}
	e := &recon.Error{Code: recon.ResultBlastRadius, Detail: fmt.Sprintf("run %s: %d actions to revert, at most %d (maxActions): nothing reverted", o.CorrelationID, n, maxActions)}
	ok, err := false, error(nil)
	if principal != "" {
		ok, err = w.core.Permission.Allowed(ctx, principal)
	}
	if !ok || err != nil {
		e = &recon.Error{Code: recon.ResultRepairDenied, Detail: fmt.Sprintf("principal %q may not roll back repairs", principal), Err: err}
	}
	return w.auditRefusal(ctx, o, principal, e), e
}

// auditRefusal records e, a refused rollback of o by principal, on each
// applied action of o; it returns the records it could not write.
func (w *Runner) auditRefusal(ctx context.Context, o *recon.Outcome, principal string, e *recon.Error) []string {
	var lost []string
	for _, a := range o.Applied {
		rec := recon.AuditRecord{Action: recon.AuditAction, CorrelationID: o.CorrelationID, PlanID: o.PlanID, Scope: o.Scope,
			Principal: principal, ActionID: a.ID, Kind: a.Kind, Outcome: recon.AuditRefused, Code: e.Code, Reason: "rollback refused: " + e.Detail,
			Target: a.Target, Before: a.Before, After: a.After, LifecycleEvent: a.LifecycleEvent, Reversible: a.Reversible,
			Risk: a.Risk, Rollback: a.Rollback, At: w.clock()}
		if err := w.audit.Audit(context.WithoutCancel(ctx), rec); err != nil {
			lost = append(lost, a.ID+": "+err.Error())
			w.log.Error(err, "audit record lost", "action", a.ID, "outcome", recon.AuditRefused, "correlationID", o.CorrelationID)
		}
	}
	return lost
}

// rollbackSource is the outcome RollbackRun reverts: the audit trail's,
// proven equal to the journal's, with the journal's position count, built
// from rows written as this session's role only (see
// ResultRecordsUntrusted). Both the refusal and the filter are needed: the
// refusal tells a human the run was tampered with, and the filter keeps a
// row another role adds after that check out of the reads that follow it.
func (w *Runner) rollbackSource(ctx context.Context, correlationID string) (*recon.Outcome, error) {
	st, err := strangers(ctx, w.journal.Pool, correlationID)
	if err != nil {
		return nil, &recon.Error{Code: recon.ResultInternal, Detail: "read who wrote the run's records", Err: err}
	}
	if st.rows > 0 {
		return nil, &recon.Error{Code: ResultRecordsUntrusted, Detail: fmt.Sprintf(
			"run %s: %d of its journal and audit rows were written as %s, not as %s (this rollback's role): only rows the repair role wrote may choose what it reverts; nothing reverted",
			correlationID, st.rows, strings.Join(st.roles, ", "), st.role)}
	}
	fromAudit, err := w.outcomeFromAudit(ctx, correlationID, true)
	if err != nil {
		return nil, err
	}
	fromJournal, err := w.outcomeOf(ctx, correlationID, true)
	if err != nil && len(fromAudit.Applied) == 0 {
		// A refused run: nothing applied, nothing journaled; Rollback
		// answers nothing_selected.
		return fromAudit, nil
	}
	if err != nil {
		return nil, &recon.Error{Code: recon.ResultInternal, Detail: "read the journal of " + correlationID, Err: errors.Join(ErrRecordsDisagree, err)}
	}
	if why := disagreement(fromAudit, fromJournal); why != "" {
		return nil, &recon.Error{Code: recon.ResultInternal, Detail: fmt.Sprintf("run %s: %s: nothing reverted", correlationID, why), Err: ErrRecordsDisagree}
	}
	fromAudit.Journaled = fromJournal.Journaled
	return fromAudit, nil
}

// disagreement says how the audit trail's and the journal's outcomes of one
// run differ ("" when they are the same repair, action by action).
func disagreement(audit, journal *recon.Outcome) string {
	switch {
	case audit.Scope != journal.Scope || audit.PlanID != journal.PlanID:
		return fmt.Sprintf("audit holds scope %q plan %q, journal scope %q plan %q", audit.Scope, audit.PlanID, journal.Scope, journal.PlanID)
	case len(audit.Applied) != len(journal.Applied):
		return fmt.Sprintf("audit holds %d applied actions, journal %d", len(audit.Applied), len(journal.Applied))
	}
	for i, a := range audit.Applied {
		if j := journal.Applied[i]; !recon.SameRepair(a, j) {
			return fmt.Sprintf("applied action #%d is %s in the audit trail, %s in the journal (or their target, before or after differ)", i+1, a.ID, j.ID)
		}
	}
	return ""
}

// OutcomeFromAudit rebuilds, from the run's reconciliation.repaired audit
// records alone, the outcome of the apply with correlationID: its plan and
// scope, and the actions applied and not reverted since (a revert_failed
// action stays applied: its After is in place), in the order they were
// applied, each rebuilt whole from its record (recon.AuditRecord.RepairAction).
// Errors (nothing is guessed): no record (nothing_selected); records of
// several scopes or plans, an action applied twice, or an applied record
// written before migration 00004, which holds no target (internal). It
// reads every writer's rows (an inspection); RollbackRun reads its own role's only.
func (w *Runner) OutcomeFromAudit(ctx context.Context, correlationID string) (*recon.Outcome, error) {
	return w.outcomeFromAudit(ctx, correlationID, false)
}

// outcomeFromAudit is OutcomeFromAudit; own: only the rows written as the
// session's role.
func (w *Runner) outcomeFromAudit(ctx context.Context, correlationID string, own bool) (*recon.Outcome, error) {
	recs, err := w.audit.storedRecords(ctx, correlationID, own)
	if err != nil {
		return nil, &recon.Error{Code: recon.ResultInternal, Detail: "read the audit trail", Err: err}
	}
	var o *recon.Outcome
	applied := map[string]int{} // action id -> index in o.Applied; -1 once reverted
	for _, r := range recs {
		if r.Action != recon.AuditAction {
			continue
		}
		if o == nil {
			o = &recon.Outcome{CorrelationID: correlationID, PlanID: r.PlanID, Scope: r.Scope}
		}
		if r.Scope != o.Scope || r.PlanID != o.PlanID {
			return nil, &recon.Error{Code: recon.ResultInternal, Detail: fmt.Sprintf("audit trail of %s holds scope %q plan %q and scope %q plan %q",
				correlationID, o.Scope, o.PlanID, r.Scope, r.PlanID)}
		}
		switch r.Outcome {
		case recon.AuditApplied:
			if r.Legacy {
				return nil, &recon.Error{Code: recon.ResultInternal, Detail: fmt.Sprintf(
					"audit record of %s (%s) predates migration 00004 and holds no target: roll it back from its journal (OutcomeOf)", r.ActionID, correlationID)}
			}
			if _, dup := applied[r.ActionID]; dup {
				return nil, &recon.Error{Code: recon.ResultInternal, Detail: fmt.Sprintf("audit trail of %s applies %s twice", correlationID, r.ActionID)}
			}
			applied[r.ActionID] = len(o.Applied)
			o.Applied = append(o.Applied, r.RepairAction())
		case recon.AuditReverted:
			applied[r.ActionID] = -1
		}
	}
	if o == nil {
		return nil, &recon.Error{Code: recon.ResultNothingSelected, Detail: fmt.Sprintf("no %s audit record for correlation id %q", recon.AuditAction, correlationID)}
	}
	kept := o.Applied[:0]
	for _, a := range o.Applied {
		if applied[a.ID] >= 0 {
			kept = append(kept, a)
		}
	}
	o.Applied = kept
	return o, nil
}

// OutcomeOf rebuilds, from the journal, the outcome of the apply with
// correlationID: its plan, scope, and the actions that are applied and not
// reverted, in journal order. A run with no journal entry is an error. It
// reads every writer's rows; RollbackRun reads its own role's only.
func (w *Runner) OutcomeOf(ctx context.Context, correlationID string) (*recon.Outcome, error) {
	return w.outcomeOf(ctx, correlationID, false)
}

// outcomeOf is OutcomeOf; own: only the rows written as the session's role.
func (w *Runner) outcomeOf(ctx context.Context, correlationID string, own bool) (*recon.Outcome, error) {
	entries, err := w.journal.entries(ctx, correlationID, own)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("reconstore: no journal entry for correlation id %q", correlationID)
	}
	o := &recon.Outcome{CorrelationID: correlationID, PlanID: entries[0].PlanID, Scope: entries[0].Scope, Applied: recon.StillApplied(entries)}
	for _, e := range entries {
		o.Journaled = max(o.Journaled, e.Seq)
	}
	return o, nil
}
