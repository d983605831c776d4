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
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/reconstore"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// act runs the one action decideReconciliation chose.
func (r *ProjectionReconciliationReconciler) act(ctx context.Context, s *reconScope) error {
	ctx, cancel := context.WithTimeout(ctx, r.runTimeout())
	defer cancel()
	switch s.decision.action {
	case reconDryRun:
		return r.dryRun(ctx, s)
	case reconApply:
		return r.apply(ctx, s)
	case reconRollback:
		return r.rollback(ctx, s)
	}
	return nil
}

// workflow wires reconstore's workflow for this reconcile. Detection reads
// as the recovery's role; the run records (and, with a repair DSN, the
// rehearsal and every write) go through the repair role when the spec has
// one, else through the recovery's role (which may record runs but whose
// rehearsal of a repair is refused by its grants: wouldSucceed false).
func (r *ProjectionReconciliationReconciler) workflow(ctx context.Context, s *reconScope, approver string, groups []string) (*reconstore.Runner, *store.Store, error) {
	ns, name := s.obj.Namespace, s.obj.Name
	read, err := r.Connections.Store(ctx, reconKey(ns, name, false), s.secrets.dsn)
	if err != nil {
		return nil, nil, err
	}
	st := read
	if s.repairDSN != "" {
		if st, err = r.Connections.Store(ctx, reconKey(ns, name, true), s.repairDSN); err != nil {
			return nil, nil, err
		}
	}
	cl, err := r.Connections.Client(reconKey(ns, name, false), &s.recovery.Spec.Source, s.secrets)
	if err != nil {
		return nil, nil, err
	}
	staleAfter := 5 * time.Minute
	if sa := s.obj.Spec.StaleAfter; sa != nil && sa.Duration > 0 {
		staleAfter = sa.Duration
	}
	log := redactingLogger(logf.FromContext(ctx).WithName("reconciliation"), s.redact) // its errors can echo a DSN
	wf, err := reconstore.NewRunner(reconstore.RunnerConfig{
		Store:      st,
		ReadPool:   read.Pool(),
		Source:     cl,
		Permission: &sarPermission{c: r.Client, namespace: ns, name: name, approver: approver, groups: groups, serviceAccounts: r.ApproverServiceAccounts},
		Clock:      r.Clock.Now,
		StaleAfter: staleAfter,
		// The read's own deadline is the run's: one bound, one flag.
		MaxSnapshotRecords: r.MaxSnapshotRecords,
		SnapshotDeadline:   r.runTimeout(),
		// trigger_cycle asks the recovery controller for a cycle now.
		TriggerCycle: func(ctx context.Context, _ string) error { return r.touchRecovery(ctx, s, "") },
		Publish:      r.Connections.Republish(),
		Publisher:    r.Connections.PublisherStatus,
		Log:          log,
		Telemetry:    r.Telemetry.WithLog(log),
	})
	return wf, st, err
}

// dryRun reports and plans; it never applies (a schedule only ever lands here).
func (r *ProjectionReconciliationReconciler) dryRun(ctx context.Context, s *reconScope) error {
	st := &s.obj.Status
	wf, _, err := r.workflow(ctx, s, "", nil)
	if err != nil {
		st.RunState, st.LastRunAt, s.runError = recoveryv1.RunFailed, nowTime(r.Clock.Now()), redact(err.Error(), s.secrets)
		return nil
	}
	d, err := wf.DryRunWith(ctx, s.recovery.Spec.Scope, recon.DryRunOptions{Pace: dryRunPace(&s.obj.Spec, r.DetectCPU)})
	st.LastRunAt = nowTime(r.Clock.Now())
	if d != nil && d.DryRunResult != nil {
		st.RunState = recoveryv1.ReconciliationRunState(d.Run.Phase)
	}
	if err != nil || d == nil || d.Report == nil || d.Plan == nil {
		// No report on a failure: never show (or apply) a partial one. The
		// previous report and plan stay; runState says they are not fresh.
		st.RunState = recoveryv1.RunFailed
		if err != nil {
			s.runError = redact(err.Error(), s.secrets)
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			s.runError = fmt.Sprintf("the dry run did not finish within its deadline (%s, --reconciliation-timeout): %s", r.runTimeout(), s.runError)
		}
		s.stallReason, s.stallMessage = tooLargeStall(err, s.runError)
		return nil
	}
	st.Report = reportSummary(d.Report)
	st.Plan = planSummary(d.Plan, d.Report, preflight(d.Plan, (&reconstore.Handlers{}).Registry(), s.repairDSN != "", r.Connections.NATS != nil))
	st.Plan.Binding = s.binding
	r.Metrics.observeReport(s.obj, s.recovery.Spec.Scope, d.Report)
	return nil
}

