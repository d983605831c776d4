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

package recon

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// RollbackManual is an applied action a rollback cannot undo: irreversible,
// with the human rollback text of its strategy.
type RollbackManual struct {
	Action   Action
	Rollback string
}

// LeftAction is an applied action a rollback or a failed apply's
// automatic rollback left in place: what a person must do about it.
type LeftAction struct {
	ID   string
	Kind ActionKind
	// Rollback is the action's human rollback text (what to do by hand).
	Rollback string
	// Error is why its revert failed ("" for an irreversible action,
	// which no revert was attempted for).
	Error string
}

// RollbackOutcome is the result of rolling back a successful apply. The
// drift reappears, which is expected: rollback restores the projection, not
// the truth. Code is "" only when nothing is left: partial when
// irreversible actions stay (Manual) or a revert's record was lost
// (AuditErrors), repair_failed when a revert failed (RollbackFailed).
type RollbackOutcome struct {
	Code           ResultCode
	Detail         string
	CorrelationID  string
	PlanID         string
	RolledBack     []Action
	RollbackFailed []RollbackFailure
	Manual         []RollbackManual
	AuditErrors    []string
	// WithdrawnThrough is the verified-through of the scope's recovery
	// cursor that the reverts withdrew because they put records back into
	// its verified window (the cursor is back at genesis and re-verifies
	// every retained row); 0: nothing withdrawn. Set by the store's
	// workflow (reconstore), which owns the cursor.
	WithdrawnThrough int64
}

// Left lists what the rollback left in place for a person: the
// irreversible actions (Manual), then the reverts that failed.
func (ro *RollbackOutcome) Left() []LeftAction {
	var left []LeftAction
	for _, m := range ro.Manual {
		left = append(left, LeftAction{ID: m.Action.ID, Kind: m.Action.Kind, Rollback: m.Rollback})
	}
	for _, f := range ro.RollbackFailed {
		left = append(left, LeftAction{ID: f.Action.ID, Kind: f.Action.Kind, Rollback: f.Action.Rollback, Error: f.Error})
	}
	return left
}

// Left lists what a failed apply's automatic rollback left in place: the
// actions it could not revert (irreversible ones among them).
func (o *Outcome) Left() []LeftAction {
	var left []LeftAction
	for _, f := range o.RollbackFailed {
		left = append(left, LeftAction{ID: f.Action.ID, Kind: f.Action.Kind, Rollback: f.Action.Rollback, Error: f.Error})
	}
	return left
}

// Rollback reverts a successful apply from its Outcome: reversible actions
// newest-first through their handlers, each with its journal entry and
// audit record (reverted) in the handler's transaction when it has one
// (StepRecords); irreversible ones are returned in Manual with their
// rollback text, and the result is then partial, never ok. It is guarded
// like an apply: the principal must be allowed (repair_denied), the outcome
// must be a successful apply with applied actions (nothing_selected), and
// every reversible action needs a revert (handler_missing), all before the
// first write; then the run's Session begins (lease_unavailable when it
// cannot). Every refusal after the workflow's own validation is audited
// on each applied action of o (refused, with its code), as an apply's
// refusals are. A revert that fails is listed in RollbackFailed and the
// rest continue; the error is then repair_failed.
func (w *Workflow) Rollback(ctx context.Context, o *Outcome, principal string) (*RollbackOutcome, error) {
	ro := &RollbackOutcome{}
	if o != nil {
		ro.CorrelationID, ro.PlanID = o.CorrelationID, o.PlanID
	}
	var r *applyRun
	end := func(e *Error) (*RollbackOutcome, error) {
		ro.Code, ro.Detail = e.Code, e.Error()
		if r != nil && o != nil {
			for _, a := range o.Applied {
				_ = r.audit(ctx, a, AuditRefused, e.Code, "rollback refused: "+e.Detail) // listed in AuditErrors
			}
			ro.AuditErrors = r.out.AuditErrors
		}
		w.Log.Info("reconciliation rollback refused", "plan", ro.PlanID, "correlationID", ro.CorrelationID, "code", e.Code)
		return ro, e
	}
	if err := w.validate(true); err != nil {
		return end(fail(ResultInternal, err, "workflow"))
	}
	ok, err := false, error(nil)
	if principal != "" {
		ok, err = w.Permission.Allowed(ctx, principal)
	}
	r = &applyRun{w: w, out: &Outcome{Principal: principal}, start: w.now()}
	if o != nil {
		r.out.PlanID, r.out.Scope, r.out.CorrelationID = o.PlanID, o.Scope, o.CorrelationID
		// Journal after the entries the run holds already (an outcome made
		// by hand, without Journaled, holds one per applied action).
		r.seq = max(o.Journaled, len(o.Applied))
	}
	if !ok || err != nil {
		return end(fail(ResultRepairDenied, err, "principal %q may not roll back repairs", principal))
	}
	if o == nil || o.Code != "" || len(o.Applied) == 0 {
		return end(fail(ResultNothingSelected, nil, "only a successful apply with applied actions can be rolled back (a failed one was rolled back already)"))
	}
	var reversible []Action
	for _, a := range o.Applied {
		if !a.Reversible {
			ro.Manual = append(ro.Manual, RollbackManual{Action: a, Rollback: a.Rollback})
			continue
		}
		if h := w.Handlers[a.Kind]; h == nil || !canRevert(h) {
			return end(fail(ResultHandlerMissing, nil, "no revert for %s", a.Kind))
		}
		reversible = append(reversible, a)
	}
	if len(reversible) > 0 {
		hctx, endSession, err := w.begin(ctx, r.out.Scope, r.out.CorrelationID)
		if err != nil {
			return end(fail(ResultLeaseUnavailable, err, "scope %q: the write lease could not be taken: nothing reverted, retry", r.out.Scope))
		}
		still, e := w.stillApplied(hctx, r.out.CorrelationID, reversible)
		if e != nil {
			endSession()
			return end(e)
		}
		ro.RolledBack, ro.RollbackFailed = revertNewestFirst(WithRollback(context.WithoutCancel(hctx)), r, still)
		endSession()
		o.Journaled = r.seq
	}
	ro.AuditErrors = r.out.AuditErrors
	w.Log.Info("reconciliation rollback", "plan", ro.PlanID, "correlationID", ro.CorrelationID,
		"rolledBack", len(ro.RolledBack), "rollbackFailed", len(ro.RollbackFailed), "manual", len(ro.Manual),
		"recordsLost", len(ro.AuditErrors), "took", time.Duration(w.now().Sub(r.start)))
	var e *Error
	switch {
	case len(ro.RollbackFailed) > 0:
		e = fail(ResultRepairFailed, nil, "%d actions could not be reverted", len(ro.RollbackFailed))
	case len(ro.Manual) > 0 || len(ro.AuditErrors) > 0:
		e = fail(ResultPartial, nil, "%s", partialDetail(ro))
	default:
		return ro, nil
	}
	ro.Code, ro.Detail = e.Code, e.Error()
	return ro, e
}

