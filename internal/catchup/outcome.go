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
	"time"

	"github.com/go-logr/logr"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// failed records a cycle's final error on res: its state and stable code
// (classify), the message redacted (driver errors can echo parts of a
// connection string). A missing recovery schema is not a state of the scope:
// it leaves the state as it was and says what to run.
func failed(log logr.Logger, res Result, err error, redact func(string) string) Result {
	if codes.Of(err) == codes.SchemaMissing {
		res.State, res.Reason = "", string(codes.SchemaMissing)
		res.Message = "the projection database lacks recovery's tables or pending migrations: run `manager migrate` against it as the schema owner, then grant the runtime role (docs/database-role.md): " + redact(err.Error())
		return res
	}
	var code codes.Code
	res.State, code = classify(err)
	res.Reason, res.Message = string(code), redact(err.Error())
	if ue := (*source.UnavailableError)(nil); errors.As(err, &ue) && ue.Timeout > 0 {
		// The member is up but slower than the timeout: retrying as is would
		// time out again at every backoff step. Say which field to raise.
		res.Message = "the member did not answer within spec.source.requestTimeout (" + ue.Timeout.String() +
			"); each non-idle page costs it a replay from genesis to its boundary (NFR-APR02), so a member with a long history needs a longer timeout: " + res.Message
	}
	log.V(1).Info("cycle failed", "code", code, "state", res.State, "err", res.Message)
	return res
}

// gated reports a cycle that ends before any request to the member: the run
// is not eligible (BLOCKED NOT_ELIGIBLE, sealed/unselected scopes need
// review), the cursor is past a DRAINING run's frozen sequence (BLOCKED
// BEYOND_FROZEN), or it reached it (CURRENT: nothing past f is ever fetched,
// FR-APR09). With auto-recovery on, the outcome is mirrored into the SQL
// cursor when it says otherwise (best-effort, under the fence).
func (e *Engine) gated(ctx context.Context, log logr.Logger, st *store.Store, c *Cycle, res Result, g gate) Result {
	cur := res.Cursor
	if g.drained {
		res.State = StateCurrent
		res.Message = progressMessage(cur.VerifiedThroughSeq, res.Boundary, res.Frozen)
		if e.AutoRecovery && cur.State != store.StateCurrent {
			recordBestEffort(ctx, log, st, c, store.StateCurrent, "", res.Boundary)
		}
		return res
	}
	res.State, res.Reason, res.Message = StateBlocked, string(g.code), g.detail
	if e.AutoRecovery && (cur.State != store.StateBlocked || cur.BlockedReason != string(g.code)) {
		recordBestEffort(ctx, log, st, c, store.StateBlocked, g.code, res.Boundary)
	}
	return res
}

// recordBestEffort takes the lease just long enough to record an outcome on
// the cursor. A lease held by another live manager is left alone: that
// manager records the same outcome itself.
func recordBestEffort(ctx context.Context, log logr.Logger, st *store.Store, c *Cycle, state string, code codes.Code, boundary int64) {
	lease, err := st.AcquireLease(ctx, c.Scope, c.LeaseOwner, c.Limits.LeaseDuration)
	if err == nil {
		err = st.RecordOutcome(ctx, lease, c.Scope, state, code, boundary)
	}
	if err != nil {
		log.V(1).Info("could not record the outcome on the cursor", "state", state, "code", code, "err", err.Error())
	}
}

// observe reports a scope whose lease another live manager holds. That is
// not a failure of the scope: the other manager is doing the work, and the
// SQL cursor (which only the lease holder writes, FR-APR05/08) says how far it
// got. Reporting RETRYING/LEASE_HELD instead would make the status of every
// scope flap between the managers of a multi-replica deployment; for the same
// reason the message is the one the holder writes for the same cursor.
func observe(res Result, cur store.Cursor, held store.Lease) Result {
	res.Observer, res.Lease = true, &held
	res.State = stateOfCursor(cur, effectiveBoundary(res.Boundary, res.Frozen))
	if res.State == StateBlocked || res.State == StateRetrying {
		res.Reason = cur.BlockedReason
	}
	res.Message = progressMessage(cur.VerifiedThroughSeq, res.Boundary, res.Frozen)
	return res
}

// stateOfCursor maps the SQL cursor's state to the resource's, against the
// effective boundary.
func stateOfCursor(cur store.Cursor, boundary int64) State {
	switch cur.State {
	case store.StateBlocked:
		return StateBlocked
	case store.StateRetrying:
		return StateRetrying
	}
	return stateAfterProgress(cur.VerifiedThroughSeq, boundary, false)
}

// recordFailure mirrors a failed cycle into the SQL cursor (FR-APR05: state
// and blocked reason) under the fence, renewing the lease first when the
// failure came after a long fetch. It is best-effort: a lost lease or a
// database that is gone simply leaves the previous cursor state, and the
// status still carries the failure.
func recordFailure(ctx context.Context, log logr.Logger, keeper *leaseKeeper, res Result) Result {
	switch codes.Code(res.Reason) {
	case codes.LeaseLost, codes.LeaseHeld, codes.DatabaseUnavailable, codes.SchemaMissing:
		return res
	}
	state := store.StateRetrying
	if res.State == StateBlocked {
		state = store.StateBlocked
	}
	lease, err := keeper.ensure(ctx)
	if err == nil {
		err = keeper.st.RecordOutcome(ctx, lease, lease.Scope, state, codes.Code(res.Reason), res.Boundary)
	}
	if err != nil {
		log.V(1).Info("could not record the outcome on the cursor", "err", err.Error())
		return res
	}
	res.Cursor.State, res.Cursor.BlockedReason = state, res.Reason
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

// refusalBoundary extracts B from a member refusal (409 bodies carry it).
func refusalBoundary(err error) int64 {
	var re *source.RefusalError
	if errors.As(err, &re) {
		return re.BoundarySeq
	}
	return 0
}