// dryRunPace is the pace of a dry run of spec: a scheduled one's detection
// (spec.schedule, which every --reconcile-every reconciliation has) takes
// at most share of one CPU, so a dry run every minute leaves the live path
// its cores; one a person asked for (no schedule) runs unpaced, since
// someone is waiting for its answer. The pacer measures real time, never
// the reconciler's injected clock.
func dryRunPace(spec *recoveryv1.ProjectionReconciliationSpec, share float64) recon.Pace {
	if spec.Schedule == nil {
		return recon.Pace{}
	}
	return recon.Pace{Share: share}
}

// tooLargeStall is the Stalled reason and message of a dry run refused
// snapshot_too_large ("" when err is not one): the same read would be
// refused again, so only a person helps (fix the bulk drift, raise the
// bounds, or run the reconciliation elsewhere). A paced detection that
// would end past the deadline has its own reason: its fix is a flag.
func tooLargeStall(err error, runError string) (reason, message string) {
	switch {
	case recon.IsPacedPastDeadline(err):
		return ReasonDetectionPacedPastDeadline, "the scheduled dry run's detection would not finish within the run's deadline, even unpaced: " + runError
	case recon.CodeOf(err) == recon.ResultSnapshotTooLarge:
		return ReasonSnapshotTooLarge, "the scope is too large to reconcile within this manager's bounds: " + runError
	}
	return "", ""
}

// apply executes spec.approval against the plan status shows (read back as
// it was stored by its dry run). Confirm is the approval's planId: a wrong
// one is refused by the workflow (confirmation_required), nothing written.
func (r *ProjectionReconciliationReconciler) apply(ctx context.Context, s *reconScope) error {
	ap := s.obj.Spec.Approval
	prev := s.obj.Status.Outcome
	out := &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: ap.PlanID, Approver: ap.Approver, At: nowTime(s.now)}
	s.obj.Status.Outcome = out
	if s.repairDSN == "" {
		out.Result, out.Message = resultRefused, "spec.repairDsnSecretRef is required to apply: without it the resource reports and plans only"
		return nil
	}
	if res, msg, err := r.guardApproval(ctx, s, ap.Approver, ap.Binding); err != nil || res != "" {
		out.Result, out.Message = res, msg
		return err
	}
	wf, st, err := r.workflow(ctx, s, ap.Approver, ap.ApproverGroups)
	if err != nil {
		out.Result, out.Message = string(recon.ResultSnapshotUnavailable), err.Error() // computeStatus redacts and bounds every message
		return nil
	}
	plan, err := storedPlan(ctx, st, s.recovery.Spec.Scope, s.obj.Status.Plan.PlanID)
	if err != nil {
		out.Result, out.Message = resultRefused, err.Error()
		return nil
	}
	opt := recon.ApplyOptions{Principal: ap.Approver, Confirm: ap.PlanID, Only: ap.Only,
		AllowIrreversible: ap.AllowIrreversible, MaxActions: int(ap.MaxActions)}
	if first, n := notShown(plan, opt); n > 0 {
		out.Result, out.Message = resultNotShown, fmt.Sprintf("%d selected action(s) were not shown in status.plan.items (first %s): "+
			"approve what status shows with spec.approval.only, then the next dry run shows the rest; nothing written", n, first)
		return nil
	}
	o, err := wf.Apply(ctx, plan, opt)
	fillApplyOutcome(out, o, err)
	waitForLease(prev, out, s.now)
	if out.Result == resultOK {
		return r.repairedThen(ctx, s, out.CorrelationID)
	}
	return nil
}

// rollback reverts the apply spec.rollback names, from its audit trail
// (cross-checked against the journal), under the scope's lease: at most
// spec.rollback.maxActions actions (blast_radius_exceeded), and only from
// rows the repair role wrote (records_untrusted).
func (r *ProjectionReconciliationReconciler) rollback(ctx context.Context, s *reconScope) error {
	rb := s.obj.Spec.Rollback
	last := s.obj.Status.Outcome
	out := &recoveryv1.OutcomeSummary{Operation: opRollback, CorrelationID: rb.CorrelationID, Approver: rb.Approver, At: nowTime(s.now)}
	if prev := s.obj.Status.Outcome; prev != nil && prev.CorrelationID == rb.CorrelationID {
		out.PlanID = prev.PlanID
	}
	s.obj.Status.Outcome = out
	if s.repairDSN == "" {
		out.Result, out.Message = resultRefused, "spec.repairDsnSecretRef is required to roll back"
		return nil
	}
	if res, msg, err := r.guardApproval(ctx, s, rb.Approver, rb.Binding); err != nil || res != "" {
		out.Result, out.Message = res, msg
		return err
	}
	wf, _, err := r.workflow(ctx, s, rb.Approver, rb.ApproverGroups)
	if err != nil {
		out.Result, out.Message = string(recon.ResultSnapshotUnavailable), err.Error() // computeStatus redacts and bounds every message
		return nil
	}
	// Bound to this resource's scope: spec.rollback may name a run status
	// never showed (a manager killed mid-apply), so the id is a user's.
	ro, err := wf.RollbackRun(ctx, s.recovery.Spec.Scope, rb.CorrelationID, rb.Approver, int(rb.MaxActions))
	out.Result = resultOK
	if err != nil {
		out.Result, out.Message = string(recon.CodeOf(err)), err.Error()
	}
	if ro != nil {
		if out.PlanID == "" {
			out.PlanID = ro.PlanID
		}
		out.RolledBack, out.RollbackFailed = int32(len(ro.RolledBack)), int32(len(ro.RollbackFailed))
		out.Left = leftSummary(ro.Left())
		if ro.Code != "" {
			out.Result, out.Message = string(ro.Code), ro.Detail
		}
		if ro.WithdrawnThrough > 0 {
			out.Message = strings.TrimSpace(withdrawnMessage(ro.WithdrawnThrough) + " " + out.Message)
		}
	}
	waitForLease(last, out, s.now)
	if out.Result == resultOK || out.Result == resultPartial {
		return r.repairedThen(ctx, s, rb.CorrelationID)
	}
	if ro != nil && ro.WithdrawnThrough > 0 {
		// Some reverts committed and withdrew the certificate: the
		// recovery must re-verify now, not at its next interval, so that
		// its status stops claiming CURRENT at once.
		r.retrigger(ctx, s, rb.CorrelationID)
	}
	return nil
}

