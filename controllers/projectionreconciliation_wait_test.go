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

// Only a recovery that has not reached CURRENT since it began holds its
// scheduled dry run: one RETRYING, BLOCKED (a dry run explains it),
// suspended or stalled before any cycle does not.
func TestRecoveryCatchingUp(t *testing.T) {
	ready := func(reason string) []metav1.Condition {
		return []metav1.Condition{{Type: recoveryv1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason}}
	}
	for _, c := range []struct {
		name    string
		state   recoveryv1.RecoveryState
		conds   []metav1.Condition
		suspend bool
		want    bool
	}{
		{"catching up", recoveryv1.StateCatchingUp, nil, false, true},
		{"no status yet", "", nil, false, true},
		{"awaiting its first cycle", "", ready(recoveryv1.ReasonAwaitingFirstCycle), false, true},
		{"current", recoveryv1.StateCurrent, nil, false, false},
		{"retrying", recoveryv1.StateRetrying, nil, false, false},
		{"blocked", recoveryv1.StateBlocked, nil, false, false},
		{"suspended before any cycle", "", nil, true, false},
		{"suspended mid catch-up", recoveryv1.StateCatchingUp, nil, true, false},
		{"a Secret missing before any cycle", "", ready(recoveryv1.ReasonSecretNotFound), false, false},
		{"auto-recovery off", "", ready(recoveryv1.ReasonAutoRecoveryDisabled), false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recoveryv1.ProjectionRecovery{Spec: recoveryv1.ProjectionRecoverySpec{Suspend: c.suspend},
				Status: recoveryv1.ProjectionRecoveryStatus{State: c.state, Conditions: c.conds}}
			if got := recoveryCatchingUp(rec); got != c.want {
				t.Fatalf("recoveryCatchingUp = %v, want %v", got, c.want)
			}
		})
	}
}

// The wait's limit counts from when the run fell due: an interval after the
// last run, or the object's creation for its first.
func TestScheduleDueSince(t *testing.T) {
	created := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	last := created.Add(3 * time.Hour)
	obj := &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)},
		Spec: recoveryv1.ProjectionReconciliationSpec{Schedule: &recoveryv1.ReconciliationSchedule{Interval: metav1.Duration{Duration: 5 * time.Minute}}}}
	t.Run("first run: its creation", func(t *testing.T) {
		if got := scheduleDueSince(obj); !got.Equal(created) {
			t.Fatalf("due since %s, want %s", got, created)
		}
	})
	t.Run("later runs: an interval after the last", func(t *testing.T) {
		o := obj.DeepCopy()
		o.Status.LastRunAt = nowTime(last)
		if got := scheduleDueSince(o); !got.Equal(last.Add(5 * time.Minute)) {
			t.Fatalf("due since %s, want %s", got, last.Add(5*time.Minute))
		}
	})
}
