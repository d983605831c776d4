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

package store

import (
	"sync"
	"time"
)

// Write slices (issue 14, docs/live-writes.md). A fetched page commits in
// slices, each one transaction under the projection write lock that the
// live projector also takes for every write. The lock is released between
// slices, so a live write waits for one slice at most; the slice size
// follows how long the previous slices held the lock, so that one holds it
// for about the budget whatever the workload (a bootstrap into an empty
// projection, a re-verification folding long histories, a machine under
// load).
const (
	// DefaultSliceBudget is how long a slice aims to hold the projection
	// write lock.
	DefaultSliceBudget = 20 * time.Millisecond
	// firstSliceEvents is a scope's first slice size, before any
	// measurement.
	firstSliceEvents = 250
	// minSliceEvents keeps a slice's fixed cost (lease, run and cursor
	// re-reads, the touched keys' positions) from dominating when one slow
	// slice (a checkpoint, a vacuum) inflates the estimate.
	minSliceEvents = 50
	// maxSliceEvents is the source contract's maximum page.
	maxSliceEvents = 10_000
)

// SetSliceBudget sets how long a write slice aims to hold the projection
// write lock (0: DefaultSliceBudget; d < 0: no slicing, a page commits in one
// transaction whatever its size).
func (s *Store) SetSliceBudget(d time.Duration) {
	s.slices.mu.Lock()
	defer s.slices.mu.Unlock()
	s.slices.budget, s.slices.n = d, nil
}

// SetSliceEvents fixes every write slice at n events (extended to the end of
// a command) instead of sizing slices by the budget: deterministic slices for
// tests and benchmarks. n <= 0 restores budget sizing.
func (s *Store) SetSliceEvents(n int) {
	s.slices.mu.Lock()
	defer s.slices.mu.Unlock()
	s.slices.fixed = n
}

// sliceSizer remembers, per scope, the slice size to cut next.
type sliceSizer struct {
	mu     sync.Mutex
	budget time.Duration
	fixed  int
	n      map[string]int
}

// size is the number of events the next slice of scope should hold; <= 0:
// the rest of the page.
func (z *sliceSizer) size(scope string) int {
	z.mu.Lock()
	defer z.mu.Unlock()
	switch {
	case z.fixed > 0:
		return z.fixed
	case z.budget < 0:
		return 0
	}
	if n, ok := z.n[scope]; ok {
		return n
	}
	return firstSliceEvents
}

// observe records that a slice of events held the lock for held, when it was
// cut at the requested size (a page's short tail slice says little about the
// rate: its fixed cost dominates).
func (z *sliceSizer) observe(scope string, requested, events int, held time.Duration) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.fixed > 0 || z.budget < 0 || requested <= 0 || events < requested {
		return
	}
	budget := z.budget
	if budget == 0 {
		budget = DefaultSliceBudget
	}
	if z.n == nil {
		z.n = map[string]int{}
	}
	z.n[scope] = nextSliceSize(requested, events, held, budget)
}

// nextSliceSize is the size after a slice of events, cut at size cur, held
// the lock for held: the size that would have held it for budget at the
// same rate, averaged with cur so that one outlier moves it only halfway
// (the fixed point is a slice that holds the lock for the budget), within
// [minSliceEvents, maxSliceEvents].
func nextSliceSize(cur, events int, held, budget time.Duration) int {
	target := 2 * cur
	if held > 0 {
		target = int(float64(events) * float64(budget) / float64(held))
	}
	return min(max((cur+target)/2, minSliceEvents), maxSliceEvents)
}

// plus adds a committed slice to the page's result.
func (r PageResult) plus(s PageResult) PageResult {
	if r.Slices == 0 {
		r.Scope, r.AfterSeq = s.Scope, s.AfterSeq
	}
	r.VerifiedThroughSeq, r.ChainDigest, r.EventCount, r.BoundarySeq, r.State = s.VerifiedThroughSeq, s.ChainDigest, s.EventCount, s.BoundarySeq, s.State
	r.Applied += s.Applied
	r.InsertedTrades += s.InsertedTrades
	r.OrderEvents += s.OrderEvents
	r.TouchedKeys += s.TouchedKeys
	r.ChangedKeys += s.ChangedKeys
	r.Slices++
	return r
}