// partialDetail says what a partial rollback did and what it left.
func partialDetail(ro *RollbackOutcome) string {
	d := fmt.Sprintf("%d actions reverted", len(ro.RolledBack))
	if n := len(ro.Manual); n > 0 {
		ids := make([]string, 0, n)
		for _, m := range ro.Manual {
			ids = append(ids, m.Action.ID)
		}
		d += fmt.Sprintf("; %d irreversible actions stay in place, undo them by hand as each one's rollback text says: %s", n, strings.Join(ids, ", "))
	}
	if n := len(ro.AuditErrors); n > 0 {
		d += fmt.Sprintf("; %d records of the reverts could not be written: %s", n, strings.Join(ro.AuditErrors, "; "))
	}
	return d
}

// stillApplied keeps, under the run's session, the actions the journal
// still holds as applied and not reverted (JournalReader, StillApplied;
// without it, all of them). None left: the run was rolled back meanwhile,
// nothing_selected and nothing written.
func (w *Workflow) stillApplied(ctx context.Context, correlationID string, actions []Action) ([]Action, *Error) {
	jr, ok := w.Journal.(JournalReader)
	if !ok {
		return actions, nil
	}
	entries, err := jr.Entries(ctx, correlationID)
	if err != nil {
		return nil, fail(ResultSnapshotUnavailable, err, "read the journal of run %s under the lease", correlationID)
	}
	applied := map[string]bool{}
	for _, a := range StillApplied(entries) {
		applied[a.ID] = true
	}
	var keep []Action
	for _, a := range actions {
		if applied[a.ID] {
			keep = append(keep, a)
		}
	}
	if len(keep) == 0 {
		return nil, fail(ResultNothingSelected, nil, "run %s was rolled back meanwhile: nothing of it is applied", correlationID)
	}
	return keep, nil
}

type rollbackKey struct{}

// WithRollback marks ctx as a Rollback's: the reverts undo a successful
// apply on an approver's request (see IsRollback).
func WithRollback(ctx context.Context) context.Context {
	return context.WithValue(ctx, rollbackKey{}, true)
}

// IsRollback tells a handler's Revert that it undoes a successful apply on
// an approver's request (Workflow.Rollback), not a failed apply's automatic
// rollback. The difference matters to what the revert leaves behind: a
// failed apply ends where it began (its actions and their reverts all ran
// under one session, so nothing else observed or certified the repaired
// state), while a rollback may undo a repair the recovery has verified
// since, and must then withdraw that verification (reconstore).
func IsRollback(ctx context.Context) bool {
	v, _ := ctx.Value(rollbackKey{}).(bool)
	return v
}
