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

package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/progress"
)

// listing is one status the watch reads through the API server, the
// injected clock having advanced by after.
type listing struct {
	after                             time.Duration
	verified, boundary, lag, eventCnt int64
}

// TestWatch_RateInEventsAsTheManager: `status --watch` estimates from the
// status fields of successive listings with the manager's estimator
// (internal/progress), so its rate is verified events per second, the unit
// of status.progress.eventsPerSecond, not the cursor's sequence numbers per
// second labelled ev/s.
func TestWatch_RateInEventsAsTheManager(t *testing.T) {
	sec := time.Second
	cases := []struct {
		name     string
		listings []listing
		want     string
	}{
		// The demo's catch-up: 1,089 sequence numbers a second at 2.8
		// events each. The manager's RATE read about 3,050.
		{"events, not sequence numbers", []listing{{0, 10000, 100000, 90000, 28000}, {10 * sec, 20890, 100000, 79110, 58492}},
			"3049 ev/s  ETA 1m13s"},
		{"one event per sequence number", []listing{{0, 1000, 5000, 4000, 1000}, {2 * sec, 1200, 5000, 3800, 1200}},
			"100 ev/s  ETA 38s"},
		{"the boundary runs as fast: never", []listing{{0, 1000, 2000, 1000, 3000}, {10 * sec, 2000, 3000, 1000, 6000}},
			"300 ev/s  ETA never at this rate"},
		{"no event verified yet: no ETA", []listing{{0, 0, 5000, 5000, 0}, {sec, 10, 5000, 4990, 0}},
			"0.0 ev/s  ETA ?"},
		{"a single listing", []listing{{0, 1000, 5000, 4000, 2800}}, "rate ?  ETA ?"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			tr := &progress.Tracker[string]{}
			var samples []progress.Sample
			var frame bytes.Buffer
			for _, l := range tc.listings {
				clk.Step(l.after)
				items := []recoveryv1.ProjectionRecovery{{
					ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "venue-a"},
					Status: recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateCatchingUp, VerifiedThroughSeq: l.verified,
						ObservedBoundarySeq: l.boundary, Lag: l.lag, EventCount: l.eventCnt},
				}}
				frame.Reset()
				if err := observeFrame(&frame, tr, items, false, clk.Now()); err != nil {
					t.Fatal(err)
				}
				samples = append(samples, progress.Sample{At: clk.Now(), Events: l.eventCnt, Verified: l.verified, Lag: l.lag})
			}
			if !strings.Contains(frame.String(), tc.want) {
				t.Fatalf("frame lacks %q:\n%s", tc.want, frame.String())
			}
			// What the manager writes into status.progress from the same samples.
			if e := progress.Of(samples); e.RateKnown {
				if manager := fmt.Sprintf("%.0f ev/s", e.EventsPerSecond); e.EventsPerSecond >= 10 && !strings.Contains(frame.String(), manager) {
					t.Fatalf("the manager's estimator says %s; frame:\n%s", manager, frame.String())
				}
			}
		})
	}
}
