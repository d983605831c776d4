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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/codes"
)

func TestConditionsFor_AtMostOneTrue(t *testing.T) {
	cases := []struct {
		name                        string
		state                       recoveryv1.RecoveryState
		reason                      string
		ready, reconciling, stalled metav1.ConditionStatus
		wantReason                  string
	}{
		{"current is ready", recoveryv1.StateCurrent, "", "True", "False", "False", recoveryv1.ReasonCurrent},
		{"catching up is reconciling", recoveryv1.StateCatchingUp, "", "False", "True", "False", recoveryv1.ReasonCatchingUp},
		{"retrying is reconciling", recoveryv1.StateRetrying, "SOURCE_UNAVAILABLE", "False", "True", "False", recoveryv1.ReasonRetrying},
		{"blocked is stalled", recoveryv1.StateBlocked, "ORPHAN_TRADE", "False", "False", "True", recoveryv1.ReasonBlocked},
		{"secret not found is stalled", "", recoveryv1.ReasonSecretNotFound, "False", "False", "True", recoveryv1.ReasonSecretNotFound},
		{"invalid spec is stalled", "", recoveryv1.ReasonInvalidSpec, "False", "False", "True", recoveryv1.ReasonInvalidSpec},
		{"schema missing is stalled", "", string(codes.SchemaMissing), "False", "False", "True", recoveryv1.ReasonSchemaMissing},
		{"suspended is none of them, without Ready", "", recoveryv1.ReasonSuspended, conditionAbsent, "False", "False", recoveryv1.ReasonSuspended},
		{"auto recovery disabled while behind is stalled", "", recoveryv1.ReasonAutoRecoveryDisabled, "False", "False", "True", recoveryv1.ReasonAutoRecoveryDisabled},
		{"awaiting the first cycle is reconciling", "", "", "False", "True", "False", recoveryv1.ReasonAwaitingFirstCycle},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := conditionsFor(tc.state, tc.reason, "m")
			if got.ready != tc.ready || got.reconciling != tc.reconciling || got.stalled != tc.stalled || got.reason != tc.wantReason {
				t.Errorf("conditionsFor(%q, %q) = %+v", tc.state, tc.reason, got)
			}
		})
	}
}
