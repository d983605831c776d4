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
	"fmt"
	"math"
	"strings"
	"time"
)

// sample is one observation of a scope's status during `status --watch`.
type sample struct {
	at       time.Time
	verified int64 // status.verifiedThroughSeq
	boundary int64 // status.observedBoundarySeq
}

// estimate is what successive samples say about a catch-up: how fast the
// verified cursor advances, and when it reaches the boundary.
type estimate struct {
	// rateKnown is false with fewer than two samples or no elapsed time.
	rateKnown bool
	// rate is the verified cursor's speed, events per second.
	rate float64
	// etaKnown is false when the rate is unknown or the cursor does not gain
	// on the boundary (stalled, or the feed grows as fast as it catches up).
	etaKnown bool
	eta      time.Duration
}

// estimateProgress computes rate and ETA from the oldest and newest sample.
// The boundary moves while members keep trading, so the ETA divides the
// remaining distance by the closing speed (cursor speed minus boundary
// speed), not the cursor speed alone: with the latter a scope that never
// catches up would show a finite ETA forever.
func estimateProgress(samples []sample) estimate {
	if len(samples) < 2 {
		return estimate{}
	}
	first, last := samples[0], samples[len(samples)-1]
	dt := last.at.Sub(first.at).Seconds()
	if dt <= 0 {
		return estimate{}
	}
	e := estimate{rateKnown: true, rate: float64(last.verified-first.verified) / dt}
	remaining := last.boundary - last.verified
	if remaining <= 0 {
		return estimate{rateKnown: true, rate: e.rate, etaKnown: true}
	}
	closing := e.rate - float64(last.boundary-first.boundary)/dt
	if closing <= 0 {
		return e
	}
	secs := float64(remaining) / closing
	if secs > float64(math.MaxInt64/int64(time.Second)) {
		return e
	}
	e.etaKnown = true
	e.eta = time.Duration(math.Ceil(secs)) * time.Second
	return e
}

// tracker keeps each scope's recent samples for `status --watch`.
type tracker struct {
	window  time.Duration // samples older than this (relative to the newest) are dropped
	samples map[string][]sample
}

func newTracker(window time.Duration) *tracker {
	return &tracker{window: window, samples: map[string][]sample{}}
}

// observe records a sample. A cursor that went backwards (the resource was
// recreated, the cursor reset) starts a fresh series: mixing the two would
// yield a negative or meaningless rate.
func (t *tracker) observe(key string, s sample) []sample {
	ss := t.samples[key]
	if n := len(ss); n > 0 && (s.verified < ss[n-1].verified || !s.at.After(ss[n-1].at)) {
		if s.verified < ss[n-1].verified {
			ss = nil
		} else {
			ss[n-1] = s // same instant: keep the newest reading
			t.samples[key] = ss
			return ss
		}
	}
	ss = append(ss, s)
	// Keep a moving window so the rate follows the current speed, but never
	// fewer than two samples.
	cut := 0
	for cut < len(ss)-2 && s.at.Sub(ss[cut].at) > t.window {
		cut++
	}
	ss = append([]sample(nil), ss[cut:]...)
	t.samples[key] = ss
	return ss
}

// forget drops scopes not seen in the last listing.
func (t *tracker) forget(seen map[string]bool) {
	for k := range t.samples {
		if !seen[k] {
			delete(t.samples, k)
		}
	}
}

// progressBar renders verified/boundary as a bar of width cells and a
// percentage rounded down (100% only when the cursor is at the boundary).
func progressBar(verified, boundary int64, width int) string {
	frac := 0.0
	if boundary > 0 {
		frac = float64(verified) / float64(boundary)
	}
	frac = math.Max(0, math.Min(1, frac))
	filled := int(math.Floor(frac * float64(width)))
	pct := int(math.Floor(frac * 100))
	return fmt.Sprintf("[%s%s] %3d%%", strings.Repeat("#", filled), strings.Repeat(".", width-filled), pct)
}

// formatRate renders events per second.
func formatRate(e estimate) string {
	switch {
	case !e.rateKnown:
		return "rate ?"
	case e.rate < 10:
		return fmt.Sprintf("%.1f ev/s", e.rate)
	default:
		return fmt.Sprintf("%.0f ev/s", e.rate)
	}
}

// formatETA renders the ETA; "never at this rate" when the cursor does not
// gain on the boundary although samples exist.
func formatETA(e estimate) string {
	switch {
	case !e.rateKnown:
		return "ETA ?"
	case !e.etaKnown:
		return "ETA never at this rate"
	default:
		return "ETA " + e.eta.String()
	}
}
