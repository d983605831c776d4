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
	"errors"
	"fmt"
	"time"
)

// ResultCode is the stable outcome code of a dry run, an apply or a
// rollback (the specification's Result codes). These are reconciliation's
// own codes, distinct from the catch-up refusal codes of internal/codes.
type ResultCode string

// Result codes, in the order the apply guards check them.
const (
	ResultSnapshotUnavailable ResultCode = "snapshot_unavailable"
	// ResultSnapshotTooLarge: the scope's read exceeded the provider's size
	// cap or its deadline (see ErrSnapshotTooLarge). Not transient: the same
	// read refuses again until the cap, the deadline or the scope changes.
	ResultSnapshotTooLarge   ResultCode = "snapshot_too_large"
	ResultRepairDenied       ResultCode = "repair_denied"
	ResultConfirmationNeeded ResultCode = "confirmation_required"
	ResultPlanTampered       ResultCode = "plan_tampered"
	ResultPlanExpired        ResultCode = "plan_expired"
	ResultNothingSelected    ResultCode = "nothing_selected"
	ResultBlastRadius        ResultCode = "blast_radius_exceeded"
	ResultHandlerMissing     ResultCode = "handler_missing"
	ResultPlanStale          ResultCode = "plan_stale"
	ResultRepairFailed       ResultCode = "repair_failed"
	// ResultLeaseUnavailable: every guard passed, but the scope's write lease
	// could not be taken (the recovery worker or another repair holds it, or
	// the database refused): transient, nothing written; retry.
	ResultLeaseUnavailable ResultCode = "lease_unavailable"
	// ResultCancelled: the context ended before the run did (nothing more written).
	ResultCancelled ResultCode = "cancelled"
	// ResultInternal: a misconfigured workflow or a detection bug; nothing written.
	ResultInternal ResultCode = "internal"
	// ResultPartial: a rollback whose reverts all committed but which left
	// something for a person: irreversible actions still in place (Manual,
	// each with its rollback text: what to do by hand), or a revert whose
	// journal entry or audit record could not be written (AuditErrors).
	// Reading ok instead would tell an approver the repair is undone when
	// it is not.
	ResultPartial ResultCode = "partial"
)

// ErrSnapshotTooLarge marks a provider's refusal to read a scope past its
// size cap or its deadline: the workflow answers snapshot_too_large (the
// provider wraps it with the limit and what it had read). Without its own
// code the refusal would be snapshot_unavailable, which the controller
// retries as transient: every retry would read up to the cap again.
var ErrSnapshotTooLarge = errors.New("snapshot too large")

// Error is a result that is not success: its Code says which guard or step
// refused. Nothing was written unless Code is repair_failed (see Outcome).
type Error struct {
	Code   ResultCode
	Detail string
	Err    error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Detail, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Detail)
}

func (e *Error) Unwrap() error { return e.Err }

// CodeOf maps an error to its result code once: "" for nil, the Error's code,
// ResultCancelled for a cancelled or expired context, ResultInternal otherwise.
func CodeOf(err error) ResultCode {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ResultCancelled
	}
	return ResultInternal
}

func fail(code ResultCode, err error, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...), Err: err}
}

// Handler performs one kind of action, by the specification's rules: go
// through the lifecycle when Action.LifecycleEvent is set; return every
// error (a swallowed one is reported applied); be idempotent; write the
// step's records in its transaction when it has one, MarkWritten once
// committed; Revert restores Before exactly; compare the record with Before
// (Apply) or After (Revert) under the write lock and fail when it differs,
// never overwrite a record that moved. Handlers write under the projection
// write lock and the scope's fenced lease, like a page, and invalidate the
// basis of every key they touch (docs/design/repairs.md, "Handler rules").
type Handler interface {
	Apply(ctx context.Context, a Action) error
	Revert(ctx context.Context, a Action) error
}

// Reverter is optionally implemented by a Handler that may lack a revert;
// a reversible kind whose handler answers false is handler_missing.
type Reverter interface {
	CanRevert() bool
}

// Handlers registers one handler per kind.
type Handlers map[ActionKind]Handler

// ErrNoRevert is returned by HandlerFuncs.Revert without a RevertFunc.
var ErrNoRevert = errors.New("recon: handler has no revert")

// HandlerFuncs adapts functions to Handler. A nil RevertFunc means the
// handler cannot revert (CanRevert false).
type HandlerFuncs struct {
	ApplyFunc  func(ctx context.Context, a Action) error
	RevertFunc func(ctx context.Context, a Action) error
}

