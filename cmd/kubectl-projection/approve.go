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

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// whoami asks the API server who the caller is (SelfSubjectReview, the
// answer of `kubectl auth whoami`). The approver written into the spec is
// this answer, never a flag: the admission policy requires approver to equal
// the user making the change, so a typed name could only be refused or, on
// a cluster without the policy, lie.
//
// The groups come from the same answer, in the API server's order: the
// policy requires them to equal the requesting user's, and the controller's
// SubjectAccessReview checks them, so an approve verb granted to a group works.
func (o *options) whoami(ctx context.Context) (string, []string, error) {
	c, err := o.client()
	if err != nil {
		return "", nil, err
	}
	ssr := &authnv1.SelfSubjectReview{}
	if err := c.Create(ctx, ssr); err != nil {
		return "", nil, fmt.Errorf("asking the API server who you are (SelfSubjectReview): %w", err)
	}
	if ssr.Status.UserInfo.Username == "" {
		return "", nil, errors.New("the API server's SelfSubjectReview named no user: cannot approve anonymously")
	}
	return ssr.Status.UserInfo.Username, ssr.Status.UserInfo.Groups, nil
}

// confirm prints prompt and reads one line from in; it must equal want.
// End of input is a refusal, never a yes.
func confirm(in io.Reader, out io.Writer, prompt, want, what string) error {
	fmt.Fprint(out, prompt)
	line, err := bufio.NewReader(in).ReadString('\n')
	if !isTerminalReader(in) {
		fmt.Fprintln(out) // the terminal echoed nothing: end the prompt's line
	}
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		return refused("no confirmation typed: nothing %s", what)
	}
	if got := strings.TrimSpace(line); got != want {
		// want is the object's (esc, as the plan showed it); got was typed here.
		return refused("typed %q, which is not \"%s\": nothing %s", got, esc(want), what)
	}
	return nil
}

// patchSpec writes the spec change with a merge patch carrying the
// resourceVersion that was shown: if the status moved on since (a new plan,
// a new outcome), the API server answers Conflict and nothing is written, so
// an approval always refers to what the user saw. The API server's refusal
// (admission, validation) is returned with its own words.
func (o *options) patchSpec(ctx context.Context, orig, changed *recoveryv1.ProjectionReconciliation, what string) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	patch := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
	if err := c.Patch(ctx, changed, patch); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("ProjectionReconciliation %s changed since it was shown (new plan or outcome?): nothing %s; run the command again", esc(orig.Name), what)
		}
		return fmt.Errorf("the API server refused: %w", err)
	}
	return nil
}

type approveOptions struct {
	*options
	planID            string
	only              []string
	allowIrreversible bool
	shown             bool
	maxActions        int32
}

