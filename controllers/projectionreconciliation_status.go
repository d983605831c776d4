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
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// Bounds of the status summaries (the CRD's MaxItems).
const (
	maxTopFindings  = 50
	maxByInvariant  = 64
	maxCauseLength  = 1024
	maxIDLength     = 512
	maxStatusString = 128
)

// computeStatus folds the reconcile into obj.Status (in memory only). It
// is the one place this reconcile's messages are finalised: whichever path
// set the outcome's message (a workflow error, a guard, a refusal's
// detail), the report's cause lines and the conditions are redacted of
// every secret the object references (the repair DSN included), then
// bounded. Paths set messages raw: bounding first could cut a secret in two
// and leave a half that redaction no longer recognises.
func (r *ProjectionReconciliationReconciler) computeStatus(s *reconScope) {
	obj := s.obj
	st := &obj.Status
	if s.waiting == "" {
		st.ObservedGeneration = obj.Generation // a wait evaluated nothing of the spec
	}
	if o := st.Outcome; o != nil {
		o.Message = truncate(s.redact(o.Message))
	}
	redactView(st, s.redact)
	if s.stallReason == "" && s.decision.action == reconNothing && st.RunState == recoveryv1.RunFailed {
		// A too-large scope stays Stalled until its next dry run says otherwise.
		if c := meta.FindStatusCondition(st.Conditions, recoveryv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue && tooLargeReason(c.Reason) {
			s.stallReason, s.stallMessage = c.Reason, c.Message
		}
	}
	set := reconConditions(&obj.Spec, st, s.stallReason, s.stallMessage)
	if s.waiting != "" && s.stallReason == "" {
		set = conditionSet{metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, ReasonWaitingForCatchUp, s.waiting}
	}
	if set.reason == ReasonRunFailed && s.runError != "" {
		set.message = "the last dry run failed; retrying: " + s.runError
	}
	set.message = truncate(s.redact(set.message))
	applyConditions(&st.Conditions, set, obj.Generation, metav1.NewTime(s.now.Truncate(time.Second)))
}

// writeStatus writes status once, only when it changed, with the optimistic
// lock of the read. An apply's or rollback's outcome must land (it stops a
// resync from executing the approval again): a conflict is retried on a
// fresh read of the same object (same UID), never of one recreated under
// its name, and a refusal never replaces an outcome another writer
// recorded since the read (outcomeSuperseded).
func (r *ProjectionReconciliationReconciler) writeStatus(ctx context.Context, before, after *recoveryv1.ProjectionReconciliation, mustLand bool) error {
	if equality.Semantic.DeepEqual(before.Status, after.Status) {
		return nil
	}
	err := r.Status().Update(ctx, after)
	for i := 0; mustLand && apierrors.IsConflict(err) && i < 5; i++ {
		fresh := &recoveryv1.ProjectionReconciliation{}
		if gerr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(after), fresh); gerr != nil {
			return gerr
		}
		if fresh.UID != after.UID {
			return apierrors.NewNotFound(recoveryv1.GroupVersion.WithResource("projectionreconciliations").GroupResource(), after.Name)
		}
		if outcomeSuperseded(before.Status.Outcome, fresh.Status.Outcome, after.Status.Outcome) {
			logf.FromContext(ctx).Info("not writing a refusal over the outcome another writer recorded since this reconcile read the object",
				"refusal", after.Status.Outcome.Result, "recorded", outcomeResult(fresh.Status.Outcome))
			return nil
		}
		fresh.Status = *after.Status.DeepCopy()
		err = r.Status().Update(ctx, fresh)
		if err == nil {
			after.ResourceVersion = fresh.ResourceVersion
		}
	}
	if err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	return nil
}

// outcomeSuperseded: another writer (a second manager: the reconciliation
// controller runs in every one, no leader election needed) recorded an
// outcome since this reconcile read the object (fresh differs from read),
// and this reconcile's own outcome is not a success. Both acted on the
// same approval; SQL let at most one apply (the lease, the plan's state),
// so the other's outcome is the truth or at least as new, and a refusal
// writes nothing that status would have to report. Writing it anyway
// would replace a recorded success, with its refreshed report and plan,
// by a refusal: status would say the repair did not happen when it did.
// A success always lands (it is what stops the approval being executed
// again). Pure; table-tested.
func outcomeSuperseded(read, fresh, ours *recoveryv1.OutcomeSummary) bool {
	if ours == nil || ours.Result == resultOK {
		return false
	}
	return !equality.Semantic.DeepEqual(read, fresh)
}

func outcomeResult(o *recoveryv1.OutcomeSummary) string {
	if o == nil {
		return ""
	}
	return o.Operation + " " + o.Result
}

