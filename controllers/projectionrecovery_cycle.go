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
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// cycleResult is what one bounded cycle proved, observed and failed on.
type cycleResult struct {
	state   recoveryv1.RecoveryState
	reason  string // stable code when RETRYING or BLOCKED (a codes.Code), or a spec reason
	message string

	cursor store.Cursor // latest known cursor (after the last committed page)
	// cursorRead: this cycle read the cursor and the selected run from SQL.
	// When false (database unreachable, schema missing, spec unusable) cursor
	// is the zero value and must not be reported: status keeps the last
	// values it knew, or it would claim VERIFIED 0 / LAG B during an outage.
	cursorRead bool
	// frozen is the frozen sequence of a DRAINING run: the scope is caught up
	// only to min(boundary, frozen) (FR-APR09).
	frozen   *int64
	boundary int64        // latest observed source boundary (0: none observed)
	lease    *store.Lease // lease held or observed, when known
	pages    int          // pages committed by this cycle
	events   int          // events applied by this cycle
	// lockHolds: how long each committed write slice held the scope's
	// projection write lock (the time live writes may have waited).
	lockHolds []time.Duration
	readOnly  bool // auto-recovery off: nothing was written
	// observer: another manager holds the lease (in lease); this one only reported.
	observer bool
}

// cycleDeadline is the hard stop of one cycle. No page starts after
// cycleTimeout; the fetch in flight then is bounded by the source client's
// request timeout (spec.source.requestTimeout), and every write by the lease
// duration (one to take or renew the lease, one for the page transaction).
// The lease duration alone would be wrong: it would include the fetch, and a
// member whose replay takes longer than the lease could never make progress;
// so would a fixed request timeout, for a member whose replay from genesis
// (NFR-APR02) takes longer than it.
func cycleDeadline(spec *recoveryv1.ProjectionRecoverySpec) time.Duration {
	return spec.EffectiveCycleTimeout() + spec.Source.EffectiveRequestTimeout() + 2*spec.EffectiveLeaseDuration()
}

// reconcileCycle runs one bounded cycle (FR-APR10) and records its outcome
// on the scope: at most pagesPerCycle pages, no new page started after
// cycleTimeout, and a hard deadline (cycleDeadline) so that a stuck source or
// database can never hold the worker.
func (r *ProjectionRecoveryReconciler) reconcileCycle(ctx context.Context, s *recoveryScope) error {
	obj := s.obj
	r.Registry.CycleStarted(obj.Namespace, obj.Name, obj.Spec.Scope, s.now, r.AutoRecovery)
	start := r.Clock.Now()

	cctx, cancel := context.WithTimeout(ctx, cycleDeadline(&obj.Spec))
	defer cancel()
	res := r.runCycle(cctx, s)
	if ctx.Err() != nil {
		// Shutdown cancelled the cycle: its failure is an artefact of the
		// cancellation, not an outcome of the scope. Reconcile writes nothing.
		return nil
	}

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
		return failed(log, res, err, s.secrets)
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

	// Statement 1: the cursor, the only completeness claim (FR-APR05), and
	// the selected run, re-checked at every cycle, idle or not (FR-APR09).
	cur, run, err := st.ReadScope(ctx, spec.Scope)
	if err != nil {
		if codes.Of(err) == codes.SchemaMissing {
			r.Connections.SchemaLost(s.secrets.dsn)
		}
		return fail(cycleResult{}, err)
	}
	res := cycleResult{cursor: cur, cursorRead: true, boundary: cur.LastObservedBoundarySeq, frozen: frozenSeq(run)}
	if g := gateOf(cur, run); g.code != "" || g.drained {
		return r.gated(ctx, log, st, r.leaseOwner(s.obj.Namespace), spec, res, g)
	}

	// The unit the previous cycle fetched for this one, when it starts at
	// the cursor just read (carriedUnit); the cycle fetches it no more.
	page, prep := r.fromCarried(s.carried, cur, run, cl, spec.EffectivePageSize())
	if page == nil {
		// Request 1: the page after the cursor. For a CURRENT scope this is
		// the idle probe (FR-APR04: no replay on the member when nothing is new).
		page, err = cl.Fetch(ctx, cur.VerifiedThroughSeq, cur.ChainDigest, cur.DescriptorHash, spec.EffectivePageSize())
		if err != nil {
			res.boundary = max(res.boundary, refusalBoundary(err))
			return fail(res, err)
		}
	}
	res.boundary = page.BoundarySeq

	if !r.AutoRecovery {
		// Read-only (NFR-APR01): report completeness, write nothing.
		res.readOnly = true
		res.state = stateAfterProgress(cur.VerifiedThroughSeq, effectiveBoundary(page.BoundarySeq, res.frozen), page.Idle)
		res.message = fmt.Sprintf("auto-recovery is disabled on this manager: %s, nothing written", progressMessage(cur.VerifiedThroughSeq, page.BoundarySeq, res.frozen))
		return res
	}
	if idleCheckSuffices(cur, pageView{idle: page.Idle, boundary: page.BoundarySeq, through: page.ThroughSeq}) {
		res.state = recoveryv1.StateCurrent
		res.message = progressMessage(cur.VerifiedThroughSeq, page.BoundarySeq, res.frozen)
		return res
	}
	return r.applyPages(ctx, log, s, st, cl, run, page, prep, res)
}