func newApproveCommand(o *options) *cobra.Command {
	ao := &approveOptions{options: o}
	cmd := &cobra.Command{
		Use:   "approve NAME",
		Short: "Approve the current repair plan as the user the API server authenticates",
		Long: `Show the changes the current plan of a ProjectionReconciliation would make,
each field as before → after, and approve them: type the planId to confirm
(or pass --plan-id for scripts). Only actions status shows can be approved:
a plan larger than what status shows is approved a page at a time
(--shown or --only), and the next dry run shows the rest. The plugin sets
spec.approval {planId, approver} where approver is the user the API server
names through a SelfSubjectReview (what 'kubectl auth whoami' shows), never a
name from the command line. Only a user allowed the 'approve' verb on
projectionreconciliations may do it; the API server's refusal is shown as-is.

The plan must exist, have actions and not be expired (checked here, and
again by the controller at apply time). A pending rollback request is
replaced. The patch carries the resourceVersion that was shown: if a new
plan appeared meanwhile, nothing is approved.

Exit codes: 0 approved, 1 error (incl. the resource changed meanwhile),
2 usage, 3 refused (no/expired plan, wrong planId, or by the API server).`,
		Example: `  kubectl projection approve fix-venue-a
  kubectl projection approve fix-venue-a --plan-id "$(kubectl projection plan fix-venue-a -o json | jq -r .status.plan.planId)"
  kubectl projection approve fix-venue-a --only act-1,act-2 --max-actions 10`,
		Args:              exactlyOneName("ProjectionReconciliation"),
		ValidArgsFunction: completeReconciliations(o),
		RunE:              func(cmd *cobra.Command, args []string) error { return ao.run(cmd.Context(), args[0]) },
	}
	cmd.Flags().StringVar(&ao.planID, "plan-id", "", "Confirm with this planId instead of typing it (scripts); must be the current plan's")
	cmd.Flags().StringSliceVar(&ao.only, "only", nil, "Apply only these action ids (comma-separated; see 'plan')")
	cmd.Flags().BoolVar(&ao.shown, "shown", false, "Apply exactly the actions status shows (a plan too large to show whole is approved a page at a time)")
	cmd.Flags().BoolVar(&ao.allowIrreversible, "allow-irreversible", false, "Include irreversible actions (excluded otherwise)")
	cmd.Flags().Int32Var(&ao.maxActions, "max-actions", 0, "Blast radius: refuse when more actions are selected (1..1000; default: the API default, 50)")
	return cmd
}

func (ao *approveOptions) run(ctx context.Context, name string) error {
	if ao.maxActions < 0 || ao.maxActions > 1000 {
		return usageErr(fmt.Errorf("--max-actions %d is outside 1..1000", ao.maxActions))
	}
	r, err := ao.getReconciliation(ctx, name)
	if err != nil {
		return err
	}
	user, groups, err := ao.whoami(ctx)
	if err != nil {
		return err
	}
	out := ao.streams.Out
	if err := approvable(r, ao.now()); err != nil {
		writePlan(out, r, ao.now())
		return err
	}
	plan := r.Status.Plan
	only, err := selection(ao.only, ao.shown, plan)
	if err != nil {
		return err
	}
	sel := selected(plan, only, ao.allowIrreversible)
	if len(sel) == 0 {
		return refused("nothing selected in plan %s (irreversible actions need --allow-irreversible): nothing approved", esc(plan.PlanID))
	}
	fmt.Fprintf(out, "ProjectionReconciliation %s/%s: plan %s, %d of %d action%s selected\n",
		esc(r.Namespace), esc(r.Name), esc(plan.PlanID), len(sel), plan.Actions, plural(int64(plan.Actions)))
	fmt.Fprintln(out, "You approve these changes (~ changed, + added, - removed):")
	for _, it := range sel {
		writeAction(out, it)
	}
	if plan.Manual > 0 {
		fmt.Fprintf(out, "Not touched: %d finding%s left to a person ('kubectl projection plan %s' lists them).\n", plan.Manual, plural(int64(plan.Manual)), esc(name))
	}
	if !plan.WouldSucceed {
		fmt.Fprintf(ao.streams.ErrOut, "warning: the plan fails its preflight (%s); the apply is expected to fail\n", esc(plan.Preflight))
	}
	if ao.planID != "" {
		if ao.planID != plan.PlanID {
			return refused("--plan-id %q is not the current plan \"%s\": nothing approved (see 'kubectl projection plan %s')", ao.planID, esc(plan.PlanID), esc(name))
		}
	} else if err := confirm(ao.streams.In, out, fmt.Sprintf("Type the planId to approve it as %s: ", esc(user)), plan.PlanID, "approved"); err != nil {
		return err
	}
	changed := r.DeepCopy()
	changed.Spec.Approval = &recoveryv1.ReconciliationApproval{
		PlanID: plan.PlanID, Binding: plan.Binding, Approver: user, ApproverGroups: groups, Only: only,
		AllowIrreversible: ao.allowIrreversible, MaxActions: ao.maxActions,
	}
	if r.Spec.Rollback != nil {
		// approval and rollback cannot coexist (CEL rule): approving replaces it.
		fmt.Fprintf(out, "Replacing the rollback request of %s.\n", esc(r.Spec.Rollback.CorrelationID))
		changed.Spec.Rollback = nil
	}
	if err := ao.patchSpec(ctx, r, changed, "approved"); err != nil {
		return err
	}
	fmt.Fprintf(out, "Approved plan %s as %s. The controller applies it; follow with 'kubectl get projectionreconciliation %s -w'.\n", esc(plan.PlanID), esc(user), esc(name))
	return nil
}

