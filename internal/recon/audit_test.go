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
	"testing"
)

// Every audit record of an apply and of its rollback carries the whole
// action a handler reverts (target, before, after, reversibility, rollback
// text): the specification's "rolling back without the outcome object"
// reads nothing else. Without Target the trail says what changed but not
// where.
func TestAudit_RecordCarriesTheAction(t *testing.T) {
	r := newRig(drifted())
	p := dryRun(t, r)
	out, err := applyAll(t, r, p, true)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if _, err := r.wf.Rollback(context.Background(), out, "ada"); CodeOf(err) != ResultPartial {
		t.Fatalf("rollback: %v, want partial (republish stays)", err)
	}
	if len(r.audit.records) != 5 { // 3 applied, 2 reverted (republish is irreversible)
		t.Fatalf("audit: %v", r.audit.outcomes())
	}
	for _, rec := range r.audit.records {
		t.Run(rec.Outcome+" "+rec.ActionID, func(t *testing.T) {
			a := p.Action(rec.ActionID)
			if a == nil {
				t.Fatalf("audit record of an action the plan does not hold: %+v", rec)
			}
			got := rec.RepairAction()
			if !SameRepair(got, *a) || len(rec.Target) == 0 || rec.Target["scope"] != p.Scope {
				t.Fatalf("audit record %+v\nrebuilds %+v\nwant %+v", rec, got, *a)
			}
		})
	}
}

// SameRepair compares every field a handler reads; nil (an absent record)
// and empty differ; the finding ids do not count.
func TestAudit_SameRepair(t *testing.T) {
	base := Action{ID: "k:r", Kind: ActionDropPosition, Target: Fields{"scope": "s"}, Before: Fields{"q": "1"}, After: nil,
		Reversible: true, Risk: RiskHigh, Rollback: "re-insert", Findings: []string{"f1"}}
	for _, c := range []struct {
		name string
		edit func(*Action)
		same bool
	}{
		{"identical", func(*Action) {}, true},
		{"other findings", func(a *Action) { a.Findings = []string{"f2"} }, true},
		{"empty after instead of absent", func(a *Action) { a.After = Fields{} }, false},
		{"other target", func(a *Action) { a.Target = Fields{"scope": "t"} }, false},
		{"other before", func(a *Action) { a.Before = Fields{"q": "2"} }, false},
		{"irreversible", func(a *Action) { a.Reversible = false }, false},
		{"other rollback text", func(a *Action) { a.Rollback = "x" }, false},
		{"other kind", func(a *Action) { a.Kind = ActionRederivePosition }, false},
		{"other lifecycle event", func(a *Action) { a.LifecycleEvent = "e" }, false},
		{"other risk", func(a *Action) { a.Risk = RiskLow }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := base
			b.Target, b.Before = base.Target.clone(), base.Before.clone()
			c.edit(&b)
			if got := SameRepair(base, b); got != c.same {
				t.Fatalf("SameRepair = %v, want %v", got, c.same)
			}
		})
	}
}
