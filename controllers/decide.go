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
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// The deciders below are pure: inputs in, decision out, no clock read, no I/O.
// Reconcile and the cycle call them; table tests pin them down.

// catchingUpRequeue is the pause between cycles while CATCHING_UP. Short, so
// a lagging scope converges quickly, but non-zero so that one scope with a
// long backlog cannot monopolise a worker and starve the others on the queue.
const catchingUpRequeue = 200 * time.Millisecond

// blockedRecheck is the slowest recheck of a BLOCKED scope: nothing changes
// until an operator acts (and editing the resource wakes it at once), but a
// repair made directly in SQL is noticed within this bound.
const blockedRecheck = 5 * time.Minute

// retryBackoff is the delay before retry number failures (1-based) while
// RETRYING (FR-APR10): base·2^(failures-1), capped. It uses apimachinery's
// wait.Backoff without jitter, so the sequence is deterministic and testable.
func retryBackoff(failures int32, base, maxDelay time.Duration) time.Duration {
	if failures < 1 {
		failures = 1
	}
	b := wait.Backoff{Duration: base, Factor: 2, Steps: int(failures), Cap: maxDelay}
	var d time.Duration
	// Past 64 doublings every duration is capped; stop stepping there.
	for i := int32(0); i < failures && i < 64; i++ {
		d = b.Step()
		if d >= maxDelay {
			return maxDelay
		}
	}
	return d
}

// requeueAfter decides when the next cycle of a scope runs.
func requeueAfter(state recoveryv1.RecoveryState, failures int32, spec *recoveryv1.ProjectionRecoverySpec) time.Duration {
	interval := spec.EffectiveInterval()
	switch state {
	case recoveryv1.StateCatchingUp:
		return catchingUpRequeue
	case recoveryv1.StateRetrying:
		base, maxDelay := spec.EffectiveBackoff()
		return retryBackoff(failures, base, maxDelay)
	case recoveryv1.StateBlocked:
		return max(interval, blockedRecheck)
	}
	return interval
}

// classify maps a cycle's final error to a state and a stable reason code,
// once: transient codes retry, every other refusal blocks (FR-APR06/10).
func classify(err error) (recoveryv1.RecoveryState, codes.Code) {
	code := codes.Of(err)
	if code.Transient() {
		return recoveryv1.StateRetrying, code
	}
	return recoveryv1.StateBlocked, code
}

// stateAfterProgress is the state of a scope whose cycle ended without error.
func stateAfterProgress(verified, boundary int64, current bool) recoveryv1.RecoveryState {
	if current || (boundary > 0 && verified >= boundary) {
		return recoveryv1.StateCurrent
	}
	return recoveryv1.StateCatchingUp
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

// observerMinRequeue keeps a manager that only observes another's lease from
// polling the member (each non-idle probe costs the member a replay).
const observerMinRequeue = time.Second

// observerRequeue is when a manager that found the lease held elsewhere
// looks again: when that lease would expire if its holder died (so the scope
// is taken over promptly), but no later than the interval.
func observerRequeue(now, leaseExpiresAt time.Time, interval time.Duration) time.Duration {
	d := leaseExpiresAt.Sub(now) + 100*time.Millisecond
	return min(max(d, observerMinRequeue), interval)
}
