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
	"math"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// progressWindow is how far back the rate looks: long enough to smooth a
// cycle's ups and downs, short enough to follow a catch-up that speeds up or
// slows down.
const progressWindow = 30 * time.Second

// progressMinSpan: no rate from samples closer together than this (two
// cycles a few milliseconds apart say nothing about a rate).
const progressMinSpan = time.Second

// maxETA: beyond it the estimate says nothing and is left empty.
const maxETA = 100 * 365 * 24 * time.Hour

// progressSample is a scope's verified event count at one instant.
type progressSample struct {
	at     time.Time
	events int64
}

// progressTracker keeps, per resource, the samples of the last
// progressWindow. It lives in memory: a manager that takes a scope over
// starts measuring afresh, and status keeps the figure it last showed until
// the new one is measured. The zero value is ready to use.
type progressTracker struct {
	mu sync.Mutex
	by map[types.NamespacedName][]progressSample
}

// observe records a sample and returns the rate over the window, ok false
// while the window spans less than progressMinSpan.
func (t *progressTracker) observe(key types.NamespacedName, at time.Time, events int64) (perSecond float64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = map[types.NamespacedName][]progressSample{}
	}
	samples := appendSample(t.by[key], progressSample{at: at, events: events}, progressWindow)
	t.by[key] = samples
	return rateOf(samples)
}

// forget drops a resource's samples (deleted, or no longer catching up).
func (t *progressTracker) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.by, key)
}

// appendSample adds s and drops what the window no longer covers. A count
// that went down (the cursor was reset to re-verify from genesis) or a clock
// that went back starts a new window: no rate spans a reset.
func appendSample(samples []progressSample, s progressSample, window time.Duration) []progressSample {
	if n := len(samples); n > 0 && (s.events < samples[n-1].events || s.at.Before(samples[n-1].at)) {
		samples = samples[:0]
	}
	samples = append(samples, s)
	drop := 0
	for drop < len(samples)-1 && s.at.Sub(samples[drop].at) > window {
		drop++
	}
	return append(samples[:0], samples[drop:]...)
}

// rateOf is the events per second from the oldest sample to the newest.
func rateOf(samples []progressSample) (float64, bool) {
	if len(samples) < 2 {
		return 0, false
	}
	first, last := samples[0], samples[len(samples)-1]
	span := last.at.Sub(first.at)
	if span < progressMinSpan {
		return 0, false
	}
	return float64(last.events-first.events) / span.Seconds(), true
}

// progressFor is status.progress for a measured rate: the rate rounded to
// whole events, and the ETA from the lag in sequence numbers times the events
// per sequence number verified so far, rounded to the second (empty when no
// event is moving or nothing is verified yet to scale the lag by).
func progressFor(perSecond float64, st *recoveryv1.ProjectionRecoveryStatus) *recoveryv1.CatchUpProgress {
	p := &recoveryv1.CatchUpProgress{EventsPerSecond: int64(math.Round(perSecond))}
	if perSecond <= 0 || st.VerifiedThroughSeq <= 0 || st.EventCount <= 0 || st.Lag <= 0 {
		return p
	}
	remaining := float64(st.Lag) * float64(st.EventCount) / float64(st.VerifiedThroughSeq)
	secs := remaining / perSecond
	if secs > maxETA.Seconds() { // also keeps the Duration from overflowing
		return p
	}
	p.ETA = time.Duration(secs * float64(time.Second)).Round(time.Second).String()
	return p
}

// updateProgress sets status.progress after the cycle: a
// scope CATCHING_UP gets the rate its cursor showed over the window (status
// keeps the last figure while the window is too short); any other state
// clears it, so a CURRENT scope's status does not change at every cycle.
func (r *ProjectionRecoveryReconciler) updateProgress(s *recoveryScope, c *cycleResult) {
	st := &s.obj.Status
	key := client.ObjectKeyFromObject(s.obj)
	if s.state != recoveryv1.StateCatchingUp {
		st.Progress = nil
		r.progress.forget(key)
		return
	}
	if c == nil || !c.cursorRead {
		return
	}
	now := s.now // the cycle's start; the clock's reading after the cycle is closer to the count
	if r.Clock != nil {
		now = r.Clock.Now()
	}
	if rate, ok := r.progress.observe(key, now, st.EventCount); ok {
		st.Progress = progressFor(rate, st)
	}
}
