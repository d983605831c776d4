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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// conditionSet is the kstatus triple derived from one outcome. Computing all
// three together (rather than setting them one by one in phases) guarantees
// they never contradict each other: at most one of Ready, Reconciling and
// Stalled is True, which is what kstatus needs to classify the object.
// kstatus reads them in this order: Reconciling=True is InProgress,
// Stalled=True is Failed, then Ready=True is Current and Ready=False (or
// Unknown) is InProgress; with no Ready at all it is Current. So every
// situation that waits on an operator must be Stalled, never Ready=False
// alone, or GitOps tools wait on it forever.
type conditionSet struct {
	ready, reconciling, stalled metav1.ConditionStatus
	reason, message             string
}

// conditionAbsent in a conditionSet removes the condition instead of setting it.
const conditionAbsent metav1.ConditionStatus = ""

// applyConditions writes the triple onto conditions for generation. now comes
// from the injected clock; meta.SetStatusCondition keeps lastTransitionTime
// when a condition's status does not change, so re-applying the same set is a
// no-op and no status write follows.
func applyConditions(conds *[]metav1.Condition, set conditionSet, generation int64, now metav1.Time) {
	for _, c := range []struct {
		typ    string
		status metav1.ConditionStatus
	}{
		{recoveryv1.ConditionReady, set.ready},
		{recoveryv1.ConditionReconciling, set.reconciling},
		{recoveryv1.ConditionStalled, set.stalled},
	} {
		if c.status == conditionAbsent {
			meta.RemoveStatusCondition(conds, c.typ)
			continue
		}
		meta.SetStatusCondition(conds, metav1.Condition{
			Type:               c.typ,
			Status:             c.status,
			Reason:             set.reason,
			Message:            set.message,
			ObservedGeneration: generation,
			LastTransitionTime: now,
		})
	}
}