// fromCarried returns the carried unit u (its last page and the unit) when
// the cycle may start from it (carriedUsable), after waiting for its fetch;
// nil when it may not, or when its fetch failed (the cycle's own fetch from
// the cursor then meets the failure again, if it is one).
func (r *ProjectionRecoveryReconciler) fromCarried(u *carriedUnit, cur store.Cursor, run store.Run, cl *source.Client, size int) (*source.Page, *store.PreparedPage) {
	if u == nil {
		return nil, nil
	}
	var page *source.Page
	var prep *store.PreparedPage
	var err error
	if r.AutoRecovery && carriedUsable(u, cur, run, cl, size, r.Clock.Now()) && u.ahead.take(cur.VerifiedThroughSeq, cur.ChainDigest) {
		page, prep, err = u.ahead.unit()
	}
	if err != nil || page == nil || prep == nil {
		r.Metrics.carried.WithLabelValues(carriedDropped).Inc()
		return nil, nil
	}
	r.Metrics.carried.WithLabelValues(carriedUsed).Inc()
	return page, prep
}

// failed records a cycle's final error on res: its state and stable code
// (classify), the message redacted (driver errors can echo parts of a
// connection string). A missing recovery schema is not a state of the scope:
// it leaves the state as it was and says what to run.
func failed(log logr.Logger, res cycleResult, err error, sec resolvedSecrets) cycleResult {
	if codes.Of(err) == codes.SchemaMissing {
		res.state, res.reason = "", string(codes.SchemaMissing)
		res.message = "the projection database lacks recovery's tables or pending migrations: run `manager migrate` against it as the schema owner, then grant the runtime role (docs/database-role.md): " + redact(err.Error(), sec)
		return res
	}
	var code codes.Code
	res.state, code = classify(err)
	res.reason, res.message = string(code), redact(err.Error(), sec)
	if ue := (*source.UnavailableError)(nil); errors.As(err, &ue) && ue.Timeout > 0 {
		// The member is up but slower than the timeout: retrying as is would
		// time out again at every backoff step. Say which field to raise.
		res.message = "the member did not answer within spec.source.requestTimeout (" + ue.Timeout.String() +
			"); each non-idle page costs it a replay from genesis to its boundary (NFR-APR02), so a member with a long history needs a longer timeout: " + res.message
	}
	log.V(1).Info("cycle failed", "code", code, "state", res.state, "err", res.message)
	return res
}

