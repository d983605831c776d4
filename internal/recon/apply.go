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
	"strconv"
	"time"
)

// ApplyOptions is the approver's explicit input to an apply.
type ApplyOptions struct {
	// Principal is the authenticated approver (from the API server, never a
	// field a user typed); Permission decides whether it may approve.
	Principal string
	// Confirm must echo the plan's PlanID.
	Confirm string
	// Only selects a subset of action ids (empty: all).
	Only []string
	// AllowIrreversible opts in to irreversible actions (excluded otherwise).
	AllowIrreversible bool
	// MaxActions is the blast radius (0: DefaultMaxActions).
	MaxActions int
	// CorrelationID ties audit, journal and telemetry records of the run
	// together ("" derives one from the plan id and the clock).
	CorrelationID string
}

// RollbackFailure is an applied action that could not be reverted.
type RollbackFailure struct {
	Action Action
	Error  string
}

// Outcome is the result of an apply. Code is "" on success; on a guard
// refusal nothing was written; on repair_failed the applied actions were
// reverted newest-first (RolledBack) except RollbackFailed, whose After
// stays in place.
type Outcome struct {
	Code          ResultCode
	Detail        string
	PlanID        string
	Scope         string
	Principal     string
	CorrelationID string

	Selected []Action
	// Ignored lists ids of Only that name no action of the plan (a typo
	// selects less, never more).
	Ignored        []string
	Applied        []Action // journal order
	FailedAction   *Action
	FailedError    string
	RolledBack     []Action
	RollbackFailed []RollbackFailure

	// Verification (success only): finding ids the applied actions targeted,
	// gone (Verified) or still reported (StillDrifting) on a fresh read.
	// VerificationRan is false when that read or its detection failed.
	VerificationRan bool
	Verified        []string
	StillDrifting   []string

	// AuditErrors lists records that could not be written: of refused or
	// failed actions and of reverts (an applied action's lost record fails
	// the apply instead).
	AuditErrors []string
	Telemetry   Telemetry

	// Journaled is the number of journal entries the run holds under its
	// correlation id (positions 1..Journaled). Rollback journals its
	// reverts after them and advances it: a journal keyed by (correlation
	// id, position) would refuse a revert entry at a position the apply
	// used, and the revert, done, would never be journaled.
	Journaled int
}

// applyRun carries one apply.
type applyRun struct {
	w     *Workflow
	plan  *Plan
	out   *Outcome
	start time.Time
	seq   int
}