// withdrawnMessage tells the approver of a rollback that it withdrew the
// recovery's certificate (store.WithdrawTx).
func withdrawnMessage(through int64) string {
	return fmt.Sprintf("The rollback put records back into the window the recovery had verified (through %d): that verification is withdrawn and the recovery re-verifies from genesis; it refuses again whatever the source contradicts.", through)
}

// repairedThen follows a successful apply or rollback: the recovery is
// re-triggered at once and names this reconciliation,
// then a dry run refreshes the report and plan in the same reconcile.
func (r *ProjectionReconciliationReconciler) repairedThen(ctx context.Context, s *reconScope, correlationID string) error {
	s.repaired = true
	r.retrigger(ctx, s, correlationID)
	return r.dryRun(ctx, s)
}

// retrigger asks the recovery for a cycle now, naming the repair run. The
// repair is done and recorded and the recovery runs at its next interval
// anyway, so a failure is logged, never returned: a retried reconcile could
// not redo the repair, but it would lose this outcome's status write.
func (r *ProjectionReconciliationReconciler) retrigger(ctx context.Context, s *reconScope, correlationID string) {
	if err := r.touchRecovery(ctx, s, correlationID); err != nil {
		logf.FromContext(ctx).Info("could not re-trigger the ProjectionRecovery", "recovery", s.recovery.Name, "err", err.Error())
	}
}

// touchRecovery annotates the ProjectionRecovery: requested-at (its
// predicates pass annotation changes: a cycle runs now) and, after a
// repair, reconciled-by "<name>/<correlation id>".
func (r *ProjectionReconciliationReconciler) touchRecovery(ctx context.Context, s *reconScope, correlationID string) error {
	ann := map[string]string{recoveryv1.AnnotationRequestedAt: r.Clock.Now().UTC().Format(time.RFC3339Nano)}
	if correlationID != "" {
		ann[recoveryv1.AnnotationReconciledBy] = s.obj.Name + "/" + correlationID
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	rec := &recoveryv1.ProjectionRecovery{}
	rec.Namespace, rec.Name = s.recovery.Namespace, s.recovery.Name
	return r.Patch(ctx, rec, client.RawPatch("application/merge-patch+json", patch))
}

// storedPlan reads back the plan a dry run stored with its report
// (reconstore.Runs.StoredPlan), exactly as it was shown.
func storedPlan(ctx context.Context, st *store.Store, scope, planID string) (*recon.Plan, error) {
	return (&reconstore.Runs{Pool: st.Pool()}).StoredPlan(ctx, scope, planID)
}

// sarPermission is recon.Permission on the API server: the approver must be
// allowed the `approve` verb on this ProjectionReconciliation
// (SubjectAccessReview). It fails closed: an error, a denial, an unknown
// answer or a principal other than the spec's approver is not allowed, and
// the workflow answers repair_denied. The review carries the approver's
// groups as recorded (and bound to the requester by the admission policy),
// so a verb granted to a group is honoured; without them a group-bound
// approver would pass admission and then be denied here.
type sarPermission struct {
	c               client.Client
	namespace, name string
	approver        string
	groups          []string
	// serviceAccounts are the service accounts the operator lists; any
	// other is refused (checked before the apply too; here again so no
	// path skips it).
	serviceAccounts []string
}

func (p *sarPermission) Allowed(ctx context.Context, principal string) (bool, error) {
	if principal == "" || principal != p.approver || !serviceAccountMayApprove(p.serviceAccounts, principal) {
		return false, nil
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: principal, Groups: p.groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: p.namespace, Verb: recoveryv1.ApproveVerb, Group: recoveryv1.GroupVersion.Group,
			Resource: "projectionreconciliations", Name: p.name,
		},
	}}
	if err := p.c.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("SubjectAccessReview for %q: %w", principal, err)
	}
	return sar.Status.Allowed && !sar.Status.Denied, nil
}
