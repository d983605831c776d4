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
	"errors"
	"fmt"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// cycleResult is what one bounded cycle proved, observed and failed on.
type cycleResult struct {
	state   recoveryv1.RecoveryState
	reason  string // stable code when RETRYING or BLOCKED (a codes.Code), or a spec reason
	message string

	cursor   store.Cursor // latest known cursor (after the last committed page)
	boundary int64        // latest observed source boundary (0: none observed)
	lease    *store.Lease // lease held or observed, when known
	pages    int          // pages committed by this cycle
	events   int          // events applied by this cycle
	readOnly bool         // auto-recovery off: nothing was written
	// observer: another manager holds the lease (in lease); this one only reported.
	observer bool
}

// reconcileCycle runs one bounded cycle (FR-APR10) and records its outcome
// on the scope: at most pagesPerCycle pages, no new page started after
// cycleTimeout, and a hard deadline of one lease duration so that a stuck
// source or database can never keep the worker past its lease.
func (r *ProjectionRecoveryReconciler) reconcileCycle(ctx context.Context, s *recoveryScope) error {
	obj := s.obj
	r.Registry.CycleStarted(obj.Namespace, obj.Name, obj.Spec.Scope, s.now, r.AutoRecovery)
	start := r.Clock.Now()

	cctx, cancel := context.WithTimeout(ctx, obj.Spec.EffectiveLeaseDuration())
	defer cancel()
	res := r.runCycle(cctx, s)

	s.cycle = &res
	s.state, s.reason, s.message = res.state, res.reason, res.message
	if res.readOnly && res.state != recoveryv1.StateCurrent {
		s.reason = recoveryv1.ReasonAutoRecoveryDisabled
	}
	r.Metrics.observeCycle(obj, res, r.Clock.Since(start))
	return nil
}

func (r *ProjectionRecoveryReconciler) runCycle(ctx context.Context, s *recoveryScope) cycleResult {
	spec := &s.obj.Spec
	log := logf.FromContext(ctx).WithValues("scope", spec.Scope)
	fail := func(res cycleResult, err error) cycleResult {
		var code codes.Code
		res.state, code = classify(err)
		// Driver errors can echo parts of a connection string: redact before
		// the message reaches status, events or logs.
		res.reason, res.message = string(code), redact(err.Error(), s.secrets)
		log.V(1).Info("cycle failed", "code", code, "state", res.state, "err", res.message)
		return res
	}

	cl, err := r.Connections.Client(resourceKey(s.obj), &spec.Source, s.secrets)
	if err != nil {
		var inv *invalidSpecError
		if errors.As(err, &inv) {
			return cycleResult{reason: recoveryv1.ReasonInvalidSpec, message: inv.msg}
		}
		return fail(cycleResult{}, err)
	}
	// Store's errors carry their code (DATABASE_UNAVAILABLE, SCHEMA_MISSING).
	st, err := r.Connections.Store(ctx, resourceKey(s.obj), s.secrets.dsn)
	if err != nil {
		return fail(cycleResult{}, err)
	}

	// Statement 1: the cursor, the only completeness claim (FR-APR05).
	cur, err := st.ReadCursor(ctx, spec.Scope)
	if err != nil {
		return fail(cycleResult{}, err)
	}
	res := cycleResult{cursor: cur, boundary: cur.LastObservedBoundarySeq}

	// Request 1: the page after the cursor. For a CURRENT scope this is the
	// idle probe (FR-APR04: no replay on the member when nothing is new).
	page, err := cl.Fetch(ctx, cur.VerifiedThroughSeq, cur.ChainDigest, cur.DescriptorHash, spec.EffectivePageSize())
	if err != nil {
		res.boundary = max(res.boundary, refusalBoundary(err))
		return fail(res, err)
	}
	res.boundary = page.BoundarySeq

	if !r.AutoRecovery {
		// Read-only (NFR-APR01): report completeness, write nothing.
		res.readOnly = true
		res.state = stateAfterProgress(cur.VerifiedThroughSeq, page.BoundarySeq, page.Idle)
		res.message = fmt.Sprintf("auto-recovery is disabled on this manager: verified through %d of boundary %d, nothing written", cur.VerifiedThroughSeq, page.BoundarySeq)
		return res
	}
	if idleCheckSuffices(cur, pageView{idle: page.Idle, boundary: page.BoundarySeq, through: page.ThroughSeq}) {
		res.state = recoveryv1.StateCurrent
		res.message = currentMessage(cur.VerifiedThroughSeq, page.BoundarySeq)
		return res
	}

	// Something to write: take (or renew) the fenced lease (FR-APR08), then
	// read the run barrier the pages are checked against (FR-APR09).
	lease, err := st.AcquireLease(ctx, spec.Scope, r.Owner, spec.EffectiveLeaseDuration())
	if err != nil {
		held, rerr := st.ReadLease(ctx, spec.Scope)
		if rerr == nil && held.Owner != "" {
			res.lease = &held
		}
		if codes.Of(err) == codes.LeaseHeld && rerr == nil && held.Owner != "" && held.Owner != r.Owner {
			return observe(res, cur, held)
		}
		return fail(res, err)
	}
	res.lease = &lease
	run, err := st.SelectedRun(ctx, spec.Scope)
	if err != nil {
		return r.recordFailure(ctx, log, st, lease, fail(res, err))
	}

	budgetEnd := r.Clock.Now().Add(spec.EffectiveCycleTimeout())
	for {
		if page.Idle {
			// Verified through B already; record the boundary and state once.
			if err := st.RecordOutcome(ctx, lease, spec.Scope, store.StateCurrent, "", page.BoundarySeq); err != nil {
				return fail(res, err)
			}
			res.cursor.State, res.cursor.LastObservedBoundarySeq = store.StateCurrent, page.BoundarySeq
			res.state = recoveryv1.StateCurrent
			res.message = currentMessage(res.cursor.VerifiedThroughSeq, page.BoundarySeq)
			return res
		}
		pr, err := st.ApplyPage(ctx, lease, run, page)
		if err != nil {
			return r.recordFailure(ctx, log, st, lease, fail(res, err))
		}
		res.pages++
		res.events += pr.Applied
		res.cursor = advanceCursor(res.cursor, run, pr, r.Clock.Now())
		if r.OnPageCommitted != nil {
			r.OnPageCommitted(r.Owner, pr)
		}
		if pr.Current() {
			res.state = recoveryv1.StateCurrent
			res.message = currentMessage(pr.VerifiedThroughSeq, pr.BoundarySeq)
			return res
		}
		if res.pages >= spec.EffectivePagesPerCycle() || !r.Clock.Now().Before(budgetEnd) {
			res.state = recoveryv1.StateCatchingUp
			res.message = fmt.Sprintf("verified through %d of boundary %d; %d pages (%d events) applied this cycle", pr.VerifiedThroughSeq, res.boundary, res.pages, res.events)
			return res
		}
		page, err = cl.Fetch(ctx, pr.VerifiedThroughSeq, pr.ChainDigest, run.DescriptorHash, spec.EffectivePageSize())
		if err != nil {
			res.boundary = max(res.boundary, refusalBoundary(err))
			return r.recordFailure(ctx, log, st, lease, fail(res, err))
		}
		res.boundary = page.BoundarySeq
	}
}

