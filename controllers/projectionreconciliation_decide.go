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
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/reconstore"
)

// reconAction is what one reconcile of a ProjectionReconciliation does.
type reconAction string

const (
	reconNothing  reconAction = ""
	reconDryRun   reconAction = "dryRun"
	reconApply    reconAction = "apply"
	reconRollback reconAction = "rollback"
)

// Operations recorded in status.outcome.operation.
const (
	opApply    = "apply"
	opRollback = "rollback"
	resultOK   = "ok"
)

// reconRetry is how soon a failed dry run, or an apply refused for a
// transient reason (the recovery worker held the lease, the source could
// not be read), is tried again.
const reconRetry = 30 * time.Second

// reconDecision is the pure decision of one reconcile.
type reconDecision struct {
	action reconAction
	// why is a short key/value-friendly explanation (logs, tests).
	why string
	// requeueAfter schedules the next reconcile when nothing else will
	// (a schedule, a retry); 0: wait for a spec change.
	requeueAfter time.Duration
}

// decideReconciliation chooses at most ONE action from the spec, the status
// and the injected clock (pure). A schedule only dry-runs; an approval runs
// once (status.outcome.planId), a rollback once per run it names (see
// rollbackPending); a refusal is retried only after a spec edit, or alone
// after a transient one that wrote nothing. Without these a resync could
// apply a stale plan twice and undo a fix.
func decideReconciliation(spec *recoveryv1.ProjectionReconciliationSpec, st *recoveryv1.ProjectionReconciliationStatus, generation int64, now time.Time) reconDecision {
	changed := generation != st.ObservedGeneration
	if rb := spec.Rollback; rb != nil {
		switch o := st.Outcome; {
		case rollbackPending(rb, o, changed):
			return reconDecision{action: reconRollback, why: "spec.rollback names a run not rolled back"}
		case o != nil && o.Operation == opRollback && o.CorrelationID == rb.CorrelationID && o.Result == resultWaiting:
			return retryWaiting(reconRollback, o, now)
		case o != nil && o.Operation == opRollback && o.CorrelationID == rb.CorrelationID && transientResult(o.Result):
			// The lease was busy (the recovery worker catching up after
			// the apply, typically): nothing was reverted.
			return retryTransient(reconRollback, o, now)
		}
	}
	if ap := spec.Approval; ap != nil && st.Plan != nil {
		switch o := st.Outcome; {
		case o == nil || o.PlanID != ap.PlanID:
			return reconDecision{action: reconApply, why: "spec.approval not executed yet"}
		case o.Operation == opApply && o.Result != resultOK && changed:
			return reconDecision{action: reconApply, why: "the refused approval was edited (e.g. its approver): trying it again"}
		case o.Operation == opApply && o.Result == resultWaiting:
			return retryWaiting(reconApply, o, now)
		case o.Operation == opApply && transientResult(o.Result):
			return retryTransient(reconApply, o, now)
		}
	}
	if changed {
		return reconDecision{action: reconDryRun, why: "generation changed"}
	}
	if st.RunState == recoveryv1.RunFailed || st.RunState == recoveryv1.RunCancelled {
		if c := meta.FindStatusCondition(st.Conditions, recoveryv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue && tooLargeReason(c.Reason) {
			if !before(now, st.LastRunAt, tooLargeRetry) {
				return reconDecision{action: reconDryRun, why: "the scope was too large to reconcile: trying again"}
			}
			return reconDecision{requeueAfter: until(now, st.LastRunAt, tooLargeRetry), why: "too large to reconcile: waiting"}
		}
		if !before(now, st.LastRunAt, reconRetry) {
			return reconDecision{action: reconDryRun, why: "the last dry run failed: retrying"}
		}
		return reconDecision{requeueAfter: until(now, st.LastRunAt, reconRetry), why: "failed dry run: waiting to retry"}
	}
	if sc := spec.Schedule; sc != nil && sc.Interval.Duration > 0 {
		if !before(now, st.LastRunAt, sc.Interval.Duration) {
			return reconDecision{action: reconDryRun, why: "schedule interval elapsed"}
		}
		return reconDecision{requeueAfter: until(now, st.LastRunAt, sc.Interval.Duration), why: "next scheduled dry run"}
	}
	return reconDecision{why: "nothing to do"}
}

// rollbackPending: the outcome is the successful apply the rollback names,
// or a refused rollback of it that a spec change (a corrected approver)
// asks to try again; or the rollback names a run the outcome does not, and
// the spec just changed. That last case is how a run status never showed is
// rolled back: an apply whose manager was killed after journaling actions
// and before writing status, which an approval can no longer re-run
// (plan_stale names it). It is tried once per spec change, never on a
// resync, and the workflow decides what it reverts from the run's own
// audit trail and journal (nothing_selected when nothing of it, or nothing
// of this scope, is still applied).
func rollbackPending(rb *recoveryv1.ReconciliationRollback, o *recoveryv1.OutcomeSummary, changed bool) bool {
	if o == nil || o.CorrelationID != rb.CorrelationID {
		return changed
	}
	switch o.Operation {
	case opApply:
		return o.Result == resultOK
	case opRollback:
		return o.Result != resultOK && changed
	}
	return false
}

// retryTransient runs action again once reconRetry has passed since the
// transient refusal o recorded, and waits until then before.
func retryTransient(action reconAction, o *recoveryv1.OutcomeSummary, now time.Time) reconDecision {
	if before(now, o.At, reconRetry) {
		return reconDecision{requeueAfter: until(now, o.At, reconRetry), why: "transient " + string(action) + " refusal: waiting to retry"}
	}
	return reconDecision{action: action, why: "the " + string(action) + " was refused for a transient reason: retrying"}
}

// resultWaiting is the outcome of an approved apply or rollback that found
// the scope's lease held: not a failure, a wait. The recovery steps aside
// when it sees it (repairAwaited) and the operation is tried again every
// leaseWaitRetry; after leaseWaitLimit it is lease_unavailable, a transient
// refusal retried at reconRetry.
const resultWaiting = "waiting_for_lease"

const (
	leaseWaitRetry = 2 * time.Second
	leaseWaitLimit = 2 * time.Minute
)

// retryWaiting runs action again leaseWaitRetry after the last attempt.
func retryWaiting(action reconAction, o *recoveryv1.OutcomeSummary, now time.Time) reconDecision {
	if before(now, o.At, leaseWaitRetry) {
		return reconDecision{requeueAfter: until(now, o.At, leaseWaitRetry), why: "waiting for the scope's lease"}
	}
	return reconDecision{action: action, why: "the scope's lease was held: trying again"}
}

// waitForLease turns a lease_unavailable outcome into waiting_for_lease
// while the wait for the same operation is younger than leaseWaitLimit
// (prev is the outcome status showed before this attempt). Pure.
func waitForLease(prev, out *recoveryv1.OutcomeSummary, now time.Time) {
	if out.Result != string(recon.ResultLeaseUnavailable) {
		return
	}
	since := now
	if prev != nil && prev.Result == resultWaiting && prev.Operation == out.Operation && prev.PlanID == out.PlanID &&
		(out.Operation != opRollback || prev.CorrelationID == out.CorrelationID) && prev.WaitingSince != nil {
		since = prev.WaitingSince.Time
	}
	if now.Sub(since) >= leaseWaitLimit {
		return
	}
	out.Result, out.WaitingSince = resultWaiting, nowTime(since)
	out.Message = "the scope's lease is held; the recovery steps aside for an approved repair and this is tried again shortly (nothing written): " + out.Message
}

// transientResult: refusals that pass on their own (nothing was written).
func transientResult(result string) bool {
	switch recon.ResultCode(result) {
	case recon.ResultLeaseUnavailable, recon.ResultSnapshotUnavailable:
		return true
	}
	return false
}

// before reports whether now is earlier than at+d (a nil at is long ago).
func before(now time.Time, at *metav1.Time, d time.Duration) bool {
	return at != nil && now.Before(at.Add(d))
}

// until is how long from now to at+d, at least a second (status times are
// truncated to the second).
func until(now time.Time, at *metav1.Time, d time.Duration) time.Duration {
	if at == nil {
		return time.Second
	}
	return max(time.Second, at.Add(d).Sub(now)+time.Second)
}

// needsHuman: result codes only a human can clear (Stalled).
func needsHuman(result string) bool {
	switch recon.ResultCode(result) {
	case recon.ResultRepairDenied, recon.ResultPlanExpired, recon.ResultPlanStale, recon.ResultConfirmationNeeded,
		recon.ResultPlanTampered, recon.ResultBlastRadius, recon.ResultNothingSelected, recon.ResultRepairFailed, recon.ResultHandlerMissing,
		recon.ResultPartial, reconstore.ResultRecordsUntrusted:
		return true
	}
	switch result {
	case resultRefused, resultPolicyMissing, resultUnbound:
		return true
	}
	return false
}

// resultRefused is the outcome of an apply or rollback the controller could
// not even attempt (no repairDsnSecretRef, no stored plan).
const resultRefused = "refused"

// Condition reasons of a ProjectionReconciliation.
const (
	ReasonReported         = "Reported"
	ReasonDrift            = "DriftFound"
	ReasonRunning          = "Running"
	ReasonRunFailed        = "RunFailed"
	ReasonRepaired         = "Repaired"
	ReasonRolledBack       = "RolledBack"
	ReasonRefused          = "Refused"
	ReasonRecoveryNotFound = "RecoveryNotFound"
	// ReasonApprovalPolicyMissing: an apply or rollback refused because the
	// approval admission policy or its Deny binding is not installed as
	// shipped (approval_policy_missing).
	ReasonApprovalPolicyMissing = "ApprovalPolicyMissing"
	// ReasonApprovalUnbound: an apply or rollback refused because what its
	// approval was given for has changed since (approval_unbound).
	ReasonApprovalUnbound = "ApprovalUnbound"
	// ReasonPartiallyRolledBack: a rollback reverted what it could and left
	// actions in place (status.outcome.left): a person undoes them by hand.
	ReasonPartiallyRolledBack = "PartiallyRolledBack"
	// ReasonSnapshotTooLarge: the last dry run was refused
	// snapshot_too_large (the scope's read or its drift exceeds the
	// manager's bounds); it is retried only after tooLargeRetry or a spec
	// change, not every reconRetry.
	ReasonSnapshotTooLarge = "SnapshotTooLarge"
	// ReasonDetectionPacedPastDeadline: a scheduled dry run's detection
	// estimated its end past the run's deadline even unpaced, and stopped
	// (--reconciliation-timeout); retried as a snapshot_too_large refusal is.
	ReasonDetectionPacedPastDeadline = "DetectionPacedPastDeadline"
)

// tooLargeReason: a Stalled reason whose dry run waits tooLargeRetry.
func tooLargeReason(reason string) bool {
	return reason == ReasonSnapshotTooLarge || reason == ReasonDetectionPacedPastDeadline
}

// tooLargeRetry is how soon a dry run refused snapshot_too_large is tried
// again without a spec change: re-reading up to the cap every reconRetry
// would load the database and the member for a refusal known in advance.
const tooLargeRetry = time.Hour

// refusalReason is the Stalled reason of a refusal only a human can clear.
func refusalReason(result string) string {
	switch result {
	case resultPolicyMissing:
		return ReasonApprovalPolicyMissing
	case resultUnbound:
		return ReasonApprovalUnbound
	case resultPartial:
		return ReasonPartiallyRolledBack
	}
	return ReasonRefused
}

// reconConditions is the kstatus triple of a status (pure). Ready: the last
// report (refreshed after every repair) is clean and without findings.
// Stalled: a missing reference (stallReason), or an apply or rollback
// refusal only a human can clear while the spec still asks for it (editing
// or removing spec.approval / spec.rollback is the human's answer).
// Reconciling: a dry run pending, or failed and retried. A report with
// findings awaiting an approval is neither: settled, not Ready.
func reconConditions(spec *recoveryv1.ProjectionReconciliationSpec, st *recoveryv1.ProjectionReconciliationStatus, stallReason, stallMessage string) conditionSet {
	if stallReason != "" {
		return conditionSet{metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue, stallReason, stallMessage}
	}
	if o := st.Outcome; o != nil && o.Result != resultOK && needsHuman(o.Result) && stillRequested(spec, o) {
		return conditionSet{metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue, refusalReason(o.Result), o.Operation + " " + o.Result + ": " + o.Message}
	}
	switch st.RunState {
	case recoveryv1.RunFailed, recoveryv1.RunCancelled:
		return conditionSet{metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, ReasonRunFailed, "the last dry run failed; retrying"}
	case recoveryv1.RunReported:
	default:
		return conditionSet{metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, ReasonRunning, "a dry run is pending"}
	}
	if r := st.Report; r != nil && r.Clean && r.Findings == 0 {
		if o := st.Outcome; o != nil && o.Operation == opApply && o.Result == resultOK && o.VerificationRan && o.StillDrifting == 0 {
			return conditionSet{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse, ReasonRepaired, "the apply succeeded, its verification found every targeted finding gone, and the next dry run is clean"}
		}
		return conditionSet{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse, ReasonReported, "the projection agrees with the member's verified output"}
	}
	msg := "drift found: approve the plan (spec.approval.planId) or fix it by hand"
	if r := st.Report; r != nil && len(r.Top) > 0 {
		msg = r.Top[0].Invariant + ": " + r.Top[0].Cause + "; " + msg
	}
	if approvalInFlight(spec, st.Outcome) {
		// An approval stands that the controller has yet to execute or is
		// retrying after a transient refusal: Ready=False alone, which
		// kstatus reads as InProgress.
		return conditionSet{metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionFalse, ReasonDrift, msg}
	}
	// Only an approver (or a hand repair) moves this on: Stalled, so kstatus
	// reads Failed and GitOps tools stop waiting (docs/gitops.md).
	return conditionSet{metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue, ReasonDrift, msg}
}

// approvalInFlight: spec.approval names a plan the controller has not
// executed yet, or whose apply it retries (a transient refusal).
func approvalInFlight(spec *recoveryv1.ProjectionReconciliationSpec, o *recoveryv1.OutcomeSummary) bool {
	if spec.Approval == nil {
		return false
	}
	return o == nil || o.Operation != opApply || o.PlanID != spec.Approval.PlanID || transientResult(o.Result) || o.Result == resultWaiting
}

// stillRequested: the spec still asks for the refused operation.
func stillRequested(spec *recoveryv1.ProjectionReconciliationSpec, o *recoveryv1.OutcomeSummary) bool {
	switch o.Operation {
	case opApply:
		return spec.Approval != nil && spec.Approval.PlanID == o.PlanID
	case opRollback:
		return spec.Rollback != nil && spec.Rollback.CorrelationID == o.CorrelationID
	}
	return false
}

// liveVerdict says whether the object a reconcile read from the informer
// cache is the object the API server holds now.
type liveVerdict string

const (
	// liveCurrent: same UID and resourceVersion, not being deleted.
	liveCurrent liveVerdict = "current"
	// liveGone: deleted, being deleted, or replaced by another object of
	// the same name (another UID): its approval or rollback is withdrawn.
	liveGone liveVerdict = "gone"
	// liveBehind: the same object, changed since the cache's copy: the
	// spec (an approval withdrawn or edited) may differ from what was read.
	liveBehind liveVerdict = "behind"
)

// classifyLive compares the cached copy with an uncached read of the same
// name (getErr is that read's error; any error other than NotFound is the
// caller's to return, never a verdict). Pure, table-tested.
func classifyLive(cached, live *recoveryv1.ProjectionReconciliation, notFound bool) liveVerdict {
	switch {
	case notFound, live == nil, live.UID != cached.UID, live.DeletionTimestamp != nil:
		return liveGone
	case live.ResourceVersion != cached.ResourceVersion:
		return liveBehind
	}
	return liveCurrent
}
