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
	"testing"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// TestOutcomeSuperseded: a conflict retry of an outcome write drops only a
// refusal, and only when another writer recorded an outcome since the read.
func TestOutcomeSuperseded(t *testing.T) {
	ok := &recoveryv1.OutcomeSummary{Operation: opApply, Result: resultOK, PlanID: "p1", CorrelationID: "c1"}
	leaseBusy := &recoveryv1.OutcomeSummary{Operation: opApply, Result: "lease_unavailable", PlanID: "p1"}
	otherRefusal := &recoveryv1.OutcomeSummary{Operation: opApply, Result: "repair_denied", PlanID: "p1"}
	for _, tc := range []struct {
		name              string
		read, fresh, ours *recoveryv1.OutcomeSummary
		want              bool
	}{
		{"another writer's success since the read, ours refused", nil, ok, leaseBusy, true},
		{"another writer's refusal since the read, ours refused", nil, otherRefusal, leaseBusy, true},
		{"nothing recorded since the read (a spec or annotation edit), ours refused", nil, nil, leaseBusy, false},
		{"the same outcome as read, ours refused", otherRefusal, otherRefusal.DeepCopy(), leaseBusy, false},
		{"ours succeeded over another writer's refusal", nil, otherRefusal, ok, false},
		{"ours succeeded, nothing recorded since", nil, nil, ok, false},
		{"no outcome of ours (a dry run)", nil, ok, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := outcomeSuperseded(tc.read, tc.fresh, tc.ours); got != tc.want {
				t.Fatalf("outcomeSuperseded = %t, want %t", got, tc.want)
			}
		})
	}
}
