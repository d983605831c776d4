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
	"testing"
)

// correlatedScenarios: causes that explain many findings at once.
func correlatedScenarios() []scenario {
	return []scenario{
		{name: "source_read_empty: a read at B=0 under a cursor at 14",
			mutate: func(s *Snapshot) {
				s.Source = SourceSide{Complete: true, DescriptorHash: fxDescriptor, ProtocolVersion: 1}
			},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if !r.SourceReadEmpty || len(p.Actions) != 0 || r.ByInvariant[CursorWithinBoundary] != 1 {
					t.Fatalf("empty read at B=0:%s", joinLines(summary(r)))
				}
				for _, f := range r.Findings {
					if inv, _ := Lookup(f.Invariant); inv.SourceDependent && f.RootCause.Code != CauseSourceReadEmpty {
						t.Errorf("%s: cause %s", f.ID, f.RootCause.Code)
					}
				}
			}},
		{name: "source_read_empty: every trade looks orphaned; the planner touches nothing",
			mutate: func(s *Snapshot) {
				s.Source.Trades, s.Source.Orders, s.Source.Openings = nil, nil, nil
			},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if !r.SourceReadEmpty || len(p.Actions) != 0 || len(p.Manual) != len(r.Findings) || len(r.Findings) < len(s.SQL.Trades) {
					t.Fatalf("empty read: empty=%v actions=%d manual=%d findings=%d", r.SourceReadEmpty, len(p.Actions), len(p.Manual), len(r.Findings))
				}
				for _, f := range r.Findings {
					inv, _ := Lookup(f.Invariant)
					if inv.SourceDependent && f.RootCause.Code != CauseSourceReadEmpty {
						t.Errorf("%s: cause %s, want source_read_empty", f.ID, f.RootCause.Code)
					}
				}
				for _, m := range p.Manual {
					if m.Reason[:len("source_read_empty")] != "source_read_empty" {
						t.Errorf("%s: reason %q", m.FindingID, m.Reason)
					}
				}
			}},
	}
}

func TestScenario_Correlated(t *testing.T) {
	for _, sc := range correlatedScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			s := fixture(fxCmds)
			sc.mutate(s)
			r := mustDetect(t, s)
			sc.check(t, s, r, mustPlan(t, r, s))
		})
	}
}