// selection is what the approval's only names: the --only ids, every one
// of them shown in status.plan.items; or, with --shown, every shown item.
// Without either, the whole plan, which must then be shown whole: nobody
// confirms an action they could not read (the controller refuses it too,
// plan_not_shown).
func selection(only []string, shown bool, p *recoveryv1.PlanSummary) ([]string, error) {
	ids := make([]string, 0, len(p.Items))
	for _, it := range p.Items {
		ids = append(ids, it.ID)
	}
	switch {
	case shown && len(only) > 0:
		return nil, usageErr(errors.New("--shown and --only exclude each other"))
	case shown:
		return ids, nil
	case len(only) == 0 && int(p.Actions) > len(p.Items):
		return nil, refused("plan %s has %d actions and status shows %d: approve what is shown (--shown, or --only ids), then the next dry run shows the rest; nothing approved",
			esc(p.PlanID), p.Actions, len(p.Items))
	}
	for _, id := range only {
		if !slices.Contains(ids, id) {
			return nil, refused("--only %q is not an action shown in plan %s: nothing approved", id, esc(p.PlanID))
		}
	}
	return only, nil
}

// selected are the shown items an approval of only would apply, in plan
// order (the controller's rule: only, then the irreversible opt-in).
func selected(p *recoveryv1.PlanSummary, only []string, allowIrreversible bool) []recoveryv1.PlannedAction {
	var out []recoveryv1.PlannedAction
	for _, it := range p.Items {
		if (len(only) == 0 || slices.Contains(only, it.ID)) && (it.Reversible || allowIrreversible) {
			out = append(out, it)
		}
	}
	return out
}

type rollbackOptions struct {
	*options
	yes        bool
	runID      string
	maxActions int32
}

func newRollbackCommand(o *options) *cobra.Command {
	ro := &rollbackOptions{options: o}
	cmd := &cobra.Command{
		Use:   "rollback NAME",
		Short: "Ask to roll back the last successful apply (status.outcome.correlationId)",
		Long: `Ask the controller to roll back the last successful apply of a
ProjectionReconciliation: sets spec.rollback {correlationId, approver} with
the correlation id of status.outcome and, as approver, the user the API
server names through a SelfSubjectReview. Type the correlation id to
confirm, or pass --yes for scripts. A pending approval is replaced. The API
server's refusal is shown as-is.

--run names another run of the resource's scope instead: one status never
showed, such as an apply whose manager was killed after it had applied
actions (an approval of its plan is then refused plan_stale, naming that
run). The controller reverts, under the scope's lease, only what that run
still has applied, as its own audit trail and journal record it; a run of
another scope, or with nothing left applied, is refused nothing_selected.

Exit codes: 0 requested, 1 error (incl. the resource changed meanwhile),
2 usage, 3 refused (no successful apply to roll back, not confirmed, or by
the API server).`,
		Example: `  kubectl projection rollback fix-venue-a
  kubectl projection rollback fix-venue-a --yes --max-actions 10
  kubectl projection rollback fix-venue-a --run plan-0f3c…-k2x9`,
		Args:              exactlyOneName("ProjectionReconciliation"),
		ValidArgsFunction: completeReconciliations(o),
		RunE:              func(cmd *cobra.Command, args []string) error { return ro.run(cmd.Context(), args[0]) },
	}
	cmd.Flags().BoolVarP(&ro.yes, "yes", "y", false, "Do not ask for confirmation (scripts)")
	cmd.Flags().StringVar(&ro.runID, "run", "", "Correlation id of a run status does not show (e.g. one a plan_stale refusal names)")
	cmd.Flags().Int32Var(&ro.maxActions, "max-actions", 0, "Blast radius: refuse when the run has more actions to revert (1..1000; default: the API default, 50)")
	return cmd
}

