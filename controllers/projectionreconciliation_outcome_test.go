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
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// TestLeftSummary: what an apply or rollback left in place reaches status
// with its rollback text, bounded by the CRD (fifty entries, each id and
// text cut on a rune boundary).
func TestLeftSummary(t *testing.T) {
	long := strings.Repeat("é", 700) // 1,400 bytes
	var many []recon.LeftAction
	for i := 0; i < 60; i++ {
		many = append(many, recon.LeftAction{ID: fmt.Sprintf("collapse:%d", i), Kind: recon.ActionCollapse, Rollback: "re-insert by hand"})
	}
	for _, c := range []struct {
		name string
		in   []recon.LeftAction
		want func(t *testing.T, got []recoveryv1.LeftAction)
	}{
		{"nothing left", nil, func(t *testing.T, got []recoveryv1.LeftAction) {
			if got != nil {
				t.Fatalf("%+v, want nil (no field in status)", got)
			}
		}},
		{"an irreversible action keeps its rollback text", []recon.LeftAction{{ID: "republish:x", Kind: recon.ActionRepublish, Rollback: "none: consumers deduplicate"}},
			func(t *testing.T, got []recoveryv1.LeftAction) {
				if len(got) != 1 || got[0] != (recoveryv1.LeftAction{ID: "republish:x", Kind: "republish", Rollback: "none: consumers deduplicate"}) {
					t.Fatalf("%+v", got)
				}
			}},
		{"bounded to fifty", many, func(t *testing.T, got []recoveryv1.LeftAction) {
			if len(got) != maxLeftActions || got[maxLeftActions-1].ID != "collapse:49" {
				t.Fatalf("%d entries: %+v", len(got), got)
			}
		}},
		{"long strings cut", []recon.LeftAction{{ID: long, Kind: recon.ActionCollapse, Rollback: long}}, func(t *testing.T, got []recoveryv1.LeftAction) {
			if len(got) != 1 {
				t.Fatalf("%+v, want one entry", got)
			}
			if len(got[0].ID) > maxIDLength || len(got[0].Rollback) > maxCauseLength || !strings.HasSuffix(got[0].Rollback, "...") {
				t.Fatalf("id %d bytes, rollback %d bytes", len(got[0].ID), len(got[0].Rollback))
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) { c.want(t, leftSummary(c.in)) })
	}
}

// TestFillApplyOutcome_Left: a failed apply whose automatic rollback could
// not revert an action names it in status.
func TestFillApplyOutcome_Left(t *testing.T) {
	a := recon.Action{ID: "collapse:1", Kind: recon.ActionCollapse, Rollback: "re-insert a copy of Before by hand"}
	o := &recon.Outcome{Code: recon.ResultRepairFailed, Detail: "x", RollbackFailed: []recon.RollbackFailure{{Action: a, Error: "irreversible"}}}
	out := &recoveryv1.OutcomeSummary{}
	fillApplyOutcome(out, o, &recon.Error{Code: recon.ResultRepairFailed})
	if out.Result != string(recon.ResultRepairFailed) || len(out.Left) != 1 || out.Left[0].ID != a.ID || out.Left[0].Rollback != a.Rollback {
		t.Fatalf("outcome %+v", out)
	}
}

// TestPartialRollback_NeedsAHuman: a partial rollback is not ok: it is
// Stalled while spec.rollback still names the run (a person must undo
// what status.outcome.left lists), and a resync never runs it again.
func TestPartialRollback_NeedsAHuman(t *testing.T) {
	spec := &recoveryv1.ProjectionReconciliationSpec{Rollback: &recoveryv1.ReconciliationRollback{CorrelationID: "run-1", Approver: "alice"}}
	st := &recoveryv1.ProjectionReconciliationStatus{ObservedGeneration: 2, RunState: recoveryv1.RunReported,
		Outcome: &recoveryv1.OutcomeSummary{Operation: opRollback, Result: resultPartial, CorrelationID: "run-1", Message: "1 irreversible action stays",
			Left: []recoveryv1.LeftAction{{ID: "collapse:1", Kind: "collapse", Rollback: "re-insert by hand"}}}}
	set := reconConditions(spec, st, "", "")
	if set.stalled != metav1.ConditionTrue || set.ready != metav1.ConditionFalse || !strings.Contains(set.message, "partial") || set.reason != ReasonPartiallyRolledBack {
		t.Fatalf("conditions %+v, want Stalled/%s naming the partial rollback", set, ReasonPartiallyRolledBack)
	}
	if d := decideReconciliation(spec, st, 2, reconClock.Now()); d.action != reconNothing {
		t.Fatalf("a resync decided %+v, want nothing", d)
	}
}

// reconCounter is the value of one projection_reconciliation_runs_total
// series on the manager's registry (0 when absent).
func reconCounter(t *testing.T, operation, code string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != "projection_reconciliation_runs_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["operation"] == operation && labels["code"] == code {
				return counterValue(m)
			}
		}
	}
	return 0
}