// Apply executes an approved plan. It never plans in the same call as the
// dry run: it re-plans only to prove the plan still holds. Guards, in the
// specification's order, each returning its code with nothing written:
// repair_denied, confirmation_required, plan_tampered, plan_expired,
// nothing_selected, blast_radius_exceeded, handler_missing,
// snapshot_unavailable, plan_stale. Then the run's Session begins
// (lease_unavailable when it cannot: nothing written); under it, a Journal
// that is also AppliedPlans refuses a plan another run applied meanwhile
// (plan_stale, nothing written but the lease's take and release); each selected action
// in plan order is applied with its journal entry and audit record, in the
// handler's transaction when it has one (StepRecords); on the first failure,
// a handler's or a record's that could not be written, the applied actions
// are reverted newest-first and repair_failed returned: an apply never
// reads ok with a record of its writes missing. After success a fresh
// read verifies; the session ends last. The returned Outcome is never nil; the error is an *Error.
func (w *Workflow) Apply(ctx context.Context, plan *Plan, opt ApplyOptions) (*Outcome, error) {
	start := w.now()
	out := &Outcome{Principal: opt.Principal, CorrelationID: opt.CorrelationID}
	r := &applyRun{w: w, plan: plan, out: out, start: start}
	if plan == nil {
		return r.refuse(ctx, nil, fail(ResultInternal, nil, "nil plan"))
	}
	out.PlanID, out.Scope = plan.PlanID, plan.Scope
	if out.CorrelationID == "" {
		out.CorrelationID = plan.PlanID + "-" + strconv.FormatInt(start.UnixNano(), 36)
	}
	if err := w.validate(true); err != nil {
		return r.refuse(ctx, plan.Actions, fail(ResultInternal, err, "workflow"))
	}
	// 1. repair_denied: an empty principal, a denial or an error fail closed.
	ok, err := false, error(nil)
	if opt.Principal != "" {
		ok, err = w.Permission.Allowed(ctx, opt.Principal)
	}
	if !ok || err != nil {
		return r.refuse(ctx, plan.Actions, fail(ResultRepairDenied, err, "principal %q may not approve repairs", opt.Principal))
	}
	// 2. confirmation_required
	if opt.Confirm == "" || opt.Confirm != plan.PlanID {
		return r.refuse(ctx, plan.Actions, fail(ResultConfirmationNeeded, nil, "confirm must echo the plan id %s", plan.PlanID))
	}
	// 3. plan_tampered: the actions must hash to the fingerprint and the id
	// must bind scope, fingerprint and clock fields.
	if fp := Fingerprint(plan.Actions); fp != plan.Fingerprint || planID(plan.Scope, fp, plan.Created, plan.Expires) != plan.PlanID ||
		plan.Expires.Sub(plan.Created) != PlanTTL {
		return r.refuse(ctx, plan.Actions, fail(ResultPlanTampered, nil, "the plan no longer matches its fingerprint"))
	}
	// 4. plan_expired
	if now := w.now(); now.After(plan.Expires) {
		return r.refuse(ctx, plan.Actions, fail(ResultPlanExpired, nil, "plan expired at %s (now %s)", ts(plan.Expires), ts(now)))
	}
	// 5. nothing_selected
	selected, skipped := selectActions(plan.Actions, opt)
	for _, id := range opt.Only {
		if plan.Action(id) == nil {
			out.Ignored = append(out.Ignored, id)
		}
	}
	if len(selected) == 0 {
		return r.refuse(ctx, plan.Actions, fail(ResultNothingSelected, nil, "only and the irreversible filter left nothing to run"))
	}
	out.Selected = selected
	// 6. blast_radius_exceeded
	maxActions := opt.MaxActions
	if maxActions <= 0 {
		maxActions = DefaultMaxActions
	}
	if len(selected) > maxActions {
		return r.refuse(ctx, plan.Actions, fail(ResultBlastRadius, nil, "%d actions selected, at most %d", len(selected), maxActions))
	}
	// 7. handler_missing
	for _, a := range selected {
		h := w.Handlers[a.Kind]
		if h == nil || (a.Reversible && !canRevert(h)) {
			return r.refuse(ctx, plan.Actions, fail(ResultHandlerMissing, nil, "no handler (or no revert) for %s", a.Kind))
		}
	}
	// 8. snapshot_unavailable
	rd, err := w.open(ctx, plan.Scope)
	if err != nil {
		return r.refuse(ctx, plan.Actions, fail(readCode(ResultSnapshotUnavailable, err), err, "re-read scope %q", plan.Scope))
	}
	// 9. plan_stale: re-plan on the fresh read; every selected action must
	// re-appear with the same target, before and after (clock fields aside).
	// The read ends before any handler runs (its transaction is not held
	// across the writes).
	fresh, err := rd.replan(ctx)
	rd.release()
	if err != nil {
		return r.refuse(ctx, plan.Actions, fail(detectCode(err), err, "re-plan"))
	}
	for _, a := range selected {
		if b := fresh.Action(a.ID); b == nil || b.Kind != a.Kind || !a.Target.equalExcept(b.Target, ClockFields) ||
			!a.Before.equalExcept(b.Before, ClockFields) || !a.After.equalExcept(b.After, ClockFields) {
			return r.refuse(ctx, plan.Actions, fail(ResultPlanStale, nil, "action %s no longer holds on a fresh read: run a new dry run", a.ID))
		}
	}
	// Every guard passed: take the run's session (the scope's write lease)
	// before the first handler, hold it through the last revert.
	hctx, end, err := w.begin(ctx, plan.Scope, out.CorrelationID)
	if err != nil {
		return r.refuse(ctx, plan.Actions, fail(ResultLeaseUnavailable, err, "scope %q: the write lease could not be taken: nothing written, retry", plan.Scope))
	}
	defer end()
	// 10. plan_stale under the lease: the plan was applied by another run
	// since this run's fresh read (see AppliedPlans).
	if ap, ok := w.Journal.(AppliedPlans); ok {
		by, err := ap.AppliedBy(hctx, plan.Scope, plan.PlanID)
		if err != nil {
			return r.refuse(hctx, plan.Actions, fail(ResultSnapshotUnavailable, err, "read the runs of plan %s under the lease", plan.PlanID))
		}
		if by != "" {
			return r.refuse(hctx, plan.Actions, fail(ResultPlanStale, nil, "plan %s was applied by run %s since this run's fresh read: run a new dry run", plan.PlanID, by))
		}
	}
	// The records of the actions left out come first: one that cannot be
	// written stops the run before its first write, since an apply never
	// reads ok with a record missing.
	for _, s := range skipped {
		if err := r.audit(hctx, s.action, AuditRefused, "", s.reason); err != nil {
			return r.stop(hctx, fail(ResultRepairFailed, err, "the audit record of %s (not selected) could not be written: nothing written", s.action.ID))
		}
	}
	return r.execute(hctx, selected)
}

