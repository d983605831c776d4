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
	"fmt"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// The deciders below are pure: inputs in, decision out, no clock read, no I/O.
// The cycle calls them; table tests pin them down.

// classify maps a cycle's final error to a state and a stable reason code,
// once: transient codes retry, every other refusal blocks (FR-APR06/10).
func classify(err error) (State, codes.Code) {
	code := codes.Of(err)
	if code.Transient() {
		return StateRetrying, code
	}
	return StateBlocked, code
}

// stateAfterProgress is the state of a scope whose cycle ended without error;
// boundary is the effective one (effectiveBoundary).
func stateAfterProgress(verified, boundary int64, current bool) State {
	if current || (boundary > 0 && verified >= boundary) {
		return StateCurrent
	}
	return StateCatchingUp
}

// idleCheckSuffices says whether a CURRENT scope's cycle can stop after the
// idle probe: the member answered idle at the boundary the cursor already
// records, so there is nothing to write and nothing to report. This is what
// keeps an idle scope at one source request, a couple of reads and no status
// write per interval.
func idleCheckSuffices(c store.Cursor, p pageView) bool {
	return c.Exists && c.State == store.StateCurrent && p.idle && p.boundary == c.LastObservedBoundarySeq && p.through == c.VerifiedThroughSeq
}

// pageView is what the deciders need of a fetched page.
type pageView struct {
	idle              bool
	boundary, through int64
}

// gate is what a cycle may do, decided from the cursor and the selected run
// read together at its start, before any request to the member.
type gate struct {
	code   codes.Code // non-empty: BLOCKED with this code, nothing fetched
	detail string
	// drained: a DRAINING run verified through its frozen sequence is
	// CURRENT and nothing past f is fetched (FR-APR09). Fetching after f would
	// ask the member for commands the scope must never apply, and a command
	// f+1 larger than the page would even block it (RECOVERY_COMMAND_EXCEEDS_PAGE).
	drained bool
}

// gateOf decides the gate. A run that is not eligible (no selected run,
// unselected, sealed, abandoned, not managed, not epoch-v1) is a refusal that
// needs operator review (the specification's scope), checked at every cycle
// so an idle CURRENT scope notices within its interval.
func gateOf(cur store.Cursor, run store.Run) gate {
	if err := run.Eligible(); err != nil {
		return gate{code: codes.Of(err), detail: err.Error()}
	}
	if f := frozenSeq(run); f != nil {
		switch {
		case cur.VerifiedThroughSeq > *f:
			return gate{code: codes.BeyondFrozen, detail: fmt.Sprintf("%s: the cursor is verified through %d, past the DRAINING run's frozen sequence %d", codes.BeyondFrozen, cur.VerifiedThroughSeq, *f)}
		case cur.VerifiedThroughSeq == *f:
			return gate{drained: true}
		}
	}
	return gate{}
}

// frozenSeq is the frozen sequence of a DRAINING run, nil for any other.
func frozenSeq(run store.Run) *int64 {
	if run.Phase == store.PhaseDraining {
		return run.FrozenSeq
	}
	return nil
}

// effectiveBoundary is what a scope is caught up to: the member's boundary B,
// or min(B, f) for a DRAINING run frozen at f (FR-APR09). State and lag are
// measured against it, so a drained scope is CURRENT with lag 0 on every
// manager, whether it holds the lease or only observes.
func effectiveBoundary(boundary int64, frozen *int64) int64 {
	if frozen != nil && *frozen < boundary {
		return *frozen
	}
	return boundary
}

// Lag is the effective boundary minus verified-through, never negative.
func Lag(boundary, verified int64, frozen *int64) int64 {
	return max(0, effectiveBoundary(boundary, frozen)-verified)
}

// progressMessage is the status message of a cycle that made or observed
// progress. It depends only on the cursor and the boundary, never on what
// this particular cycle did, so the manager holding the lease and the ones
// observing it write the same message and status does not flap between them.
func progressMessage(verified, boundary int64, frozen *int64) string {
	if frozen != nil && *frozen < boundary {
		if verified >= *frozen {
			return fmt.Sprintf("DRAINING run verified through its frozen sequence %d; nothing past it is fetched (the member's boundary is %d)", *frozen, boundary)
		}
		return fmt.Sprintf("verified through %d of the DRAINING run's frozen sequence %d (the member's boundary is %d)", verified, *frozen, boundary)
	}
	return fmt.Sprintf("verified through %d of boundary %d", verified, boundary)
}

// leaseNeedsRenewal says whether a lease set by a statement sent at sentAt
// must be renewed before the next write: once half its duration has passed,
// so a page transaction never starts on a lease about to lapse. Both times
// come from the local monotonic clock (never compared with the database's).
func leaseNeedsRenewal(sentAt, now time.Time, ttl time.Duration) bool {
	return now.Sub(sentAt) >= ttl/2
}
