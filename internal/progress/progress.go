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

// Package progress is the one estimator of a catch-up's speed and time to
// CURRENT. The manager writes its figure into status.progress and
// `kubectl projection status --watch` computes its own from the status
// fields it reads through the API server (eventCount, verifiedThroughSeq,
// lag): both in verified events per second, so the two never disagree by
// the events-per-sequence-number factor a rate in sequence numbers would
// carry.
package progress

import (
	"math"
	"sync"
	"time"
)

// Window is how far back the rate looks: long enough to smooth a cycle's
// ups and downs, short enough to follow a catch-up that speeds up or slows
// down. The two newest samples are kept whatever their age, so observations
// further apart than Window (a long cycle, a slow --interval) still give a
// rate.
const Window = 30 * time.Second

// MinSpan: no rate from samples closer together than this (two cycles a
// few milliseconds apart say nothing about a rate).
const MinSpan = time.Second

// MaxETA: beyond it the scope is, for anyone waiting, not gaining.
const MaxETA = 100 * 365 * 24 * time.Hour

// Sample is a scope's status at one instant.
type Sample struct {
	At time.Time
	// Events is status.eventCount: events verified through Verified.
	Events int64
	// Verified is status.verifiedThroughSeq.
	Verified int64
	// Lag is status.lag: sequence numbers from Verified to the effective
	// boundary (the observed one, or a DRAINING run's frozen one).
	Lag int64
}

// boundary is the effective boundary the sample was taken against.
func (s Sample) boundary() int64 { return s.Verified + s.Lag }

// ETAState says what is known about the time to CURRENT.
type ETAState int

const (
	// ETAUnknown: no rate yet, or nothing verified yet to convert the lag
	// (sequence numbers) into events.
	ETAUnknown ETAState = iota
	// ETANever: the scope does not gain on its boundary at this rate (or
	// would need more than MaxETA).
	ETANever
	// ETAKnown: Estimate.ETA holds it.
	ETAKnown
)

// Estimate is what a scope's samples say about its catch-up.
type Estimate struct {
	// RateKnown is false until two samples span MinSpan.
	RateKnown bool
	// EventsPerSecond is how fast the verified event count grew from the
	// oldest kept sample to the newest.
	EventsPerSecond float64
	ETAState        ETAState
	// ETA is the time to CURRENT, rounded up to the second (never 0s while
	// behind): the lag in events (lag in sequence numbers times the events
	// per sequence number verified so far) over the closing speed, the
	// event rate less the boundary's own growth in events. The boundary
	// moves while members keep trading; dividing by the rate alone would
	// show a finite ETA forever for a scope that never catches up.
	ETA time.Duration
}

// Of estimates from samples in time order (the oldest and newest count).
func Of(samples []Sample) Estimate {
	if len(samples) < 2 {
		return Estimate{}
	}
	first, last := samples[0], samples[len(samples)-1]
	span := last.At.Sub(first.At)
	if span < MinSpan {
		return Estimate{}
	}
	secs := span.Seconds()
	e := Estimate{RateKnown: true, EventsPerSecond: float64(last.Events-first.Events) / secs}
	if last.Lag <= 0 {
		e.ETAState = ETAKnown
		return e
	}
	if last.Verified <= 0 || last.Events <= 0 {
		return e // ETAUnknown: no events per sequence number yet
	}
	perSeq := float64(last.Events) / float64(last.Verified)
	growth := float64(last.boundary()-first.boundary()) / secs * perSeq
	closing := e.EventsPerSecond - growth
	if closing <= 0 {
		e.ETAState = ETANever
		return e
	}
	eta := float64(last.Lag) * perSeq / closing
	if eta > MaxETA.Seconds() { // also keeps the Duration from overflowing
		e.ETAState = ETANever
		return e
	}
	e.ETAState = ETAKnown
	e.ETA = time.Duration(math.Ceil(eta)) * time.Second
	return e
}

// add appends s to a scope's samples and drops what Window no longer
// covers (keeping the two newest). A count or cursor that went down (the
// resource was recreated, the cursor reset to re-verify from genesis) or a
// clock that went back starts a fresh series: no rate spans a reset. A
// sample at the same instant as the newest replaces it.
func add(samples []Sample, s Sample) []Sample {
	if n := len(samples); n > 0 {
		prev := samples[n-1]
		switch {
		case s.Events < prev.Events || s.Verified < prev.Verified || s.At.Before(prev.At):
			samples = samples[:0]
		case s.At.Equal(prev.At):
			samples = samples[:n-1]
		}
	}
	samples = append(samples, s)
	drop := 0
	for drop < len(samples)-2 && s.At.Sub(samples[drop].At) > Window {
		drop++
	}
	return append(samples[:0], samples[drop:]...)
}

// Tracker keeps each scope's recent samples, keyed by K (the manager's
// NamespacedName, the plugin's "namespace/name"). It lives in memory: a
// manager that takes a scope over, or a new `status --watch`, starts
// measuring afresh. Safe for concurrent use; the zero value is ready.
type Tracker[K comparable] struct {
	mu sync.Mutex
	by map[K][]Sample
}

// Observe records s for key and returns the estimate over its samples.
func (t *Tracker[K]) Observe(key K, s Sample) Estimate {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = map[K][]Sample{}
	}
	samples := add(t.by[key], s)
	t.by[key] = samples
	return Of(samples)
}

// Forget drops key's samples (deleted, or no longer catching up: a scope
// that comes back starts a fresh series).
func (t *Tracker[K]) Forget(key K) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.by, key)
}

// Retain drops the samples of every key keep refuses.
func (t *Tracker[K]) Retain(keep func(K) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.by {
		if !keep(k) {
			delete(t.by, k)
		}
	}
}

// Len is the number of samples kept for key.
func (t *Tracker[K]) Len(key K) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.by[key])
}

// Keys is the number of keys with samples.
func (t *Tracker[K]) Keys() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.by)
}
