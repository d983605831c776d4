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

	corev1 "k8s.io/api/core/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// transitionEvent decides the Kubernetes Event of a status change: one per
// state transition, plus one when a failing scope's reason code changes.
// A BLOCKED or RETRYING scope gets a Warning whose reason is the stable code,
// so `kubectl get events --field-selector reason=ORPHAN_TRADE` finds it.
// Pure; returns ok=false when nothing is worth an event.
func transitionEvent(prevState recoveryv1.RecoveryState, prevReason string, st *recoveryv1.ProjectionRecoveryStatus) (eventType, reason, note string, ok bool) {
	failing := st.State == recoveryv1.StateBlocked || st.State == recoveryv1.StateRetrying
	if st.State == "" || (st.State == prevState && (!failing || st.Reason == prevReason)) {
		return "", "", "", false
	}
	switch st.State {
	case recoveryv1.StateBlocked, recoveryv1.StateRetrying:
		return corev1.EventTypeWarning, st.Reason, string(st.State) + ": " + st.Message, true
	case recoveryv1.StateCurrent:
		return corev1.EventTypeNormal, recoveryv1.ReasonCurrent, st.Message, true
	default:
		return corev1.EventTypeNormal, recoveryv1.ReasonCatchingUp, st.Message, true
	}
}

// withdrawnEvent decides the Warning of a verified-through that went down:
// the SQL cursor was moved back, so a completeness claim status made
// before is withdrawn. That is worth an Event of its own even when the
// state does not change (a CATCHING_UP scope reset again), and it names
// who asked when the reconciliation said so (the reconciled-by
// annotation). Pure.
func withdrawnEvent(prevVerified int64, st *recoveryv1.ProjectionRecoveryStatus, reconciledBy string) (note string, ok bool) {
	if st.VerifiedThroughSeq >= prevVerified {
		return "", false
	}
	note = fmt.Sprintf("verified through %d is withdrawn: the SQL cursor went back to %d and the scope is re-verified from there", prevVerified, st.VerifiedThroughSeq)
	if reconciledBy != "" {
		note += " (last reconciled by " + reconciledBy + ")"
	}
	return note, true
}

// emitTransition records the events of a status change. Their notes are
// built from status, whose message computeStatus redacted already; a
// failing state's "BLOCKED: " prefix can still take a full-length message
// past what the API accepts, which recordEvent bounds.
func (r *ProjectionRecoveryReconciler) emitTransition(obj *recoveryv1.ProjectionRecovery, prev *recoveryv1.ProjectionRecoveryStatus) {
	if note, ok := withdrawnEvent(prev.VerifiedThroughSeq, &obj.Status, obj.Annotations[recoveryv1.AnnotationReconciledBy]); ok {
		recordEvent(r.Recorder, obj, nil, corev1.EventTypeWarning, recoveryv1.ReasonVerificationWithdrawn, "Reconcile", note)
	}
	if typ, reason, note, ok := transitionEvent(prev.State, prev.Reason, &obj.Status); ok {
		recordEvent(r.Recorder, obj, nil, typ, reason, "Reconcile", note)
	}
}
