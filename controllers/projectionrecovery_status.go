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
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/catchup"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/completeness"
)

// maxMessage bounds status and event messages (an error chain can be long).
const maxMessage = 1024

// maxRequestedAt is status.lastHandledRequestedAt's MaxLength.
const maxRequestedAt = 256

// computeStatus folds the scope's outcome into obj.Status and returns the
// requeue decision. It only mutates the in-memory object; writeStatus decides
// whether anything reaches the API server and publish what follows a write.
func (r *ProjectionRecoveryReconciler) computeStatus(s *recoveryScope) ctrl.Result {
	obj := s.obj
	st := &obj.Status
	st.ObservedGeneration = obj.Generation
	// The scope names the reconciliation that last repaired it (the
	// annotation is set by the ProjectionReconciliation controller).
	st.LastReconciliation = truncateTo(obj.Annotations[recoveryv1.AnnotationReconciledBy], 512)
	// The request (if any) this reconcile saw is handled: its cycle ran, or
	// the reason says why none did. Status is computed only when the
	// generation was evaluated, so a phase that failed does not claim it.
	// A value longer than the field cannot be echoed: it stays unhandled
	// rather than be reported as a different, truncated request.
	if v := obj.Annotations[recoveryv1.AnnotationRequestedAt]; len(v) <= maxRequestedAt {
		st.LastHandledRequestedAt = v
	}

	c := s.cycle
	if c != nil && c.CursorRead {
		mirrorCursor(st, c)
	}
	if s.state != "" {
		st.State = s.state
	}
	r.updateProgress(s, c)
	st.Reason = s.reason
	msg := s.message
	if (c == nil || !c.CursorRead) && hasCursor(st) {
		// What status shows was read by an earlier cycle: say so rather than
		// show VERIFIED 0 (a verified-through never goes down unless the SQL
		// cursor itself says so) or pass old values off as fresh.
		msg = fmt.Sprintf("%s; verified-through %d, boundary %d and lag %d are the last known values, not re-checked",
			msg, st.VerifiedThroughSeq, st.ObservedBoundarySeq, st.Lag)
	}
	st.Message = truncate(redact(msg, s.secrets))

	observer := c != nil && c.Observer
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
	case s.reason == recoveryv1.ReasonRepairPending:
		result.RequeueAfter = repairPendingRequeue
	case s.state == "":
		result.RequeueAfter = obj.Spec.EffectiveInterval()
	case observer:
		result.RequeueAfter = observerRequeue(s.now, c.Lease.ExpiresAt, obj.Spec.EffectiveInterval())
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
	if stateless(s.reason) {
		condState = "" // neither progressing nor proven: the reason says why
	}
	now := metav1.NewTime(s.now.Truncate(time.Second))
	applyConditions(&st.Conditions, conditionsFor(condState, s.reason, st.Message), obj.Generation, now)
	if s.reconsRead {
		st.OpenDrift = s.drift
		applyDriftCondition(&st.Conditions, s.drift, s.reconciliations, obj.Generation, now)
	}
	return result
}

// stateless reasons describe the manager or the spec, not the scope's
// progress: the conditions follow the reason, whatever state status still shows.
func stateless(reason string) bool {
	switch reason {
	case recoveryv1.ReasonAutoRecoveryDisabled, recoveryv1.ReasonInvalidSpec, string(codes.SchemaMissing):
		return true
	}
	return false
}

// hasCursor: status carries cursor values from some earlier cycle.
func hasCursor(st *recoveryv1.ProjectionRecoveryStatus) bool {
	return st.VerifiedThroughSeq > 0 || st.ObservedBoundarySeq > 0 || st.LastSuccessfulVerification != nil
}

