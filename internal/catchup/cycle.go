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

package catchup

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

func (e *Engine) run(ctx context.Context, c *Cycle) Result {
	log := logr.FromContextOrDiscard(ctx).WithValues("scope", c.Scope)
	fail := func(res Result, err error) Result {
		return failed(log, res, err, c.Redact)
	}

	cl, err := c.Connector.Client()
	if err != nil {
		var inv *InvalidSpecError
		if errors.As(err, &inv) {
			return Result{Reason: ReasonInvalidSpec, Message: inv.Msg}
		}
		return fail(Result{}, err)
	}
	// Store's errors carry their code (DATABASE_UNAVAILABLE, SCHEMA_MISSING).
	st, err := c.Connector.Store(ctx)
	if err != nil {
		return fail(Result{}, err)
	}

	// Statement 1: the cursor, the only completeness claim (FR-APR05), and
	// the selected run, re-checked at every cycle, idle or not (FR-APR09).
	cur, run, err := st.ReadScope(ctx, c.Scope)
	if err != nil {
		if codes.Of(err) == codes.SchemaMissing {
			c.Connector.SchemaLost()
		}
		return fail(Result{}, err)
	}
	res := Result{Cursor: cur, CursorRead: true, Boundary: cur.LastObservedBoundarySeq, Frozen: frozenSeq(run)}
	if g := gateOf(cur, run); g.code != "" || g.drained {
		return e.gated(ctx, log, st, c, res, g)
	}

	// The unit the previous cycle fetched for this one, when it starts at
	// the cursor just read (CarriedUnit); the cycle fetches it no more.
	page, prep := e.fromCarried(c.Carried, cur, run, cl, c.Limits.PageSize)
	if page == nil {
		// Request 1: the page after the cursor. For a CURRENT scope this is
		// the idle probe (FR-APR04: no replay on the member when nothing is new).
		page, err = cl.Fetch(ctx, cur.VerifiedThroughSeq, cur.ChainDigest, cur.DescriptorHash, c.Limits.PageSize)
		if err != nil {
			res.Boundary = max(res.Boundary, refusalBoundary(err))
			return e.probeFailed(ctx, log, st, c, res, behindCursor(err, cur))
		}
	}
	res.Boundary = page.BoundarySeq
	if page.Idle {
		// An idle page certifies nothing this manager cannot prove about
		// the member's chain through the cursor (FR-APR03/04, proof.go).
		if err := e.proveIdle(ctx, log, c, cl, cur); err != nil {
			return e.probeFailed(ctx, log, st, c, res, err)
		}
	}

	if !e.AutoRecovery {
		// Read-only (NFR-APR01): report completeness, write nothing.
		res.ReadOnly = true
		res.State = stateAfterProgress(cur.VerifiedThroughSeq, effectiveBoundary(page.BoundarySeq, res.Frozen), page.Idle)
		res.Message = fmt.Sprintf("auto-recovery is disabled on this manager: %s, nothing written", progressMessage(cur.VerifiedThroughSeq, page.BoundarySeq, res.Frozen))
		return res
	}
	if idleCheckSuffices(cur, pageView{idle: page.Idle, boundary: page.BoundarySeq, through: page.ThroughSeq}) {
		res.State = StateCurrent
		res.Message = progressMessage(cur.VerifiedThroughSeq, page.BoundarySeq, res.Frozen)
		return res
	}
	return e.applyPages(ctx, log, c, st, cl, run, page, prep, res)
}

// fromCarried returns the carried unit u (its last page and the unit) when
// the cycle may start from it (carriedUsable), after waiting for its fetch;
// nil when it may not, or when its fetch failed (the cycle's own fetch from
// the cursor then meets the failure again, if it is one).
func (e *Engine) fromCarried(u *CarriedUnit, cur store.Cursor, run store.Run, cl *source.Client, size int) (*source.Page, *store.PreparedPage) {
	if u == nil {
		return nil, nil
	}
	var page *source.Page
	var prep *store.PreparedPage
	var err error
	if e.AutoRecovery && carriedUsable(u, cur, run, cl, size, e.Clock.Now()) && u.ahead.take(cur.VerifiedThroughSeq, cur.ChainDigest) {
		page, prep, err = u.ahead.unit()
	}
	if err != nil || page == nil || prep == nil {
		e.Counters.CarriedUnits(CarriedDropped, 1)
		return nil, nil
	}
	e.Counters.CarriedUnits(CarriedUsed, 1)
	return page, prep
}

