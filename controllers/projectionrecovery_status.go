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
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/completeness"
)

// maxMessage bounds status and event messages (an error chain can be long).
const maxMessage = 1024

// computeStatus folds the scope's outcome into obj.Status, records it for the
// completeness endpoint and returns the requeue decision. It only mutates the
// in-memory object; patchStatus decides whether anything reaches the API server.
func (r *ProjectionRecoveryReconciler) computeStatus(s *recoveryScope) ctrl.Result {
	obj := s.obj
	st := &obj.Status
	prevState, prevReason := st.State, st.Reason
	st.ObservedGeneration = obj.Generation

	if c := s.cycle; c != nil {
		mirrorCursor(st, c)
	}
	if s.state != "" {
		st.State = s.state
	}
	st.Reason = s.reason
	st.Message = truncate(redact(s.message, s.secrets))

	observer := s.cycle != nil && s.cycle.observer
	switch {
	case observer:
		// Another manager's failures are not ours to count.
	case s.state == recoveryv1.StateRetrying || s.state == recoveryv1.StateBlocked:
		st.ConsecutiveFailures++
	case s.state == recoveryv1.StateCurrent || s.state == recoveryv1.StateCatchingUp:
		st.ConsecutiveFailures = 0
	}

	var result ctrl.Result
	switch {
	case s.reason == recoveryv1.ReasonSuspended:
		// Nothing to schedule: un-suspending changes the generation.
	case s.state == "":
		result.RequeueAfter = obj.Spec.EffectiveInterval()
	case observer:
		result.RequeueAfter = observerRequeue(s.now, s.cycle.lease.ExpiresAt, obj.Spec.EffectiveInterval())
	default:
		result.RequeueAfter = requeueAfter(s.state, st.ConsecutiveFailures, &obj.Spec)
	}
	// nextAttempt is shown only while failing: writing it for healthy scopes
	// would change status at every interval for nothing.
	st.NextAttempt = nil
	if !observer && (s.state == recoveryv1.StateRetrying || s.state == recoveryv1.StateBlocked) {
		st.NextAttempt = ptrTime(s.now.Add(result.RequeueAfter))
	}

	condState := s.state
	if s.reason == recoveryv1.ReasonAutoRecoveryDisabled || s.reason == recoveryv1.ReasonInvalidSpec {
		condState = "" // neither progressing nor proven: the reason says why
	}
	applyConditions(&st.Conditions, conditionsFor(condState, s.reason, st.Message), obj.Generation, metav1.NewTime(s.now.Truncate(time.Second)))

	r.emitTransition(obj, prevState, prevReason)
	r.Registry.CycleEnded(obj.Namespace, obj.Name, obj.Spec.Scope, r.Clock.Now(), completenessOf(st))
	return result
}

// mirrorCursor copies what the cycle proved and observed into status
// (FR-APR05 → FR-APR11).
func mirrorCursor(st *recoveryv1.ProjectionRecoveryStatus, c *cycleResult) {
	cur := c.cursor
	st.VerifiedThroughSeq = cur.VerifiedThroughSeq
	st.ChainDigest = cur.ChainDigest
	st.EventCount = cur.EventCount
	if cur.DescriptorHash != "" {
		st.DescriptorHash = cur.DescriptorHash
	}
	if cur.LastVerifiedAt != nil {
		st.LastSuccessfulVerification = ptrTime(*cur.LastVerifiedAt)
	}
	if b := max(c.boundary, cur.LastObservedBoundarySeq); b > 0 {
		st.ObservedBoundarySeq = b
	}
	st.Lag = max(0, st.ObservedBoundarySeq-st.VerifiedThroughSeq)
	if c.lease != nil && c.lease.Owner != "" {
		st.Lease = &recoveryv1.LeaseStatus{Owner: c.lease.Owner, Fence: c.lease.Fence, ExpiresAt: ptrTime(c.lease.ExpiresAt)}
	}
}

func completenessOf(st *recoveryv1.ProjectionRecoveryStatus) completeness.Completeness {
	c := completeness.Completeness{
		VerifiedThroughSeq: st.VerifiedThroughSeq, ObservedBoundarySeq: st.ObservedBoundarySeq, Lag: st.Lag,
		ChainDigest: st.ChainDigest, EventCount: st.EventCount, State: string(st.State), Reason: st.Reason,
	}
	if st.LastSuccessfulVerification != nil {
		t := st.LastSuccessfulVerification.Time
		c.LastSuccessfulVerification = &t
	}
	return c
}

// ptrTime truncates to the second: metav1.Time serialises at second
// precision, so a nanosecond value would never DeepEqual what the API server
// returns and every reconcile would write status.
func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}

// patchStatus writes the status subresource once, and only when it changed.
// Skipping identical writes matters: every write bumps resourceVersion, wakes
// every watcher (Argo CD, Flux, kubectl get -w) and costs etcd a revision, for
// every scope at every interval.
func (r *ProjectionRecoveryReconciler) patchStatus(ctx context.Context, before, after *recoveryv1.ProjectionRecovery) error {
	if equality.Semantic.DeepEqual(before.Status, after.Status) {
		return nil
	}
	r.Metrics.statusWrites.Inc()
	if err := r.Status().Patch(ctx, after, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("patching status: %w", err)
	}
	return nil
}

// redact removes credentials from a message: the DSN, its password, the
// token. Errors from drivers may echo parts of a connection string; status,
// events and logs must never carry them.
func redact(msg string, sec resolvedSecrets) string {
	for _, secret := range secretsIn(sec) {
		if len(secret) >= 4 {
			msg = strings.ReplaceAll(msg, secret, "[redacted]")
		}
	}
	return msg
}

func secretsIn(sec resolvedSecrets) []string {
	out := []string{sec.dsn, sec.token}
	if u, err := url.Parse(sec.dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			out = append(out, p, url.QueryEscape(p))
		}
	}
	for _, field := range strings.Fields(sec.dsn) {
		if v, ok := strings.CutPrefix(field, "password="); ok {
			out = append(out, strings.Trim(v, "'"))
		}
	}
	return out
}

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage-3] + "..."
}
