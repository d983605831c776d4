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
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// Issue 12 item 9: the rate is measured over the window, never across a
// cursor reset, and only once the samples span a second.
func TestProgress_RateOverTheWindow(t *testing.T) {
	type in struct {
		d      time.Duration
		events int64
	}
	cases := []struct {
		name     string
		samples  []in
		wantRate float64
		wantOK   bool
		wantLen  int
	}{
		{"one sample: no rate", []in{{0, 100}}, 0, false, 1},
		{"half a second: no rate yet", []in{{0, 0}, {500 * time.Millisecond, 5000}}, 0, false, 2},
		{"steady 10k/s", []in{{0, 0}, {time.Second, 10000}, {2 * time.Second, 20000}}, 10000, true, 3},
		{"older than the window is dropped", []in{{0, 0}, {10 * time.Second, 1000}, {40 * time.Second, 31000}}, 1000, true, 2},
		{"a cursor reset starts afresh", []in{{0, 50000}, {time.Second, 60000}, {2 * time.Second, 100}}, 0, false, 1},
		{"a clock that goes back starts afresh", []in{{5 * time.Second, 0}, {6 * time.Second, 100}, {time.Second, 200}}, 0, false, 1},
		{"stalled: zero", []in{{0, 700}, {3 * time.Second, 700}}, 0, true, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var tr progressTracker
			key := types.NamespacedName{Namespace: "ns", Name: "x"}
			var rate float64
			var ok bool
			for _, s := range tc.samples {
				rate, ok = tr.observe(key, at(s.d), s.events)
			}
			if ok != tc.wantOK || rate != tc.wantRate || len(tr.by[key]) != tc.wantLen {
				t.Fatalf("rate %v ok %v samples %d, want %v %v %d", rate, ok, len(tr.by[key]), tc.wantRate, tc.wantOK, tc.wantLen)
			}
		})
	}
}

func TestProgress_ETA(t *testing.T) {
	cases := []struct {
		name            string
		rate            float64
		verified, count int64
		lag             int64
		want            recoveryv1.CatchUpProgress
	}{
		// 2 events per sequence number, 5,000 sequence numbers behind:
		// 10,000 events at 1,000/s.
		{"scaled by events per seq", 1000, 1000, 2000, 5000, recoveryv1.CatchUpProgress{EventsPerSecond: 1000, ETA: "10s"}},
		{"rounded to the second", 333.4, 100, 100, 1000, recoveryv1.CatchUpProgress{EventsPerSecond: 333, ETA: "3s"}},
		{"long catch-up", 20000, 1_000_000, 3_000_000, 40_000_000, recoveryv1.CatchUpProgress{EventsPerSecond: 20000, ETA: "1h40m0s"}},
		{"no rate: no ETA", 0, 1000, 2000, 5000, recoveryv1.CatchUpProgress{}},
		{"nothing verified yet: no scale, no ETA", 500, 0, 0, 5000, recoveryv1.CatchUpProgress{EventsPerSecond: 500}},
		{"beyond a century: unknown", 0.6, 1, 1 << 40, 1 << 40, recoveryv1.CatchUpProgress{EventsPerSecond: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &recoveryv1.ProjectionRecoveryStatus{VerifiedThroughSeq: tc.verified, EventCount: tc.count, Lag: tc.lag}
			if got := progressFor(tc.rate, st); *got != tc.want {
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
			cycle: &cycleResult{state: state, cursorRead: true, boundary: boundary,
				cursor: store.Cursor{Exists: true, VerifiedThroughSeq: verified, EventCount: events, LastObservedBoundarySeq: boundary}}}
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
	if len(r.progress.by) != 0 {
		t.Fatalf("samples kept after CURRENT: %v", r.progress.by)
	}
}