// publish emits the events of what status now says: findings of a fresh
// report, an apply or rollback outcome, a stall.
func (r *ProjectionReconciliationReconciler) publish(s *reconScope, before *recoveryv1.ProjectionReconciliation) {
	if r.Recorder == nil {
		return
	}
	st := &s.obj.Status
	// A wait for the lease is no outcome yet: its retries publish nothing.
	if o := st.Outcome; o != nil && o.Result != resultWaiting && !equality.Semantic.DeepEqual(before.Status.Outcome, o) {
		typ, reason := corev1.EventTypeNormal, ReasonRepaired
		if o.Operation == opRollback {
			reason = ReasonRolledBack
		}
		if o.Result != resultOK {
			typ, reason = corev1.EventTypeWarning, refusalReason(o.Result)
		}
		r.event(s, s.recovery, typ, reason, o.Operation, fmt.Sprintf("%s %s (correlation %s, applied %d, rolled back %d, verified %d, still drifting %d): %s",
			o.Operation, o.Result, o.CorrelationID, o.Applied, o.RolledBack, o.Verified, o.StillDrifting, o.Message))
	}
	if rep := st.Report; rep != nil && rep.Findings > 0 && s.decision.action != reconNothing && st.RunState == recoveryv1.RunReported {
		cause := ""
		if len(rep.Top) > 0 {
			cause = rep.Top[0].Invariant + ": " + rep.Top[0].Cause
		}
		plan := ""
		if st.Plan != nil {
			plan = st.Plan.PlanID
		}
		r.event(s, s.recovery, corev1.EventTypeWarning, ReasonDrift, "DryRun", fmt.Sprintf("%d finding(s), clean=%t, plan %s; first: %s", rep.Findings, rep.Clean, plan, cause))
	}
	if s.stallReason != "" && !stalledFor(before, s.stallReason) {
		r.event(s, nil, corev1.EventTypeWarning, s.stallReason, "Resolve", s.stallMessage)
	}
}

// event records an Event about s's object through recordEvent, its note
// redacted of every secret s references: no note of this controller can
// skip the redaction or the API's bound.
func (r *ProjectionReconciliationReconciler) event(s *reconScope, related runtime.Object, typ, reason, action, note string) {
	recordEvent(r.Recorder, s.obj, related, typ, reason, action, note, s.referencedSecrets()...)
}

func stalledFor(obj *recoveryv1.ProjectionReconciliation, reason string) bool {
	for _, c := range obj.Status.Conditions {
		if c.Type == recoveryv1.ConditionStalled && c.Status == metav1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}

// causeLine is a finding's root cause as status shows it: "code (confidence): hint".
func causeLine(rc recon.RootCause) string {
	return truncateTo(fmt.Sprintf("%s (%s): %s", rc.Code, rc.Confidence, rc.Hint), maxCauseLength)
}

// reportSummary bounds a report for status: counts, then the first
// findings whole (findingSummary) within the budget.
func reportSummary(rep *recon.Report) *recoveryv1.ReportSummary {
	out := &recoveryv1.ReportSummary{Clean: rep.Clean, Findings: int32(len(rep.Findings) + rep.Unlisted)}
	for k, n := range rep.ByKind {
		out.ByKind = append(out.ByKind, recoveryv1.CountByName{Name: string(k), Count: int32(n)})
	}
	for inv, n := range rep.ByInvariant {
		out.ByInvariant = append(out.ByInvariant, recoveryv1.CountByName{Name: truncateTo(string(inv), maxStatusString), Count: int32(n)})
	}
	byName := func(c []recoveryv1.CountByName) {
		sort.Slice(c, func(i, j int) bool { return c[i].Name < c[j].Name })
	}
	byName(out.ByKind)
	byName(out.ByInvariant)
	if len(out.ByKind) > 4 {
		out.ByKind = out.ByKind[:4]
	}
	if len(out.ByInvariant) > maxByInvariant {
		out.ByInvariant = out.ByInvariant[:maxByInvariant]
	}
	used := 0
	for i, f := range rep.Findings {
		if i == maxTopFindings {
			break
		}
		fs := findingSummary(f)
		if used += findingSize(fs); used > findingBudgetBytes {
			break
		}
		out.Top = append(out.Top, fs)
	}
	return out
}

// planSummary is a plan as status shows it: its id, fingerprint and
// expiry, the actions an approver may approve shown whole (planItems), the
// manual entries, and the preflight's verdict ("" would succeed).
func planSummary(p *recon.Plan, rep *recon.Report, preflight string) *recoveryv1.PlanSummary {
	return &recoveryv1.PlanSummary{PlanID: p.PlanID, Fingerprint: p.Fingerprint, Expires: ptrTime(p.Expires),
		Actions: int32(len(p.Actions)), Items: planItems(p), Manual: int32(len(p.Manual)), ManualItems: manualItems(p, rep),
		WouldSucceed: preflight == "", Preflight: preflight}
}

// fillApplyOutcome folds the workflow's outcome into the status summary.
// The message is left raw: computeStatus redacts, then bounds it.
func fillApplyOutcome(out *recoveryv1.OutcomeSummary, o *recon.Outcome, err error) {
	out.Result = resultOK
	if err != nil {
		out.Result, out.Message = string(recon.CodeOf(err)), err.Error()
	}
	if o == nil {
		return
	}
	if o.Code != "" {
		out.Result, out.Message = string(o.Code), o.Detail
	}
	out.CorrelationID = o.CorrelationID
	out.Applied, out.RolledBack, out.RollbackFailed = int32(len(o.Applied)), int32(len(o.RolledBack)), int32(len(o.RollbackFailed))
	out.Verified, out.StillDrifting, out.VerificationRan = int32(len(o.Verified)), int32(len(o.StillDrifting)), o.VerificationRan
	out.Left = leftSummary(o.Left())
}

// truncateTo bounds s to n bytes, cutting on a rune boundary: a cut inside
// a multi-byte rune leaves invalid UTF-8, which the JSON encoder rewrites, so
// the status read back would never DeepEqual the one computed and every
// reconcile would write it again. Invalid input is made valid first for the
// same reason.
func truncateTo(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