// gated reports a cycle that ends before any request to the member: the run
// is not eligible (BLOCKED NOT_ELIGIBLE, sealed/unselected scopes need
// review), the cursor is past a DRAINING run's frozen sequence (BLOCKED
// BEYOND_FROZEN), or it reached it (CURRENT: nothing past f is ever fetched,
// FR-APR09). With auto-recovery on, the outcome is mirrored into the SQL
// cursor when it says otherwise (best-effort, under the fence).
func (r *ProjectionRecoveryReconciler) gated(ctx context.Context, log logr.Logger, st *store.Store, owner string, spec *recoveryv1.ProjectionRecoverySpec, res cycleResult, g gate) cycleResult {
	cur := res.cursor
	if g.drained {
		res.state = recoveryv1.StateCurrent
		res.message = progressMessage(cur.VerifiedThroughSeq, res.boundary, res.frozen)
		if r.AutoRecovery && cur.State != store.StateCurrent {
			r.recordBestEffort(ctx, log, st, owner, spec, store.StateCurrent, "", res.boundary)
		}
		return res
	}
	res.state, res.reason, res.message = recoveryv1.StateBlocked, string(g.code), g.detail
	if r.AutoRecovery && (cur.State != store.StateBlocked || cur.BlockedReason != string(g.code)) {
		r.recordBestEffort(ctx, log, st, owner, spec, store.StateBlocked, g.code, res.boundary)
	}
	return res
}

// recordBestEffort takes the lease just long enough to record an outcome on
// the cursor. A lease held by another live manager is left alone: that
// manager records the same outcome itself.
func (r *ProjectionRecoveryReconciler) recordBestEffort(ctx context.Context, log logr.Logger, st *store.Store, owner string, spec *recoveryv1.ProjectionRecoverySpec, state string, code codes.Code, boundary int64) {
	lease, err := st.AcquireLease(ctx, spec.Scope, owner, spec.EffectiveLeaseDuration())
	if err == nil {
		err = st.RecordOutcome(ctx, lease, spec.Scope, state, code, boundary)
	}
	if err != nil {
		log.V(1).Info("could not record the outcome on the cursor", "state", state, "code", code, "err", err.Error())
	}
}

// leaseKeeper holds the scope's fenced lease (FR-APR08) across the pages of
// one cycle. The lease is taken only once a page is fetched and verified and
// renewed before a page's transaction when half its duration has passed, so
// its clock covers the writes and never a fetch: a member slower than the
// lease still lets the scope progress. "Half" is measured on the local
// monotonic clock from before the statement that set the expiry, so clock
// skew between this manager and the database cannot overstate what is left.
type leaseKeeper struct {
	st           *store.Store
	scope, owner string
	ttl          time.Duration
	clock        clock.PassiveClock

	lease store.Lease
	at    time.Time // when the statement that set lease was sent; zero: none
}

func (k *leaseKeeper) ensure(ctx context.Context) (store.Lease, error) {
	if !k.at.IsZero() && !leaseNeedsRenewal(k.at, k.clock.Now(), k.ttl) {
		return k.lease, nil
	}
	sent := k.clock.Now()
	l, err := k.st.AcquireLease(ctx, k.scope, k.owner, k.ttl)
	if err != nil {
		return store.Lease{}, err
	}
	k.lease, k.at = l, sent
	return l, nil
}