func (h HandlerFuncs) Apply(ctx context.Context, a Action) error {
	if h.ApplyFunc == nil {
		return errors.New("recon: handler has no apply")
	}
	return h.ApplyFunc(ctx, a)
}

func (h HandlerFuncs) Revert(ctx context.Context, a Action) error {
	if h.RevertFunc == nil {
		return ErrNoRevert
	}
	return h.RevertFunc(ctx, a)
}

// CanRevert reports whether RevertFunc is set.
func (h HandlerFuncs) CanRevert() bool { return h.RevertFunc != nil }

func canRevert(h Handler) bool {
	if r, ok := h.(Reverter); ok {
		return r.CanRevert()
	}
	return true
}

// Permission answers whether a principal may approve (apply or roll back) a
// repair. In the operator it is backed by a SubjectAccessReview of the
// `approve` verb on the resource, checked by the API server, never trusted
// from a field. An unknown principal or an error fails closed.
type Permission interface {
	Allowed(ctx context.Context, principal string) (bool, error)
}

// PermissionFunc adapts a function to Permission.
type PermissionFunc func(ctx context.Context, principal string) (bool, error)

func (f PermissionFunc) Allowed(ctx context.Context, principal string) (bool, error) {
	return f(ctx, principal)
}

// Journal events.
const (
	JournalApplied      = "applied"
	JournalReverted     = "reverted"
	JournalRevertFailed = "revert_failed"
)

// JournalEntry is one journaled step of an apply or a rollback.
type JournalEntry struct {
	CorrelationID string
	PlanID        string
	Scope         string
	Seq           int // order within the run
	Event         string
	Action        Action
	Error         string
	At            time.Time
}

// Journal persists the steps of a repair, so a crashed apply is inspectable
// and can be rolled back from the journal alone. An Append error stops the
// apply and rolls back. A step's entry reaches the journal either in its
// handler's transaction (StepRecords) or through Append after the handler
// returned.
type Journal interface {
	Append(ctx context.Context, e JournalEntry) error
}

// AppliedPlans is an optional extension of a Journal: the correlation id
// of a run of scope that applied planID and has an applied action not
// reverted since ("" when there is none). Apply asks it under the run's
// session, after the lease is taken. Without it, two approvals of one plan
// reaching the write path at once (two managers reconciling the same
// approval) both pass every guard on their own fresh reads, then serialize
// on the lease, and the second runs the plan again over the first's result:
// its compare-and-write handlers find every action done and write nothing,
// but the journal and the audit trail record a second apply of one
// approval, and a rollback of either run reverts the repair the other
// still claims. A run whose actions were all reverted does not count: its
// plan may be applied again.
type AppliedPlans interface {
	AppliedBy(ctx context.Context, scope, planID string) (correlationID string, err error)
}

// JournalReader is an optional extension of a Journal: a run's entries in
// order. Rollback reads them under the run's session and reverts only the
// actions StillApplied finds. Without it, two rollbacks of one run at once
// (two managers executing one spec.rollback) both take the run's actions
// from their own reads, and the second, once it has the lease, reverts
// again what the first reverted: nothing changes in the rows, but the audit
// trail records every action reverted twice.
type JournalReader interface {
	Entries(ctx context.Context, correlationID string) ([]JournalEntry, error)
}

// StillApplied folds one run's journal entries into its actions applied and
// not reverted since, in the order they were applied (a revert_failed entry
// leaves its action applied).
func StillApplied(entries []JournalEntry) []Action {
	reverted := map[string]bool{}
	for _, e := range entries {
		if e.Event == JournalReverted {
			reverted[e.Action.ID] = true
		}
	}
	var applied []Action
	for _, e := range entries {
		if e.Event == JournalApplied && !reverted[e.Action.ID] {
			applied = append(applied, e.Action)
		}
	}
	return applied
}

// AuditAction is the audit action of every repair record.
const AuditAction = "reconciliation.repaired"

// Audit outcomes.
const (
	AuditApplied      = "applied"
	AuditReverted     = "reverted"
	AuditRevertFailed = "revert_failed"
	AuditFailed       = "failed"
	AuditRefused      = "refused"
)

