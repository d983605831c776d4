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
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// TestEnvtest_RewrittenHistoryIsBlockedNeverCurrent: the member restarts
// over an empty log and trades its seeded commands again stamped with
// another clock (another history at the same sequences, as the chart's
// member did with the wall clock). While it is behind, the scope is RETRYING
// and says that its chain will be proven; back at exactly the verified
// sequence, where the probe is idle, it is BLOCKED HISTORY_REWRITTEN
// (Stalled), never CURRENT, and nothing is written; with its own log back
// the scope is CURRENT again (FR-APR04).
func TestEnvtest_RewrittenHistoryIsBlockedNeverCurrent(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "rewritten-history", 60, 0.2)
	obj := f.recovery(ns, "rewritten-history", nil, nil)
	verified := f.boundary()
	waitState(t, ns, obj.Name, 60*time.Second, "CURRENT", isCurrentAt(verified))

	desc := engine.TestDescriptor(f.scope)
	l, err := engine.Create(t.TempDir(), desc, engine.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := engine.NewWorkload(7, engine.WorkloadConfig{Accounts: 4, Instruments: desc.Instruments, Openings: true,
		Start: time.Date(2026, 12, 5, 17, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	trade := func(n int64) {
		for l.LastSeq() < n {
			if _, err := l.Append(w.Next()); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Commit(l.LastSeq()); err != nil {
			t.Fatal(err)
		}
	}
	trade(verified / 2)
	f.restartOver(l)
	got, _ := waitState(t, ns, obj.Name, 60*time.Second, "RETRYING while the member is behind", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.State == recoveryv1.StateRetrying
	})
	ready := meta.FindStatusCondition(got.Status.Conditions, recoveryv1.ConditionReady)
	if got.Status.Reason != string(codes.SourceUnavailable) || ready == nil || ready.Status != metav1.ConditionFalse ||
		!strings.Contains(ready.Message, "proven before the scope is CURRENT again") {
		t.Fatalf("behind: reason %s, Ready %+v: want SOURCE_UNAVAILABLE and a Ready message saying the chain will be proven", got.Status.Reason, ready)
	}

	trade(verified)
	got, seen := waitState(t, ns, obj.Name, 60*time.Second, "BLOCKED HISTORY_REWRITTEN", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.State == recoveryv1.StateBlocked
	})
	stalled := meta.FindStatusCondition(got.Status.Conditions, recoveryv1.ConditionStalled)
	if got.Status.Reason != string(codes.HistoryRewritten) || stalled == nil || stalled.Status != metav1.ConditionTrue ||
		!strings.Contains(stalled.Message, "another history") {
		t.Fatalf("back at %d: reason %s, Stalled %+v: want HISTORY_REWRITTEN, Stalled=True naming another history", verified, got.Status.Reason, stalled)
	}
	// More cycles (a BLOCKED scope is re-checked every five minutes, or at
	// once on request): still refused, never CURRENT.
	for _, req := range []string{"again-1", "again-2"} {
		requestCycle(t, ns, obj.Name, req)
		var more []recoveryv1.RecoveryState
		got, more = waitState(t, ns, obj.Name, 30*time.Second, "the cycle "+req+" asked for", func(o *recoveryv1.ProjectionRecovery) bool {
			return o.Status.LastHandledRequestedAt == req
		})
		seen = append(seen, more...)
	}
	if slices.Contains(seen, recoveryv1.StateCurrent) || got.Status.State != recoveryv1.StateBlocked {
		t.Fatalf("states after the member came back: %v, now %s, want never CURRENT", seen, got.Status.State)
	}
	cur, err := f.store.ReadCursor(context.Background(), f.scope)
	if err != nil || cur.State != store.StateBlocked || cur.BlockedReason != string(codes.HistoryRewritten) || cur.VerifiedThroughSeq != verified {
		t.Fatalf("SQL cursor %+v (%v), want BLOCKED HISTORY_REWRITTEN at %d", cur, err, verified)
	}

	f.restartOver(f.log)
	requestCycle(t, ns, obj.Name, "restored")
	waitState(t, ns, obj.Name, 60*time.Second, "CURRENT with the member's own log back", isCurrentAt(verified))
}
