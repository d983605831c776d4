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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

func TestApplyConditions_IdempotentKeepsTransitionTime(t *testing.T) {
	var conds []metav1.Condition
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	applyConditions(&conds, conditionsFor(recoveryv1.StateCurrent, "", "ok"), 3, t0)
	first := append([]metav1.Condition(nil), conds...)
	applyConditions(&conds, conditionsFor(recoveryv1.StateCurrent, "", "ok"), 3, metav1.NewTime(t0.Add(time.Hour)))
	for i := range conds {
		if conds[i] != first[i] {
			t.Fatalf("re-applying the same set changed %s: %+v → %+v", conds[i].Type, first[i], conds[i])
		}
		if conds[i].ObservedGeneration != 3 {
			t.Fatalf("observedGeneration = %d, want 3", conds[i].ObservedGeneration)
		}
	}
}