// observe reports a scope whose lease another live manager holds. That is
// not a failure of the scope: the other manager is doing the work, and the
// SQL cursor (which only the lease holder writes, FR-APR05/08) says how far it
// got. Reporting RETRYING/LEASE_HELD instead would make the status of every
// scope flap between the managers of a multi-replica deployment.
func observe(res cycleResult, cur store.Cursor, held store.Lease) cycleResult {
	res.observer, res.lease = true, &held
	res.state = stateOfCursor(cur, res.boundary)
	if res.state == recoveryv1.StateBlocked || res.state == recoveryv1.StateRetrying {
		res.reason = cur.BlockedReason
	}
	res.message = fmt.Sprintf("scope worked by %s (lease fence %d); verified through %d of boundary %d", held.Owner, held.Fence, cur.VerifiedThroughSeq, res.boundary)
	return res
}

// stateOfCursor maps the SQL cursor's state to the resource's.
func stateOfCursor(cur store.Cursor, boundary int64) recoveryv1.RecoveryState {
	switch cur.State {
	case store.StateBlocked:
		return recoveryv1.StateBlocked
	case store.StateRetrying:
		return recoveryv1.StateRetrying
	}
	return stateAfterProgress(cur.VerifiedThroughSeq, boundary, false)
}

// recordFailure mirrors a failed cycle into the SQL cursor (FR-APR05: state
// and blocked reason) under the fence. It is best-effort: a lost lease or a
// database that is gone simply leaves the previous cursor state, and the
// status still carries the failure.
func (r *ProjectionRecoveryReconciler) recordFailure(ctx context.Context, log logr.Logger, st *store.Store, lease store.Lease, res cycleResult) cycleResult {
	switch codes.Code(res.reason) {
	case codes.LeaseLost, codes.LeaseHeld, codes.DatabaseUnavailable:
		return res
	}
	state := store.StateRetrying
	if res.state == recoveryv1.StateBlocked {
		state = store.StateBlocked
	}
	if err := st.RecordOutcome(ctx, lease, lease.Scope, state, codes.Code(res.reason), res.boundary); err != nil {
		log.V(1).Info("could not record the outcome on the cursor", "err", err.Error())
	} else {
		res.cursor.State, res.cursor.BlockedReason = state, res.reason
	}
	return res
}

// advanceCursor is the cursor a committed page left, without re-reading it.
func advanceCursor(c store.Cursor, run store.Run, pr store.PageResult, now time.Time) store.Cursor {
	c.Exists = true
	c.VerifiedThroughSeq, c.ChainDigest, c.EventCount = pr.VerifiedThroughSeq, pr.ChainDigest, pr.EventCount
	c.LastObservedBoundarySeq = max(c.LastObservedBoundarySeq, pr.BoundarySeq)
	c.State = pr.State
	c.BlockedReason = ""
	c.DescriptorHash = run.DescriptorHash
	c.LastVerifiedAt = &now
	return c
}

func resourceKey(obj *recoveryv1.ProjectionRecovery) string { return obj.Namespace + "/" + obj.Name }

// refusalBoundary extracts B from a member refusal (409 bodies carry it).
func refusalBoundary(err error) int64 {
	var re *source.RefusalError
	if errors.As(err, &re) {
		return re.BoundarySeq
	}
	return 0
}

func currentMessage(verified, boundary int64) string {
	return fmt.Sprintf("verified through %d; the member's boundary is %d", verified, boundary)
}