// mirrorCursor copies what the cycle read, proved and observed into status
// (FR-APR05 → FR-APR11). Only called when the cycle read the cursor: then a
// lower verified-through than status shows is a real rewind of the SQL
// cursor (e.g. reset to re-verify from genesis) and must show.
func mirrorCursor(st *recoveryv1.ProjectionRecoveryStatus, c *catchup.Result) {
	cur := c.Cursor
	st.VerifiedThroughSeq = cur.VerifiedThroughSeq
	st.ChainDigest = cur.ChainDigest
	st.EventCount = cur.EventCount
	if cur.DescriptorHash != "" {
		st.DescriptorHash = cur.DescriptorHash
	}
	if cur.LastVerifiedAt != nil {
		st.LastSuccessfulVerification = ptrTime(*cur.LastVerifiedAt)
	}
	if b := max(c.Boundary, cur.LastObservedBoundarySeq); b > 0 {
		st.ObservedBoundarySeq = b
	}
	st.Lag = catchup.Lag(st.ObservedBoundarySeq, st.VerifiedThroughSeq, c.Frozen)
	if c.Lease != nil && c.Lease.Owner != "" {
		st.Lease = &recoveryv1.LeaseStatus{Owner: c.Lease.Owner, Fence: c.Lease.Fence, ExpiresAt: ptrTime(c.Lease.ExpiresAt)}
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
	if p := st.Progress; p != nil {
		c.EventsPerSecond, c.ETA = p.EventsPerSecond, p.ETA
	}
	if d := st.OpenDrift; d != nil {
		c.OpenDrift = &completeness.OpenDrift{Reconciliation: d.Reconciliation, Findings: d.Findings}
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

// writeStatus writes the status subresource once, only when it changed, and
// with an optimistic lock: Update carries the resourceVersion this reconcile
// read, so status computed from an out-of-date read (another manager wrote
// since, or the cache lags) is refused with a Conflict instead of silently
// overwriting newer values. Update sends the whole status, so zero values the
// object never had (lag: 0 after a first cycle that reached CURRENT) are
// written too; a merge patch from the zero status would omit them.
//
// Skipping identical writes matters: every write bumps resourceVersion, wakes
// every watcher (Argo CD, Flux, kubectl get -w) and costs etcd a revision, for
// every scope at every interval.
func (r *ProjectionRecoveryReconciler) writeStatus(ctx context.Context, before, after *recoveryv1.ProjectionRecovery) error {
	if equality.Semantic.DeepEqual(before.Status, after.Status) {
		return nil
	}
	r.Metrics.statusWrites.Inc()
	if err := r.Status().Update(ctx, after); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	return nil
}

// publish makes what status now says visible elsewhere, once it is the
// status of the object: the completeness endpoint and the gauges follow it
// (FR-APR11), and a transition gets its Event and one info log line.
func (r *ProjectionRecoveryReconciler) publish(ctx context.Context, before, after *recoveryv1.ProjectionRecovery) {
	st := &after.Status
	r.Registry.CycleEnded(after.Namespace, after.Name, after.Spec.Scope, r.Clock.Now(), completenessOf(st))
	r.Metrics.observeStatus(after)
	prev := &before.Status
	if prev.State != st.State || prev.Reason != st.Reason {
		logf.FromContext(ctx).Info("state transition", "scope", after.Spec.Scope,
			"from", string(prev.State), "to", string(st.State), "reason", st.Reason)
	}
	r.emitTransition(after, prev)
}

// redact removes every DSN, password and token of secs from a message (driver
// errors may echo a connection string; status, events and logs never carry
// one). Longest first, or a password replaced inside its DSN would leave the
// rest of that DSN; secrets shorter than minRedactable are left alone (they
// would garble every message and are not protected by redaction anyway).
func redact(msg string, secs ...resolvedSecrets) string {
	if msg == "" {
		return msg
	}
	if len(secs) == 1 {
		return replaceSecrets(msg, secretsIn(secs[0]))
	}
	var all []string
	for _, sec := range secs {
		all = append(all, secretsIn(sec)...)
	}
	sort.SliceStable(all, func(i, j int) bool { return len(all[i]) > len(all[j]) })
	return replaceSecrets(msg, all)
}

// replaceSecrets replaces each secret of a longest-first list.
func replaceSecrets(msg string, secrets []string) string {
	for _, secret := range secrets {
		if len(secret) >= minRedactable {
			msg = strings.ReplaceAll(msg, secret, "[redacted]")
		}
	}
	return msg
}

// secretsIn is what redact replaces: the DSN, the token and the password
// in every form a message could carry. Parsing the DSN as the driver does
// (parseTenantDSN: pgx also reads the environment and the passfile) costs more
// than the rest of an idle cycle, and the inputs change only on rotation, so
// the result is remembered per (DSN, token).
func secretsIn(sec resolvedSecrets) []string {
	return redactions.get(sec)
}

// redactionMemo remembers secretsIn's results. Bounded: past
// maxRedactionMemo entries (rotations of many Secrets) it starts over.
type redactionMemo struct {
	mu sync.Mutex
	m  map[[2]string][]string
}

const maxRedactionMemo = 4096

var redactions redactionMemo

func (r *redactionMemo) get(sec resolvedSecrets) []string {
	k := [2]string{sec.dsn, sec.token}
	r.mu.Lock()
	defer r.mu.Unlock()
	if out, ok := r.m[k]; ok {
		return out
	}
	if r.m == nil || len(r.m) >= maxRedactionMemo {
		r.m = map[[2]string][]string{}
	}
	out := computeSecretsIn(sec)
	r.m[k] = out
	return out
}

func computeSecretsIn(sec resolvedSecrets) []string {
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
	// The password exactly as the driver reads it: key/value values may be
	// quoted with escapes and spaces, URLs percent-encoded, and PGPASSWORD
	// may supply it. The heuristics above still cover a DSN the driver
	// refuses (its text can still reach a message). Parsed only through
	// parseTenantDSN: a plain parse would read the files a tenant's DSN
	// names.
	if cfg, err := parseTenantDSN(sec.dsn); err == nil && cfg.Password != "" {
		out = append(out, cfg.Password, url.QueryEscape(cfg.Password), url.PathEscape(cfg.Password))
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// minRedactable is the shortest secret redact replaces.
const minRedactable = 4

func truncate(s string) string { return truncateTo(s, maxMessage) }