// AuditRecord is one reconciliation.repaired record: one per applied,
// reverted or refused action, with primitive before/after context and the
// run's correlation id. It carries every part of the action a handler's
// Revert reads (Target, Before and After with their absence: nil is an
// absent record, never an empty one, Reversible, and the Rollback text an
// irreversible action is returned with), so a successful apply can be rolled
// back from the audit trail alone (the specification's "rolling back
// without the outcome object"); without Target the record would name what
// changed but not where, and no handler could restore it.
type AuditRecord struct {
	Action         string // AuditAction
	CorrelationID  string
	PlanID         string
	Scope          string
	Principal      string
	ActionID       string
	Kind           ActionKind
	Outcome        string
	Code           ResultCode // why it was refused or failed
	Reason         string
	Target         Fields
	Before         Fields
	After          Fields
	LifecycleEvent string
	Reversible     bool
	Risk           Risk
	Rollback       string
	At             time.Time
}

// RepairAction is the action r audits, as a handler reverts it: every field
// but Findings (the finding ids are the report's, not the record's).
func (r AuditRecord) RepairAction() Action {
	return Action{ID: r.ActionID, Kind: r.Kind, Target: r.Target.clone(), Before: r.Before.clone(), After: r.After.clone(),
		LifecycleEvent: r.LifecycleEvent, Reversible: r.Reversible, Risk: r.Risk, Rollback: r.Rollback}
}

// SameRepair reports whether a and b are the same repair in every field a
// handler reads (Findings aside): what a rollback from the audit trail
// checks against the journal before it reverts anything.
func SameRepair(a, b Action) bool {
	return a.ID == b.ID && a.Kind == b.Kind && a.Target.Equal(b.Target) && a.Before.Equal(b.Before) && a.After.Equal(b.After) &&
		a.LifecycleEvent == b.LifecycleEvent && a.Reversible == b.Reversible && a.Risk == b.Risk && a.Rollback == b.Rollback
}

// Auditor receives audit records. The record of an applied or reverted
// action is written with its journal entry: in the handler's transaction
// when the handler has one (StepRecords), else right after the journal
// entry. Its error on an applied action is the apply's failure, like an
// Append error: the action is reverted with the others and the apply
// answers repair_failed, never ok with the record missing (a rollback
// from the audit trail, reconstore's RollbackRun, would find the trail and
// the journal disagreeing and refuse). Errors on the records of refused,
// failed or revert-failed actions, which wrote nothing, are reported in
// the outcome (AuditErrors).
type Auditor interface {
	Audit(ctx context.Context, r AuditRecord) error
}

// StepRecords are the journal entry and the audit record of one step of a
// run (an action applied, or reverted), handed to its handler through the
// context (WithStepRecords). A handler that writes in a database
// transaction writes both in that transaction, before COMMIT, and calls
// MarkWritten once it has committed: the write and its records then commit
// together or not at all, so a crash between them can leave neither a
// write nobody recorded nor a record of a write that never happened. A
// handler that does not (no transaction: trigger_cycle; a handler of
// another deployment) leaves them, and the workflow writes them after it
// returns (Journal.Append, then Auditor.Audit), failing the step when
// either fails. A handler whose action is already done (its After in place:
// a write nothing) still writes them: the step happened in this run.
type StepRecords struct {
	Entry   JournalEntry
	Audit   AuditRecord
	written bool
}

// MarkWritten: both records committed with the handler's transaction.
func (s *StepRecords) MarkWritten() { s.written = true }

// Written reports whether the handler committed both records.
func (s *StepRecords) Written() bool { return s.written }

type stepRecordsKey struct{}

// WithStepRecords hands s to the handler called with the returned context.
func WithStepRecords(ctx context.Context, s *StepRecords) context.Context {
	return context.WithValue(ctx, stepRecordsKey{}, s)
}

// StepRecordsFrom returns the records of the step ctx runs (nil outside
// one: a dry run's rehearsal, a test calling a handler directly).
func StepRecordsFrom(ctx context.Context) *StepRecords {
	s, _ := ctx.Value(stepRecordsKey{}).(*StepRecords)
	return s
}

// TelemetryName is the name of the one record each apply run emits
// (Outcome.Telemetry; the caller of Apply emits it).
const TelemetryName = "reconciliation.repair"

// Telemetry is one record per apply run.
type Telemetry struct {
	Name            string
	CorrelationID   string
	PlanID          string
	Scope           string
	Code            ResultCode // "" on success
	Planned         int
	Selected        int
	Applied         int
	RolledBack      int
	RollbackFailed  int
	Verified        int
	StillDrifting   int
	VerificationRan bool
	Duration        time.Duration
}
