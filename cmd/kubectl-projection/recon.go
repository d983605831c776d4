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
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// getReconciliation reads one ProjectionReconciliation of the namespace.
func (o *options) getReconciliation(ctx context.Context, name string) (*recoveryv1.ProjectionReconciliation, error) {
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	var r recoveryv1.ProjectionReconciliation
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &r); err != nil {
		return nil, readFailed(fmt.Errorf("reading ProjectionReconciliation %s/%s: %w", ns, name, err))
	}
	return &r, nil
}

// showReconciliation is the body of report and plan: read the object, print
// it (-o json|yaml as the object, else write's text), then the command's
// exit decision.
func (o *options) showReconciliation(cmd *cobra.Command, name, output string,
	write func(io.Writer, *recoveryv1.ProjectionReconciliation, time.Time),
	verdict func(*recoveryv1.ProjectionReconciliation) error) error {
	p, err := printerFor(output)
	if err != nil {
		return err
	}
	r, err := o.getReconciliation(cmd.Context(), name)
	if err != nil {
		return err
	}
	if p != nil {
		if err := p.PrintObj(r, o.streams.Out); err != nil {
			return err
		}
	} else {
		write(o.streams.Out, r, o.now())
	}
	return verdict(r)
}

func newReportCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "report NAME",
		Short: "Show a ProjectionReconciliation's report: clean, counts, each finding with both sides and its cause",
		Long: `Show the last report of a ProjectionReconciliation (status.report): whether the
projection is clean, the number of findings by drift kind and by invariant,
and the findings (the first fifty) each with its invariant, the record as
SQL holds it and as the source proves it, and its root cause (code,
confidence, hint, evidence). Everything is read through the API server.
Then the last apply or rollback (status.outcome): its result (partial: a
rollback that left irreversible actions in place) and every action it left
in place with its rollback text, what a person must still do.

Exit codes:
  0  a report with no finding at all
  1  error: not found, no cluster, network, or the read is forbidden
     (you may not get this ProjectionReconciliation: could not ask)
  2  usage: no NAME or more than one, an unknown flag, a bad -o
  3  any finding (drift, even when "clean", which only means no
     inconsistent finding), or no report yet`,
		Example: `  kubectl projection report fix-venue-a || echo "drift in fix-venue-a"
  kubectl projection report fix-venue-a -o json | jq .status.report`,
		Args:              exactlyOneName("ProjectionReconciliation"),
		ValidArgsFunction: completeReconciliations(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.showReconciliation(cmd, args[0], output, writeReport, func(r *recoveryv1.ProjectionReconciliation) error { return reportVerdict(r) })
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

// reportVerdict is report's exit decision: only a report that exists and
// holds no finding is 0. The report's "clean" follows the specification (no
// inconsistent finding) and can hold missing, stale or duplicate findings,
// e.g. an orphan trade that keeps the scope BLOCKED: a script gating on the
// exit code must not pass on drift. No report yet is not "no drift" either.
func reportVerdict(r *recoveryv1.ProjectionReconciliation) error {
	switch {
	case r.Status.Report == nil:
		return refused("ProjectionReconciliation %s has no report yet (run state %s)", esc(r.Name), esc(orDash(string(r.Status.RunState))))
	case !r.Status.Report.Clean || r.Status.Report.Findings > 0:
		return errSilentRefusal
	default:
		return nil
	}
}

// writeReport prints status.report, then the last apply or rollback
// (status.outcome) for a human; every string of the object goes through esc.
func writeReport(out io.Writer, r *recoveryv1.ProjectionReconciliation, now time.Time) {
	writeReportSummary(out, r, now)
	writeOutcome(out, r.Status.Outcome)
}

// writeOutcome prints the last apply or rollback and, first thing a person
// must act on, every action it left in place with its rollback text (a
// partial rollback's irreversible actions, the reverts that failed).
func writeOutcome(out io.Writer, o *recoveryv1.OutcomeSummary) {
	if o == nil {
		return
	}
	fmt.Fprintf(out, "Last %s:  %s (correlation %s, applied %d, rolled back %d, not rolled back %d)\n", esc(o.Operation), esc(o.Result),
		esc(orDash(o.CorrelationID)), o.Applied, o.RolledBack, o.RollbackFailed)
	if o.Message != "" {
		fmt.Fprintf(out, "  %s\n", esc(o.Message))
	}
	if len(o.Left) == 0 {
		return
	}
	fmt.Fprintf(out, "Left in place (%d): undo by hand as each rollback text says\n", len(o.Left))
	for _, l := range o.Left {
		fmt.Fprintf(out, "  - %s (%s)\n", esc(l.ID), esc(l.Kind))
		fmt.Fprintf(out, "      rollback: %s\n", esc(orDash(l.Rollback)))
	}
}

// writeReportSummary prints status.report.
func writeReportSummary(out io.Writer, r *recoveryv1.ProjectionReconciliation, now time.Time) {
	fmt.Fprintf(out, "ProjectionReconciliation %s/%s (recovery %s)\n", esc(r.Namespace), esc(r.Name), esc(r.Spec.RecoveryRef.Name))
	fmt.Fprintf(out, "Run:          %s, last run %s\n", esc(orDash(string(r.Status.RunState))), ago(r.Status.LastRunAt, now))
	rep := r.Status.Report
	if rep == nil {
		fmt.Fprintln(out, "Report:       none yet")
		return
	}
	verdict := "CLEAN"
	switch {
	case !rep.Clean:
		verdict = "NOT CLEAN"
	case rep.Findings > 0:
		verdict = "CLEAN (no inconsistent finding) but DRIFTING"
	}
	fmt.Fprintf(out, "Report:       %s, %d finding%s\n", verdict, rep.Findings, plural(int64(rep.Findings)))
	if len(rep.ByKind) > 0 {
		fmt.Fprintf(out, "By kind:      %s\n", counts(rep.ByKind))
	}
	if len(rep.ByInvariant) > 0 {
		fmt.Fprintf(out, "By invariant: %s\n", counts(rep.ByInvariant))
	}
	if len(rep.Top) == 0 {
		return
	}
	fmt.Fprintf(out, "Findings (%d of %d shown):\n", len(rep.Top), rep.Findings)
	for _, f := range rep.Top {
		writeFinding(out, f)
	}
	if more := int(rep.Findings) - len(rep.Top); more > 0 {
		fmt.Fprintf(out, "  ... and %d more not shown (the run record in PostgreSQL holds them)\n", more)
	}
}

func counts(cs []recoveryv1.CountByName) string {
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s %d", esc(c.Name), c.Count))
	}
	return strings.Join(parts, ", ")
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func newPlanCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "plan NAME",
		Short: "Show a ProjectionReconciliation's repair plan: every action as before → after, and what is left to a person",
		Long: `Show the last dry run's repair plan (status.plan): its planId (what approve
asks you to type), the fingerprint of the state it was computed on, when it
expires, and every action status shows (the first fifty, in plan order):
its kind and target, each field it changes as before → after, its risk,
whether it is reversible, its lifecycle event and its rollback text; then
each finding the planner refused to touch with the reason and what a person
should do, and the preflight's verdict. Only actions shown here can be
approved. Everything is read through the API server.

Exit codes: 0 ok, 1 error, 2 usage, 3 no plan, plan expired, or preflight failed.`,
		Example: `  kubectl projection plan fix-venue-a
  kubectl projection plan fix-venue-a -o json | jq -r .status.plan.planId`,
		Args:              exactlyOneName("ProjectionReconciliation"),
		ValidArgsFunction: completeReconciliations(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.showReconciliation(cmd, args[0], output, writePlan, func(r *recoveryv1.ProjectionReconciliation) error {
				if err := approvable(r, o.now()); err != nil {
					return err
				}
				if !r.Status.Plan.WouldSucceed {
					return refused("plan %s fails its preflight: %s", esc(r.Status.Plan.PlanID), esc(r.Status.Plan.Preflight))
				}
				return nil
			})
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

// approvable is the client-side guard shared by plan's exit code and
// approve: a plan must exist, have actions and not be expired. It is a
// courtesy, not the safety: the controller checks the planId, the
// fingerprint and the expiry again at apply time (plan_stale).
func approvable(r *recoveryv1.ProjectionReconciliation, now time.Time) error {
	p := r.Status.Plan
	switch {
	case p == nil || p.PlanID == "":
		return refused("ProjectionReconciliation %s has no plan yet (run state %s)", esc(r.Name), esc(orDash(string(r.Status.RunState))))
	case p.Expires != nil && !now.Before(p.Expires.Time):
		return refused("plan %s expired %s ago (at %s): nothing to approve; a new dry run makes a new plan",
			esc(p.PlanID), duration.HumanDuration(now.Sub(p.Expires.Time)), p.Expires.UTC().Format(time.RFC3339))
	case p.Actions == 0:
		return refused("plan %s has no actions: nothing to apply", esc(p.PlanID))
	}
	return nil
}

// writePlan prints status.plan for a human (and for approve, before the
// prompt); every string of the object goes through esc.
func writePlan(out io.Writer, r *recoveryv1.ProjectionReconciliation, now time.Time) {
	fmt.Fprintf(out, "ProjectionReconciliation %s/%s (recovery %s)\n", esc(r.Namespace), esc(r.Name), esc(r.Spec.RecoveryRef.Name))
	p := r.Status.Plan
	if p == nil {
		fmt.Fprintln(out, "Plan:          none yet")
		return
	}
	fmt.Fprintf(out, "Plan:          %s\n", esc(p.PlanID))
	fmt.Fprintf(out, "Fingerprint:   %s\n", esc(p.Fingerprint))
	switch {
	case p.Expires == nil:
		fmt.Fprintln(out, "Expires:       -")
	case now.Before(p.Expires.Time):
		fmt.Fprintf(out, "Expires:       %s (in %s)\n", p.Expires.UTC().Format(time.RFC3339), duration.HumanDuration(p.Expires.Sub(now)))
	default:
		fmt.Fprintf(out, "Expires:       %s (EXPIRED %s ago)\n", p.Expires.UTC().Format(time.RFC3339), duration.HumanDuration(now.Sub(p.Expires.Time)))
	}
	fmt.Fprintf(out, "Actions:       %d (%d shown whole below; only those can be approved)\n", p.Actions, len(p.Items))
	for _, it := range p.Items {
		writeAction(out, it)
	}
	if more := int(p.Actions) - len(p.Items); more > 0 {
		fmt.Fprintf(out, "  ... and %d more not shown: approve these with --only or --shown; the next dry run shows the rest\n", more)
	}
	writeManual(out, p)
	if p.WouldSucceed {
		fmt.Fprintln(out, "Preflight:     ok (handlers and hooks wired, repair DSN set; nothing executed)")
	} else {
		fmt.Fprintf(out, "Preflight:     FAILS: %s\n", esc(orDash(p.Preflight)))
	}
}