// applyPages writes the fetched page and the following ones, each in its own
// fenced transaction (FR-APR06/08), within the cycle's page and time budget.
//
// prep is the unit to commit: page verified, or the pages up to page merged
// (pageAhead.unit, a carried unit); nil until page is verified.
func (r *ProjectionRecoveryReconciler) applyPages(ctx context.Context, log logr.Logger, s *recoveryScope, st *store.Store, cl *source.Client, run store.Run, page *source.Page, prep *store.PreparedPage, res cycleResult) cycleResult {
	spec := &s.obj.Spec
	fail := func(res cycleResult, err error) cycleResult { return failed(log, res, err, s.secrets) }
	keeper := &leaseKeeper{st: st, scope: spec.Scope, owner: r.leaseOwner(s.obj.Namespace), ttl: spec.EffectiveLeaseDuration(), clock: r.Clock}
	budgetEnd := r.Clock.Now().Add(spec.EffectiveCycleTimeout())
	// ahead is the next unit, fetched while this one commits: the cycle's
	// next, or (carry) the next cycle's first when this unit spends the
	// page budget.
	var ahead *pageAhead
	carry := false
	defer func() { ahead.stop() }()
	for {
		lease, err := keeper.ensure(ctx)
		if err != nil {
			held, rerr := st.ReadLease(ctx, spec.Scope)
			if rerr == nil && held.Owner != "" {
				res.lease = &held
			}
			if codes.Of(err) == codes.LeaseHeld && rerr == nil && held.Owner != "" && held.Owner != keeper.owner {
				return observe(res, res.cursor, held)
			}
			return fail(res, err)
		}
		res.lease = &lease
		if page.Idle {
			// Verified through B already; record the boundary and state once.
			if err := st.RecordOutcome(ctx, lease, spec.Scope, store.StateCurrent, "", page.BoundarySeq); err != nil {
				return fail(res, err)
			}
			res.cursor.State, res.cursor.LastObservedBoundarySeq = store.StateCurrent, max(res.cursor.LastObservedBoundarySeq, page.BoundarySeq)
			res.state = recoveryv1.StateCurrent
			res.message = progressMessage(res.cursor.VerifiedThroughSeq, page.BoundarySeq, res.frozen)
			return res
		}
		if prep == nil {
			if prep, err = st.PreparePage(run, page); err != nil {
				return r.recordFailure(ctx, log, keeper, fail(res, err))
			}
		}
		// The next unit is fetched and verified while this one commits,
		// unless the member has no more: the cycle's next unit, or, when
		// this unit spends the page budget, the next cycle's first
		// (carriedUnit: its fetch outlives the cycle's context and stops
		// when the unit is dropped).
		switch left := spec.EffectivePagesPerCycle() - res.pages - prep.Pages(); {
		case page.ThroughSeq >= page.BoundarySeq:
		case left > 0:
			ahead = fetchAhead(ctx, st, cl, run, page.ThroughSeq, page.DigestThrough, spec.EffectivePageSize(), left)
		case r.carry != nil:
			ahead, carry = fetchAhead(context.WithoutCancel(ctx), st, cl, run, page.ThroughSeq, page.DigestThrough, spec.EffectivePageSize(), spec.EffectivePagesPerCycle()), true
		}
		// The transaction is bounded by the lease: it locks the lease row
		// first, so past that a takeover waits for it; it must not wait forever.
		wctx, cancel := context.WithTimeout(ctx, keeper.ttl)
		pr, err := st.ApplyPrepared(wctx, lease, run, prep)
		cancel()
		pages := prep.Pages()
		prep = nil
		if pr.Committed() {
			// The unit commits in write slices; those before a failing
			// one stay committed and the cursor stands after them.
			res = r.committed(res, run, pr, pages)
		}
		if err != nil {
			return r.recordFailure(ctx, log, keeper, fail(res, err))
		}
		if pr.Current() {
			res.state = recoveryv1.StateCurrent
			res.message = progressMessage(pr.VerifiedThroughSeq, pr.BoundarySeq, res.frozen)
			return res
		}
		if res.pages >= spec.EffectivePagesPerCycle() || !r.Clock.Now().Before(budgetEnd) {
			if carry && ahead.after == pr.VerifiedThroughSeq && ahead.digest == pr.ChainDigest {
				evicted := r.carry.park(client.ObjectKeyFromObject(s.obj), &carriedUnit{ahead: ahead, run: run, client: cl, size: spec.EffectivePageSize(), parked: r.Clock.Now()})
				r.Metrics.carried.WithLabelValues(carriedEvicted).Add(float64(evicted))
				ahead = nil
			}
			res.state = recoveryv1.StateCatchingUp
			res.message = progressMessage(pr.VerifiedThroughSeq, res.boundary, res.frozen)
			log.V(1).Info("cycle budget used", "pages", res.pages, "events", res.events, "verified", pr.VerifiedThroughSeq)
			return res
		}
		var next *source.Page
		if ahead.take(pr.VerifiedThroughSeq, pr.ChainDigest) {
			next, prep, err = ahead.unit()
		}
		if next == nil && err == nil {
			next, err = cl.Fetch(ctx, pr.VerifiedThroughSeq, pr.ChainDigest, run.DescriptorHash, spec.EffectivePageSize())
		}
		ahead = nil
		if next != nil {
			page = next
			res.boundary = page.BoundarySeq
		}
		if err != nil {
			res.boundary = max(res.boundary, refusalBoundary(err))
			return r.recordFailure(ctx, log, keeper, fail(res, err))
		}
	}
}