func (w *Workflow) now() time.Time {
	if w.Clock == nil {
		return time.Time{}
	}
	return w.Clock()
}

func (r *scopeRead) replan(ctx context.Context) (*Plan, error) {
	rep, err := r.detect(ctx)
	if err != nil {
		return nil, err
	}
	return PlanRepairs(rep, r.snap)
}

type skippedAction struct {
	action Action
	reason string
}

// selectActions applies Only and the irreversible opt-in, keeping plan order.
func selectActions(actions []Action, opt ApplyOptions) ([]Action, []skippedAction) {
	only := map[string]bool{}
	for _, id := range opt.Only {
		only[id] = true
	}
	var sel []Action
	var skip []skippedAction
	for _, a := range actions {
		switch {
		case len(only) > 0 && !only[a.ID]:
			skip = append(skip, skippedAction{a, "not selected by only"})
		case !a.Reversible && !opt.AllowIrreversible:
			skip = append(skip, skippedAction{a, "irreversible: allowIrreversible not set"})
		default:
			sel = append(sel, a)
		}
	}
	return sel, skip
}

// refuse audits every action as refused with the guard's code and returns
// the refusal. Nothing was written.
func (r *applyRun) refuse(ctx context.Context, actions []Action, e *Error) (*Outcome, error) {
	r.out.Code, r.out.Detail = e.Code, e.Error()
	if r.w.Auditor != nil {
		for _, a := range actions {
			_ = r.audit(ctx, a, AuditRefused, e.Code, e.Detail) // listed in AuditErrors
		}
	}
	r.finish()
	r.w.Log.Info("reconciliation apply refused", "plan", r.out.PlanID, "correlationID", r.out.CorrelationID, "code", e.Code, "detail", e.Detail)
	return r.out, e
}

// stop ends a run that wrote nothing with e, its records written already.
func (r *applyRun) stop(ctx context.Context, e *Error) (*Outcome, error) {
	r.out.Code, r.out.Detail = e.Code, e.Error()
	r.finish()
	r.w.Log.Info("reconciliation apply stopped", "plan", r.out.PlanID, "correlationID", r.out.CorrelationID, "code", e.Code, "detail", e.Error())
	return r.out, e
}

// record is the audit record of a, with every field a revert reads.
func (r *applyRun) record(a Action, outcome string, code ResultCode, reason string) AuditRecord {
	return AuditRecord{Action: AuditAction, CorrelationID: r.out.CorrelationID, PlanID: r.out.PlanID, Scope: r.out.Scope,
		Principal: r.out.Principal, ActionID: a.ID, Kind: a.Kind, Outcome: outcome, Code: code, Reason: reason,
		Target: a.Target.clone(), Before: a.Before.clone(), After: a.After.clone(), LifecycleEvent: a.LifecycleEvent,
		Reversible: a.Reversible, Risk: a.Risk, Rollback: a.Rollback, At: r.w.now()}
}

// audit writes a record of a step that wrote nothing (refused, failed,
// revert failed); a lost one is listed in AuditErrors, logged and returned.
func (r *applyRun) audit(ctx context.Context, a Action, outcome string, code ResultCode, reason string) error {
	err := r.w.Auditor.Audit(context.WithoutCancel(ctx), r.record(a, outcome, code, reason))
	if err != nil {
		r.lost(err, a, outcome)
	}
	return err
}

