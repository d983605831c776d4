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
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

func TestRetryBackoff_DoublesToTheCap(t *testing.T) {
	base, maxDelay := 200*time.Millisecond, 2*time.Second
	cases := []struct {
		name     string
		failures int32
		want     time.Duration
	}{
		{"zero failures counts as the first", 0, 200 * time.Millisecond},
		{"first failure waits the base", 1, 200 * time.Millisecond},
		{"second failure doubles", 2, 400 * time.Millisecond},
		{"third failure doubles again", 3, 800 * time.Millisecond},
		{"fourth failure still below the cap", 4, 1600 * time.Millisecond},
		{"fifth failure reaches the cap", 5, 2 * time.Second},
		{"sixth failure stays at the cap", 6, 2 * time.Second},
		{"a billion failures neither overflow nor loop", 1 << 30, 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryBackoff(tc.failures, base, maxDelay); got != tc.want {
				t.Errorf("retryBackoff(%d) = %s, want %s", tc.failures, got, tc.want)
			}
		})
	}
}

func TestRequeueAfter_PerState(t *testing.T) {
	spec := &recoveryv1.ProjectionRecoverySpec{
		Interval: &metav1.Duration{Duration: 30 * time.Second},
		Backoff:  &recoveryv1.BackoffSpec{Base: metav1.Duration{Duration: time.Second}, Cap: metav1.Duration{Duration: 10 * time.Second}},
	}
	cases := []struct {
		name     string
		state    recoveryv1.RecoveryState
		failures int32
		want     time.Duration
	}{
		{"catching up requeues at once", recoveryv1.StateCatchingUp, 0, catchingUpRequeue},
		{"current waits the interval", recoveryv1.StateCurrent, 0, 30 * time.Second},
		{"retrying after one failure waits the base", recoveryv1.StateRetrying, 1, time.Second},
		{"retrying after three failures backs off", recoveryv1.StateRetrying, 3, 4 * time.Second},
		{"retrying after nine failures is capped", recoveryv1.StateRetrying, 9, 10 * time.Second},
		{"blocked rechecks on its own period", recoveryv1.StateBlocked, 4, blockedRecheck},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := requeueAfter(tc.state, tc.failures, spec); got != tc.want {
				t.Errorf("requeueAfter(%s, %d) = %s, want %s", tc.state, tc.failures, got, tc.want)
			}
		})
	}
	long := &recoveryv1.ProjectionRecoverySpec{Interval: &metav1.Duration{Duration: time.Hour}}
	if got := requeueAfter(recoveryv1.StateBlocked, 1, long); got != time.Hour {
		t.Errorf("a BLOCKED recheck is never more frequent than the interval: got %s", got)
	}
}

func TestDecide_ObserverRequeue(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		expires  time.Time
		interval time.Duration
		want     time.Duration
	}{
		{"just after the lease would lapse", now.Add(5 * time.Second), 30 * time.Second, 5*time.Second + 100*time.Millisecond},
		{"never later than the interval", now.Add(5 * time.Minute), 30 * time.Second, 30 * time.Second},
		{"expired already: soon, not hot", now.Add(-time.Second), 30 * time.Second, observerMinRequeue},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := observerRequeue(now, tc.expires, tc.interval); got != tc.want {
				t.Errorf("observerRequeue(expires in %s) = %s, want %s", tc.expires.Sub(now), got, tc.want)
			}
		})
	}
}

// TestProgressMessage_DependsOnTheCursorOnly: the holder and the observers
// write the same message for the same cursor (no status flapping), and a
// drained DRAINING run says why its lag is 0 below the member's boundary.