// committed records what a unit's committed slices did; pages is how many
// fetched pages the unit held.
func (r *ProjectionRecoveryReconciler) committed(res cycleResult, run store.Run, pr store.PageResult, pages int) cycleResult {
	res.pages += pages
	res.events += pr.Applied
	res.lockHolds = append(res.lockHolds, pr.LockHeld...)
	res.cursor = advanceCursor(res.cursor, run, pr, r.Clock.Now())
	if r.OnPageCommitted != nil {
		r.OnPageCommitted(r.Owner, pr)
	}
	return res
}

// observe reports a scope whose lease another live manager holds. That is
// not a failure of the scope: the other manager is doing the work, and the
// SQL cursor (which only the lease holder writes, FR-APR05/08) says how far it
// got. Reporting RETRYING/LEASE_HELD instead would make the status of every
// scope flap between the managers of a multi-replica deployment; for the same
// reason the message is the one the holder writes for the same cursor.
func observe(res cycleResult, cur store.Cursor, held store.Lease) cycleResult {
	res.observer, res.lease = true, &held
	res.state = stateOfCursor(cur, effectiveBoundary(res.boundary, res.frozen))
	if res.state == recoveryv1.StateBlocked || res.state == recoveryv1.StateRetrying {
		res.reason = cur.BlockedReason
	}
	res.message = progressMessage(cur.VerifiedThroughSeq, res.boundary, res.frozen)
	return res
}

// stateOfCursor maps the SQL cursor's state to the resource's, against the
// effective boundary.
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
// and blocked reason) under the fence, renewing the lease first when the
// failure came after a long fetch. It is best-effort: a lost lease or a
// database that is gone simply leaves the previous cursor state, and the
// status still carries the failure.
func (r *ProjectionRecoveryReconciler) recordFailure(ctx context.Context, log logr.Logger, keeper *leaseKeeper, res cycleResult) cycleResult {
	switch codes.Code(res.reason) {
	case codes.LeaseLost, codes.LeaseHeld, codes.DatabaseUnavailable, codes.SchemaMissing:
		return res
	}
	state := store.StateRetrying
	if res.state == recoveryv1.StateBlocked {
		state = store.StateBlocked
	}
	lease, err := keeper.ensure(ctx)
	if err == nil {
		err = keeper.st.RecordOutcome(ctx, lease, lease.Scope, state, codes.Code(res.reason), res.boundary)
	}
	if err != nil {
		log.V(1).Info("could not record the outcome on the cursor", "err", err.Error())
		return res
	}
	res.cursor.State, res.cursor.BlockedReason = state, res.reason
	if state == store.StateBlocked {
		// A BLOCKED scope has nothing to write until someone acts (a repair,
		// a fix by hand). Holding its lease for the rest of the lease
		// duration would make an approved reconciliation repair meet
		// lease_unavailable; releasing keeps the fence (the next owner's
		// acquire increments it), so nothing stale can commit.
		if rerr := keeper.st.ReleaseLease(ctx, lease); rerr != nil {
			log.V(1).Info("could not release the lease of a BLOCKED scope; it expires on its own", "err", rerr.Error())
		}
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
	// The database's clock, as the next read of the cursor will say; ours
	// only if the store did not return it.
	if !pr.VerifiedAt.IsZero() {
		now = pr.VerifiedAt
	}
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