func (r *applyRun) lost(err error, a Action, outcome string) {
	r.out.AuditErrors = append(r.out.AuditErrors, a.ID+": "+err.Error())
	r.w.Log.Error(err, "reconciliation record lost", "action", a.ID, "outcome", outcome, "correlationID", r.out.CorrelationID)
}

func (r *applyRun) journal(ctx context.Context, a Action, event, errText string) error {
	r.seq++
	return r.w.Journal.Append(ctx, JournalEntry{CorrelationID: r.out.CorrelationID, PlanID: r.out.PlanID, Scope: r.out.Scope,
		Seq: r.seq, Event: event, Action: a, Error: errText, At: r.w.now()})
}

// step runs one write of a run (h.Apply or h.Revert) with its records
// (StepRecords) at the run's next journal position. The records commit in
// the handler's transaction when it has one; otherwise they are written
// here, journal entry then audit record. It returns the handler's error
// (nothing of the step recorded, its position free again) or the error of
// the records written here (the write is done: the caller reverts it or
// reports it).
func (r *applyRun) step(ctx context.Context, a Action, event, outcome string, write func(context.Context, Action) error) (handlerErr, recordErr error) {
	rec := &StepRecords{Entry: JournalEntry{CorrelationID: r.out.CorrelationID, PlanID: r.out.PlanID, Scope: r.out.Scope,
		Seq: r.seq + 1, Event: event, Action: a, At: r.w.now()}, Audit: r.record(a, outcome, "", "")}
	if err := write(WithStepRecords(ctx, rec), a); err != nil {
		return err, nil
	}
	r.seq++
	if rec.Written() {
		return nil, nil
	}
	if err := r.w.Journal.Append(ctx, rec.Entry); err != nil {
		return nil, fmt.Errorf("journal %s (%s): %w", a.ID, event, err)
	}
	if err := r.w.Auditor.Audit(context.WithoutCancel(ctx), rec.Audit); err != nil {
		return nil, fmt.Errorf("audit %s (%s): %w", a.ID, outcome, err)
	}
	return nil, nil
}

// execute applies the selected actions in order, each with its journal
// entry and audit record (step); the first failure rolls back; success
// verifies on a fresh read.
func (r *applyRun) execute(ctx context.Context, selected []Action) (*Outcome, error) {
	for i := range selected {
		a := selected[i]
		h := r.w.Handlers[a.Kind]
		if err := ctx.Err(); err != nil {
			return r.rollbackAfter(ctx, a, err, nil)
		}
		herr, rerr := r.step(ctx, a, JournalApplied, AuditApplied, h.Apply)
		if herr != nil {
			return r.rollbackAfter(ctx, a, herr, nil)
		}
		if rerr != nil {
			// Written but not recorded: revert it with the others, since a
			// write the journal does not hold could never be rolled back,
			// and one the audit trail does not hold was never approved as
			// far as anyone reading it can tell.
			return r.rollbackAfter(ctx, a, rerr, &a)
		}
		r.out.Applied = append(r.out.Applied, a)
	}
	r.verify(ctx)
	r.finish()
	r.w.Log.Info("reconciliation apply", "plan", r.out.PlanID, "correlationID", r.out.CorrelationID,
		"applied", len(r.out.Applied), "verified", len(r.out.Verified), "stillDrifting", len(r.out.StillDrifting),
		"verificationRan", r.out.VerificationRan)
	return r.out, nil
}

