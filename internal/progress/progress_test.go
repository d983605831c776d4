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

package progress

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// step is one observation: the injected clock advances by after, then the
// status reads events, verified and lag.
type step struct {
	after                 time.Duration
	events, verified, lag int64
}

// observe feeds steps to a fresh tracker on a fake clock, as the manager
// (one cycle per step) and the plugin (one poll per step) do.
func observe(steps []step) (*Tracker[string], Estimate) {
	clk := clocktesting.NewFakeClock(t0)
	var tr Tracker[string]
	var e Estimate
	for _, s := range steps {
		clk.Step(s.after)
		e = tr.Observe("ns/x", Sample{At: clk.Now(), Events: s.events, Verified: s.verified, Lag: s.lag})
	}
	return &tr, e
}

func TestEstimate(t *testing.T) {
	sec := time.Second
	cases := []struct {
		name  string
		steps []step
		want  Estimate
	}{
		{"no sample", nil, Estimate{}},
		{"one sample: no rate", []step{{0, 100, 50, 1000}}, Estimate{}},
		{"half a second: no rate yet", []step{{0, 0, 0, 1000}, {sec / 2, 5000, 500, 500}}, Estimate{}},
		// The demo's catch-up: the cursor moved 1,089 sequence numbers a
		// second at 2.8 events each; the rate is in events.
		{"events, not sequence numbers", []step{{0, 28000, 10000, 90000}, {10 * sec, 58492, 20890, 79110}},
			Estimate{RateKnown: true, EventsPerSecond: 3049.2, ETAState: ETAKnown, ETA: 73 * sec}},
		// 2 events per sequence number, 5,000 behind a fixed boundary:
		// 10,000 events at 1,000/s.
		{"lag scaled by events per seq", []step{{0, 1000, 500, 5500}, {sec, 2000, 1000, 5000}},
			Estimate{RateKnown: true, EventsPerSecond: 1000, ETAState: ETAKnown, ETA: 10 * sec}},
		{"oldest and newest count", []step{{0, 0, 0, 1000}, {sec, 50, 50, 950}, {3 * sec, 400, 400, 600}},
			Estimate{RateKnown: true, EventsPerSecond: 100, ETAState: ETAKnown, ETA: 6 * sec}},
		// The cursor gains 100/s while the boundary grows 50/s: 500 behind
		// closes at 50/s.
		{"moving boundary: closing speed", []step{{0, 1000, 1000, 1000}, {10 * sec, 2000, 2000, 500}},
			Estimate{RateKnown: true, EventsPerSecond: 100, ETAState: ETAKnown, ETA: 10 * sec}},
		{"boundary as fast as the cursor: never", []step{{0, 1000, 1000, 1000}, {10 * sec, 2000, 2000, 1000}},
			Estimate{RateKnown: true, EventsPerSecond: 100, ETAState: ETANever}},
		{"stalled: never", []step{{0, 700, 500, 500}, {3 * sec, 700, 500, 500}},
			Estimate{RateKnown: true, ETAState: ETANever}},
		{"at the boundary", []step{{0, 900, 900, 100}, {sec, 1000, 1000, 0}},
			Estimate{RateKnown: true, EventsPerSecond: 100, ETAState: ETAKnown}},
		{"nothing verified yet: no ETA", []step{{0, 0, 0, 5000}, {sec, 0, 10, 4990}},
			Estimate{RateKnown: true, ETAState: ETAUnknown}},
		{"rounds up to the second", []step{{0, 0, 0, 1000}, {3 * sec, 999, 999, 1}},
			Estimate{RateKnown: true, EventsPerSecond: 333, ETAState: ETAKnown, ETA: sec}},
		{"beyond a century: never", []step{{0, 1, 1, 1 << 40}, {10 * sec, 7, 7, 1<<40 - 6}},
			Estimate{RateKnown: true, EventsPerSecond: 0.6, ETAState: ETANever}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, got := observe(tc.steps)
			if got != tc.want {
				t.Fatalf("estimate %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTracker_WindowAndReset(t *testing.T) {
	sec := time.Second
	cases := []struct {
		name     string
		steps    []step
		wantLen  int
		wantRate float64
		wantOK   bool
	}{
		{"accumulates", []step{{0, 0, 0, 9}, {sec, 10, 1, 8}, {sec, 20, 2, 7}}, 3, 10, true},
		{"older than the window is dropped", []step{{0, 0, 0, 9}, {10 * sec, 1000, 1, 8}, {30 * sec, 31000, 2, 7}}, 2, 1000, true},
		{"the two newest are kept however old", []step{{0, 0, 0, 9}, {500 * sec, 5000, 5, 4}}, 2, 10, true},
		{"a count reset starts afresh", []step{{0, 50000, 500, 9}, {sec, 60000, 600, 9}, {sec, 100, 1, 9}}, 1, 0, false},
		{"a cursor reset starts afresh", []step{{0, 100, 100, 900}, {sec, 200, 200, 800}, {sec, 200, 10, 990}}, 1, 0, false},
		{"a clock that goes back starts afresh", []step{{5 * sec, 0, 0, 9}, {sec, 100, 1, 8}, {-5 * sec, 200, 2, 7}}, 1, 0, false},
		{"the same instant replaces the newest", []step{{0, 0, 0, 9}, {sec, 10, 1, 8}, {0, 20, 2, 7}}, 2, 20, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, e := observe(tc.steps)
			if n := tr.Len("ns/x"); n != tc.wantLen || e.RateKnown != tc.wantOK || e.EventsPerSecond != tc.wantRate {
				t.Fatalf("kept %d, rate %v known %v; want %d, %v, %v", n, e.EventsPerSecond, e.RateKnown, tc.wantLen, tc.wantRate, tc.wantOK)
			}
		})
	}
	t.Run("forget and retain", func(t *testing.T) {
		var tr Tracker[string]
		for _, k := range []string{"ns/a", "ns/b", "ns/c"} {
			tr.Observe(k, Sample{At: t0})
		}
		tr.Forget("ns/a")
		tr.Retain(func(k string) bool { return k == "ns/b" })
		if tr.Keys() != 1 || tr.Len("ns/b") != 1 {
			t.Fatalf("after forget and retain: %d keys, ns/b has %d samples", tr.Keys(), tr.Len("ns/b"))
		}
	})
}
