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
	clocktesting "k8s.io/utils/clock/testing"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/catchup"
	"github.com/projection-recovery/projection-recovery/internal/progress"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// TestProgress_StatusFromTheEstimate: status.progress shows the estimator's
// rate rounded to whole events and its ETA only when one is known (the
// estimator itself is internal/progress's, tested there).
func TestProgress_StatusFromTheEstimate(t *testing.T) {
	cases := []struct {
		name string
		e    progress.Estimate
		want recoveryv1.CatchUpProgress
	}{
		{"rate and ETA", progress.Estimate{RateKnown: true, EventsPerSecond: 1000, ETAState: progress.ETAKnown, ETA: 10 * time.Second},
			recoveryv1.CatchUpProgress{EventsPerSecond: 1000, ETA: "10s"}},
		{"rounded to whole events", progress.Estimate{RateKnown: true, EventsPerSecond: 333.5, ETAState: progress.ETAKnown, ETA: 3 * time.Second},
			recoveryv1.CatchUpProgress{EventsPerSecond: 334, ETA: "3s"}},
		{"long catch-up", progress.Estimate{RateKnown: true, EventsPerSecond: 20000, ETAState: progress.ETAKnown, ETA: 6000 * time.Second},
			recoveryv1.CatchUpProgress{EventsPerSecond: 20000, ETA: "1h40m0s"}},
		{"not gaining: no ETA", progress.Estimate{RateKnown: true, EventsPerSecond: 500, ETAState: progress.ETANever},
			recoveryv1.CatchUpProgress{EventsPerSecond: 500}},
		{"nothing verified yet: no ETA", progress.Estimate{RateKnown: true, EventsPerSecond: 0.4, ETAState: progress.ETAUnknown},
			recoveryv1.CatchUpProgress{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := progressFor(tc.e); *got != tc.want {
				t.Fatalf("got %+v, want %+v", *got, tc.want)
			}
		})
	}
}

// Through computeStatus: CATCHING_UP cycles a second apart show the rate and
// ETA, a cycle too soon keeps the last figure, CURRENT clears it (so an idle
// scope's status does not change) and the completeness answer carries it.
func TestComputeStatus_ProgressWhileCatchingUp(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	r := &ProjectionRecoveryReconciler{Clock: clk}
	obj := &recoveryv1.ProjectionRecovery{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", Generation: 1}}
	cycle := func(state recoveryv1.RecoveryState, verified, events, boundary int64) {
		s := recoveryScope{obj: obj, now: clk.Now(), state: state,
			cycle: &catchup.Result{State: catchup.State(state), CursorRead: true, Boundary: boundary,
				Cursor: store.Cursor{Exists: true, VerifiedThroughSeq: verified, EventCount: events, LastObservedBoundarySeq: boundary}}}
		r.computeStatus(&s)
	}
	cycle(recoveryv1.StateCatchingUp, 1000, 2000, 11000)
	if obj.Status.Progress != nil {
		t.Fatalf("one sample shows a rate: %+v", obj.Status.Progress)
	}
	clk.Step(2 * time.Second)
	cycle(recoveryv1.StateCatchingUp, 3000, 6000, 11000) // 4,000 events in 2 s; 8,000 seq behind at 2 events/seq
	want := recoveryv1.CatchUpProgress{EventsPerSecond: 2000, ETA: "8s"}
	if p := obj.Status.Progress; p == nil || *p != want {
		t.Fatalf("progress %+v, want %+v", p, want)
	}
	if c := completenessOf(&obj.Status); c.EventsPerSecond != 2000 || c.ETA != "8s" {
		t.Fatalf("completeness %+v", c)
	}
	clk.Step(10 * time.Millisecond)
	cycle(recoveryv1.StateCatchingUp, 3010, 6020, 11000) // still a 2 s window: a new figure
	if p := obj.Status.Progress; p == nil || p.EventsPerSecond == 0 {
		t.Fatalf("progress lost: %+v", p)
	}
	clk.Step(time.Second)
	cycle(recoveryv1.StateCurrent, 11000, 22000, 11000)
	if obj.Status.Progress != nil {
		t.Fatalf("CURRENT keeps progress %+v", obj.Status.Progress)
	}
	if n := r.progress.Keys(); n != 0 {
		t.Fatalf("samples of %d resources kept after CURRENT", n)
	}
}