// rollbackable is rollback's client-side guard: the last outcome must be a
// successful apply with a correlation id.
func rollbackable(r *recoveryv1.ProjectionReconciliation) error {
	oc := r.Status.Outcome
	switch {
	case oc == nil:
		return refused("ProjectionReconciliation %s has applied nothing: nothing to roll back", esc(r.Name))
	case oc.Operation != "apply":
		return refused("the last operation of %s is a %s (result %s), not an apply: nothing to roll back", esc(r.Name), esc(oc.Operation), esc(oc.Result))
	case oc.Result != "ok":
		return refused("the last apply of %s did not succeed (result %s): nothing to roll back", esc(r.Name), esc(oc.Result))
	case oc.CorrelationID == "":
		return refused("the last apply of %s has no correlation id: nothing to roll back", esc(r.Name))
	}
	return nil
}

func (ro *rollbackOptions) run(ctx context.Context, name string) error {
	if ro.maxActions < 0 || ro.maxActions > 1000 {
		return usageErr(fmt.Errorf("--max-actions %d is outside 1..1000", ro.maxActions))
	}
	r, err := ro.getReconciliation(ctx, name)
	if err != nil {
		return err
	}
	user, groups, err := ro.whoami(ctx)
	if err != nil {
		return err
	}
	out := ro.streams.Out
	corr := ro.runID
	if oc := r.Status.Outcome; corr == "" || (oc != nil && oc.CorrelationID == corr) {
		if err := rollbackable(r); err != nil {
			return err
		}
		corr = oc.CorrelationID
		fmt.Fprintf(out, "ProjectionReconciliation %s/%s: last apply %s by %s, %d action%s applied, %d verified, %d still drifting\n",
			esc(r.Namespace), esc(r.Name), esc(corr), esc(orDash(oc.Approver)), oc.Applied, plural(int64(oc.Applied)), oc.Verified, oc.StillDrifting)
	} else {
		fmt.Fprintf(out, "ProjectionReconciliation %s/%s: run %s is not in status; the controller reverts what it still has applied in this scope, as its audit trail and journal record it\n",
			esc(r.Namespace), esc(r.Name), esc(corr))
	}
	fmt.Fprintln(out, "A rollback puts the drift back. What it puts back inside the window the recovery has verified withdraws that verification: the scope re-verifies from genesis and refuses again what the source contradicts.")
	if !ro.yes {
		if err := confirm(ro.streams.In, out, fmt.Sprintf("Type the correlation id to roll it back as %s: ", esc(user)), corr, "requested"); err != nil {
			return err
		}
	}
	changed := r.DeepCopy()
	var binding string
	if p := r.Status.Plan; p != nil {
		binding = p.Binding // what status shows now: the rollback is refused if it changes before it runs
	}
	changed.Spec.Rollback = &recoveryv1.ReconciliationRollback{CorrelationID: corr, Binding: binding, Approver: user, ApproverGroups: groups, MaxActions: ro.maxActions}
	if r.Spec.Approval != nil {
		fmt.Fprintf(out, "Replacing the approval of plan %s.\n", esc(r.Spec.Approval.PlanID))
		changed.Spec.Approval = nil
	}
	if err := ro.patchSpec(ctx, r, changed, "requested"); err != nil {
		return err
	}
	fmt.Fprintf(out, "Rollback of %s requested as %s.\n", esc(corr), esc(user))
	return nil
}