// applyPages writes the fetched page and the following ones, each in its own
// fenced transaction (FR-APR06/08), within the cycle's page and time budget.
//
// prep is the unit to commit: page verified, or the pages up to page merged
// (pageAhead.unit, a carried unit); nil until page is verified.
func (e *Engine) applyPages(ctx context.Context, log logr.Logger, c *Cycle, st *store.Store, cl *source.Client, run store.Run, page *source.Page, prep *store.PreparedPage, res Result) Result {
	lim := c.Limits
	fail := func(res Result, err error) Result { return failed(log, res, err, c.Redact) }
	keeper := &leaseKeeper{st: st, scope: c.Scope, owner: c.LeaseOwner, ttl: lim.LeaseDuration, clock: e.Clock}
	budgetEnd := e.Clock.Now().Add(lim.CycleTimeout)
	// ahead is the next unit, fetched while this one commits: the cycle's
	// next, or (carry) the next cycle's first when this unit spends the
	// page budget.
	var ahead *pageAhead
	carry := false
	defer func() { ahead.stop() }()
	for {
		lease, err := keeper.ensure(ctx)
		if err != nil {
			held, rerr := st.ReadLease(ctx, c.Scope)
			if rerr == nil && held.Owner != "" {
				res.Lease = &held
			}
			if codes.Of(err) == codes.LeaseHeld && rerr == nil && held.Owner != "" && held.Owner != keeper.owner {
				return observe(res, res.Cursor, held)
			}
			return fail(res, err)
		}
		res.Lease = &lease
		if page.Idle {
			// Verified through B already; record the boundary and state once.
			if err := st.RecordOutcome(ctx, lease, c.Scope, store.StateCurrent, "", page.BoundarySeq); err != nil {
				return fail(res, err)
			}
			res.Cursor.State, res.Cursor.LastObservedBoundarySeq = store.StateCurrent, max(res.Cursor.LastObservedBoundarySeq, page.BoundarySeq)
			res.State = StateCurrent
			res.Message = progressMessage(res.Cursor.VerifiedThroughSeq, page.BoundarySeq, res.Frozen)
			return res
		}
		if prep == nil {
			if prep, err = st.PreparePage(run, page); err != nil {
				return recordFailure(ctx, log, keeper, fail(res, err))
			}
		}
		// The next unit is fetched and verified while this one commits,
		// unless the member has no more: the cycle's next unit, or, when
		// this unit spends the page budget, the next cycle's first
		// (CarriedUnit: its fetch outlives the cycle's context and stops
		// when the unit is dropped).
		switch left := lim.PagesPerCycle - res.Pages - prep.Pages(); {
		case page.ThroughSeq >= page.BoundarySeq:
		case left > 0:
			ahead = fetchAhead(ctx, st, cl, run, page.ThroughSeq, page.DigestThrough, lim.PageSize, left)
		case e.Carry != nil:
			ahead, carry = fetchAhead(context.WithoutCancel(ctx), st, cl, run, page.ThroughSeq, page.DigestThrough, lim.PageSize, lim.PagesPerCycle), true
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
			res = e.committed(res, c, cl, run, pr, pages)
		}
		if err != nil {
			return recordFailure(ctx, log, keeper, fail(res, err))
		}
		if pr.Current() {
			res.State = StateCurrent
			res.Message = progressMessage(pr.VerifiedThroughSeq, pr.BoundarySeq, res.Frozen)
			return res
		}
		if res.Pages >= lim.PagesPerCycle || !e.Clock.Now().Before(budgetEnd) {
			if carry && ahead.after == pr.VerifiedThroughSeq && ahead.digest == pr.ChainDigest {
				evicted := e.Carry.park(c.Resource, &CarriedUnit{ahead: ahead, run: run, client: cl, size: lim.PageSize, parked: e.Clock.Now()})
				e.Counters.CarriedUnits(CarriedEvicted, evicted)
				ahead = nil
			}
			res.State = StateCatchingUp
			res.Message = progressMessage(pr.VerifiedThroughSeq, res.Boundary, res.Frozen)
			log.V(1).Info("cycle budget used", "pages", res.Pages, "events", res.Events, "verified", pr.VerifiedThroughSeq)
			return res
		}
		var next *source.Page
		if ahead.take(pr.VerifiedThroughSeq, pr.ChainDigest) {
			next, prep, err = ahead.unit()
		}
		if next == nil && err == nil {
			next, err = cl.Fetch(ctx, pr.VerifiedThroughSeq, pr.ChainDigest, run.DescriptorHash, lim.PageSize)
		}
		ahead = nil
		if next != nil {
			page = next
			res.Boundary = page.BoundarySeq
		}
		if err == nil && page.Idle {
			// The member's boundary fell back to exactly the cursor this
			// unit left (it was past it): prove before certifying.
			err = e.proveIdle(ctx, log, c, cl, res.Cursor)
		}
		if err != nil {
			res.Boundary = max(res.Boundary, refusalBoundary(err))
			e.Proofs.owe(c.Resource, fmt.Sprintf("it failed to answer (%s) since its last proof", codes.Of(err)))
			return recordFailure(ctx, log, keeper, fail(res, err))
		}
	}
}

// committed records what a unit's committed slices did; pages is how many
// fetched pages the unit held, cl the client that fetched them.
func (e *Engine) committed(res Result, c *Cycle, cl *source.Client, run store.Run, pr store.PageResult, pages int) Result {
	res.Pages += pages
	res.Events += pr.Applied
	res.LockHolds = append(res.LockHolds, pr.LockHeld...)
	res.Cursor = advanceCursor(res.Cursor, run, pr, e.Clock.Now())
	if pr.VerifiedThroughSeq > 0 {
		// The page's chain was verified from the cursor to its end: the
		// member proved the chain through the cursor it leaves.
		e.Proofs.proven(c.Resource, cl, pr.VerifiedThroughSeq, pr.ChainDigest, e.Clock.Now())
	}
	if e.OnPageCommitted != nil {
		e.OnPageCommitted(e.Owner, pr)
	}
	return res
}
