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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/codes"
)

// conditionsFor maps a state (or a pre-cycle situation expressed as a reason)
// to the kstatus triple. It is pure and table-tested.
func conditionsFor(state recoveryv1.RecoveryState, reason, message string) conditionSet {
	switch state {
	case recoveryv1.StateCurrent:
		return conditionSet{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse, recoveryv1.ReasonCurrent, message}
	case recoveryv1.StateCatchingUp:
		return conditionSet{metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, recoveryv1.ReasonCatchingUp, message}
	case recoveryv1.StateRetrying:
		return conditionSet{metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, recoveryv1.ReasonRetrying, message}
	case recoveryv1.StateBlocked:
		return conditionSet{metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue, recoveryv1.ReasonBlocked, message}
	}
	// No state: the reason says why (awaiting the first cycle, a missing Secret...).
	switch reason {
	case recoveryv1.ReasonSecretNotFound, recoveryv1.ReasonInvalidSpec, recoveryv1.ReasonDuplicateScope:
		return conditionSet{metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue, reason, message}
	case recoveryv1.ReasonAutoRecoveryDisabled:
		// The scope is behind (a CURRENT scope keeps state CURRENT and Ready
		// even read-only) and this manager may not write: nothing closes the
		// gap until an operator turns auto-recovery on or repairs by hand.
		// That is what Stalled means; left InProgress, `kstatus wait` and a
		// Flux health check would wait forever, and left all-False, kstatus
		// would call an incomplete projection Current (docs/gitops.md).
		return conditionSet{metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue, reason, message}
	case string(codes.SchemaMissing):
		// Only an operator can apply the migration (`manager migrate`):
		// Stalled, like a spec that cannot be used. Not BLOCKED: nothing is
		// wrong with the projection itself.
		return conditionSet{metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue, recoveryv1.ReasonSchemaMissing, message}
	case recoveryv1.ReasonSuspended:
		// Settled on purpose: no cycle runs until spec.suspend changes (which
		// changes the generation). Ready is removed, not False: while
		// suspended the controller asserts nothing about completeness, and
		// kstatus reads Ready=False as InProgress, so `kstatus wait` and a
		// Flux health check would never end on a suspended resource. With
		// no Ready and neither Reconciling nor Stalled, kstatus reads the
		// settled verdict Current (docs/gitops.md).
		return conditionSet{conditionAbsent, metav1.ConditionFalse, metav1.ConditionFalse, reason, message}
	}
	if reason == "" {
		reason = recoveryv1.ReasonAwaitingFirstCycle
	}
	return conditionSet{metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, reason, message}
}
