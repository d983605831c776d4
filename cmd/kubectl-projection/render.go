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
	"fmt"
	"io"
	"strings"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// The plan and report as a person reads them: every action as a diff of
// the fields it changes, every finding with both sides and its cause. Every
// string of the object goes through esc.

// writeAction prints one planned action as a diff:
//
//	rederive_position  account=A1 instrument=BTC scope=venue-a  (update)
//	    ~ avg_cost  101.5 → 100.25
//	    risk low · reversible · lifecycle -
//	    rollback: restores quantity and avg_cost
func writeAction(out io.Writer, it recoveryv1.PlannedAction) {
	fmt.Fprintf(out, "  %s\n", strings.TrimSpace(esc(it.Kind)+" "+esc(fieldsLine(it.Target))))
	fmt.Fprintf(out, "      id: %s  (%s)\n", esc(it.ID), esc(it.Effect))
	width := 0
	for _, c := range it.Changes {
		width = max(width, len(esc(c.Field)))
	}
	for _, c := range it.Changes {
		mark, from, to := "~", "(none)", "(none)"
		if c.Before != nil {
			from = esc(*c.Before)
		}
		if c.After != nil {
			to = esc(*c.After)
		}
		switch {
		case c.Before == nil:
			mark = "+"
		case c.After == nil:
			mark = "-"
		}
		fmt.Fprintf(out, "      %s %-*s  %s → %s\n", mark, width, esc(c.Field), from, to)
	}
	rev := "IRREVERSIBLE"
	if it.Reversible {
		rev = "reversible"
	}
	fmt.Fprintf(out, "      risk %s · %s · lifecycle %s\n", esc(orDash(it.Risk)), rev, esc(orDash(it.LifecycleEvent)))
	if it.Rollback != "" {
		fmt.Fprintf(out, "      rollback: %s\n", esc(it.Rollback))
	}
	if len(it.Findings) > 0 {
		fmt.Fprintf(out, "      resolves: %s\n", esc(strings.Join(it.Findings, ", ")))
	}
}

// fieldsLine is "k=v k=v" in the list's order (sorted by the controller).
func fieldsLine(vs []recoveryv1.FieldValue) string {
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		parts = append(parts, v.Name+"="+v.Value)
	}
	return strings.Join(parts, " ")
}

// writeManual prints the findings the planner refused to touch.
func writeManual(out io.Writer, p *recoveryv1.PlanSummary) {
	fmt.Fprintf(out, "Manual:        %d finding%s the planner refused to touch\n", p.Manual, plural(int64(p.Manual)))
	for _, m := range p.ManualItems {
		fmt.Fprintf(out, "  - %s\n", esc(m.FindingID))
		fmt.Fprintf(out, "      reason: %s\n", esc(m.Reason))
		if m.Guidance != "" {
			fmt.Fprintf(out, "      do:     %s\n", esc(m.Guidance))
		}
	}
	if more := int(p.Manual) - len(p.ManualItems); more > 0 {
		fmt.Fprintf(out, "  ... and %d more not shown (the run record in PostgreSQL holds them)\n", more)
	}
}

// writeFinding prints one finding: invariant, record, SQL vs source, cause.
func writeFinding(out io.Writer, f recoveryv1.FindingSummary) {
	fmt.Fprintf(out, "  %-12s %s\n", esc(f.Kind), esc(f.ID))
	if f.Statement != "" {
		fmt.Fprintf(out, "      invariant: %s: %s\n", esc(f.Invariant), esc(f.Statement))
	}
	side := func(label string, absent bool, vs []recoveryv1.FieldValue) {
		switch {
		case absent:
			fmt.Fprintf(out, "      %s (absent)\n", label)
		case len(vs) > 0:
			fmt.Fprintf(out, "      %s %s\n", label, esc(fieldsLine(vs)))
		}
	}
	side("actual (SQL):      ", f.ActualAbsent, f.Actual)
	side("expected (source): ", f.ExpectedAbsent, f.Expected)
	if f.Detail != "" {
		fmt.Fprintf(out, "      detail: %s\n", esc(f.Detail))
	}
	if rc := f.RootCause; rc != nil {
		fmt.Fprintf(out, "      cause: %s (%s): %s\n", esc(rc.Code), esc(rc.Confidence), esc(rc.Hint))
		for _, e := range rc.Evidence {
			fmt.Fprintf(out, "        evidence: %s\n", esc(e))
		}
	} else if f.Cause != "" {
		fmt.Fprintf(out, "      cause: %s\n", esc(f.Cause))
	}
	if f.Guidance != "" {
		fmt.Fprintf(out, "      do: %s\n", esc(f.Guidance))
	}
	if f.Truncated {
		fmt.Fprintln(out, "      (cut to fit status; the run record holds it whole)")
	}
}
