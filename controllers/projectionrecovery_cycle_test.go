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
	"github.com/projection-recovery/projection-recovery/internal/catchup"
	"github.com/projection-recovery/projection-recovery/internal/codes"
)

// TestCycleOutcomeTranslation: every state and reason of the engine reaches
// status as the API names it, and a stable code passes as it is.
func TestCycleOutcomeTranslation(t *testing.T) {
	states := map[catchup.State]recoveryv1.RecoveryState{
		catchup.StateCatchingUp: recoveryv1.StateCatchingUp,
		catchup.StateCurrent:    recoveryv1.StateCurrent,
		catchup.StateRetrying:   recoveryv1.StateRetrying,
		catchup.StateBlocked:    recoveryv1.StateBlocked,
		"":                      "",
	}
	for in, want := range states {
		t.Run("state "+string(in), func(t *testing.T) {
			if got := recoveryState(in); got != want {
				t.Fatalf("recoveryState(%q) = %q, want %q", in, got, want)
			}
		})
	}
	for in, want := range map[string]string{
		catchup.ReasonInvalidSpec:   recoveryv1.ReasonInvalidSpec,
		string(codes.OrphanTrade):   string(codes.OrphanTrade),
		string(codes.SchemaMissing): string(codes.SchemaMissing),
		"":                          "",
	} {
		t.Run("reason "+in, func(t *testing.T) {
			if got := recoveryReason(in); got != want {
				t.Fatalf("recoveryReason(%q) = %q, want %q", in, got, want)
			}
		})
	}
}