// rollbackAfter handles the first failure: it reverts every applied
// action newest-first (plus unrecorded, written but its records not all
// written) with a context that survives cancellation, and returns
// repair_failed.
func (r *applyRun) rollbackAfter(ctx context.Context, failed Action, cause error, unrecorded *Action) (*Outcome, error) {
	r.out.FailedAction, r.out.FailedError = &failed, cause.Error()
	_ = r.audit(ctx, failed, AuditFailed, ResultRepairFailed, cause.Error()) // listed in AuditErrors
	rctx := context.WithoutCancel(ctx)
	toRevert := append([]Action{}, r.out.Applied...)
	if unrecorded != nil {
		toRevert = append(toRevert, *unrecorded)
	}
	r.out.RolledBack, r.out.RollbackFailed = revertNewestFirst(rctx, r, toRevert)
	e := fail(ResultRepairFailed, cause, "action %s failed; %d reverted, %d not reverted", failed.ID, len(r.out.RolledBack), len(r.out.RollbackFailed))
	r.out.Code, r.out.Detail = e.Code, e.Error()
	r.finish()
	r.w.Log.Error(cause, "reconciliation apply failed", "plan", r.out.PlanID, "correlationID", r.out.CorrelationID,
		"action", failed.ID, "rolledBack", len(r.out.RolledBack), "rollbackFailed", len(r.out.RollbackFailed))
	return r.out, e
}

// revertNewestFirst reverts actions newest-first; irreversible ones cannot
// be and are reported as failures carrying their rollback text.
func revertNewestFirst(ctx context.Context, r *applyRun, actions []Action) ([]Action, []RollbackFailure) {
	var done []Action
	var failed []RollbackFailure
	for i := len(actions) - 1; i >= 0; i-- {
		a := actions[i]
		var err error
		if !a.Reversible {
			err = &Error{Code: ResultRepairFailed, Detail: "irreversible: " + a.Rollback}
		} else {
			var rerr error
			err, rerr = r.step(ctx, a, JournalReverted, AuditReverted, r.w.Handlers[a.Kind].Revert)
			if err == nil && rerr != nil {
				// Reverted (it cannot be undone now) but not recorded:
				// listed in AuditErrors, so the run does not read ok.
				r.lost(rerr, a, AuditReverted)
			}
		}
		if err != nil {
			failed = append(failed, RollbackFailure{Action: a, Error: err.Error()})
			if jerr := r.journal(ctx, a, JournalRevertFailed, err.Error()); jerr != nil {
				r.lost(jerr, a, JournalRevertFailed)
			}
			_ = r.audit(ctx, a, AuditRevertFailed, ResultRepairFailed, err.Error()) // listed in AuditErrors
			continue
		}
		done = append(done, a)
	}
	return done, failed
}

// verify re-reads and splits the findings the applied actions targeted into
// Verified (gone) and StillDrifting (still reported).
func (r *applyRun) verify(ctx context.Context) {
	rd, err := r.w.open(ctx, r.out.Scope)
	if err != nil {
		r.w.Log.Error(err, "verification read failed", "plan", r.out.PlanID)
		return
	}
	rep, err := rd.detect(ctx)
	rd.release()
	if err != nil {
		r.w.Log.Error(err, "verification detect failed", "plan", r.out.PlanID)
		return
	}
	if rep.Unlisted > 0 {
		// A finding absent from a truncated report may only be unlisted:
		// calling it verified would claim a repair the read cannot show.
		r.w.Log.Info("verification read is truncated: not verified", "plan", r.out.PlanID, "unlisted", rep.Unlisted)
		return
	}
	ids := rep.FindingIDs()
	for _, a := range r.out.Applied {
		for _, id := range a.Findings {
			if ids[id] {
				r.out.StillDrifting = append(r.out.StillDrifting, id)
			} else {
				r.out.Verified = append(r.out.Verified, id)
			}
		}
	}
	r.out.VerificationRan = true
}

// finish builds the run's one telemetry record into the outcome; the
// caller emits it (reconstore.Telemetry.Apply logs and counts it), so the
// record the tests read is the one production emits.
func (r *applyRun) finish() {
	o := r.out
	o.Journaled = r.seq
	planned := 0
	if r.plan != nil {
		planned = len(r.plan.Actions)
	}
	o.Telemetry = Telemetry{Name: TelemetryName, CorrelationID: o.CorrelationID, PlanID: o.PlanID, Scope: o.Scope, Code: o.Code,
		Planned: planned, Selected: len(o.Selected), Applied: len(o.Applied), RolledBack: len(o.RolledBack),
		RollbackFailed: len(o.RollbackFailed), Verified: len(o.Verified), StillDrifting: len(o.StillDrifting),
		VerificationRan: o.VerificationRan, Duration: r.w.now().Sub(r.start)}
}
