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
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// The requeue deciders are pure: inputs in, decision out, no clock read, no
// I/O. computeStatus calls them; table tests pin them down.

// catchingUpRequeue is the pause between cycles while CATCHING_UP. Fairness
// does not come from its length: the requeue goes through the work queue, so
// a scope with a long backlog goes behind every scope already waiting and
// cannot monopolise a worker (TestEnvtest_LongBacklogDoesNotStarveOthers).
// It is short because every pause is lost catch-up time (200 ms between
// cycles of 20 pages cost a third of an end-to-end catch-up), and
// not zero because a zero RequeueAfter is no requeue at all, and because the
// next cycle reads the resource from the cache: a few milliseconds let the
// cache see the status just written, so that cycle's own status write does
// not lose the optimistic-lock race to a stale read.
const catchingUpRequeue = 20 * time.Millisecond

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
