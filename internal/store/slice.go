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

	"github.com/projection-recovery/projection-recovery/internal/source"
)

// Write slices (docs/live-writes.md). A fetched page commits in
// slices, each one transaction under the projection write lock that the
// live projector also takes for every write. The lock is released between
// slices, so a live write waits for one slice at most. While live writes
// wait for the lock, a slice is sized to hold it for about the budget,
// whatever the workload (a bootstrap into an empty projection, a machine
// under load); while nobody waits, slices grow to whole pages, so a scope
// nobody writes live catches up at full speed (a slice pays a fixed cost:
// the lease, run and cursor re-reads and the rows of every key it touches).
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
	// maxSliceEvents is the longest slice: a unit of merged pages
	// (page_merge.go), reached only while nobody waits for the lock.
	maxSliceEvents = maxMergedEvents
	// maxSliceKeys bounds the key locks a slice holds (one advisory lock
	// each, in PostgreSQL's shared lock table, sized by
	// max_locks_per_transaction × max_connections: 6,400 by default). A
	// slice ends after the command that reaches it; a command's keys are
	// never split.
	maxSliceKeys = 512
	// quietSlices is how many slices in a row must end with nobody waiting
	// for the lock before slices grow.
	quietSlices = 3
	// quietSlicesBeyondPage is how many before they grow past a page's worth
	// (wholeSliceEvents) towards a merged unit: a live writer on the
	// backlog's keys that now and then leaves a few slices unwaited must not
	// then wait for one several pages long; a scope nobody writes live gets
	// there a few slices later than to a page.
	quietSlicesBeyondPage = 12
	// wholeSliceEvents is a slice of a scope dominated by newer retained
	// legs (sliceSizer.whole): a fetched page's worth, as when such a scope
	// committed whole pages. Finer slices would fold those legs again per
	// slice; a merged unit (page_merge.go) in one slice would hold the keys
	// that a live writer keeps waiting for (the newer legs are its trades)
	// for several pages' time.
	wholeSliceEvents = source.MaxPageEvents
	// newerFactor: a slice that re-folded more than this many retained
	// legs newer than itself per event of its own is dominated by them
	// (see sliceSizer.observe).
	newerFactor = 8
)

// SetSliceBudget sets how long a write slice aims to hold the projection
// write lock (0: DefaultSliceBudget; d < 0: no slicing, a page commits in one
// transaction whatever its size).
func (s *Store) SetSliceBudget(d time.Duration) {
	s.slices.mu.Lock()
	defer s.slices.mu.Unlock()
	s.slices.budget, s.slices.n, s.slices.whole, s.slices.quiet = d, nil, nil, nil
}

// SetSliceEvents fixes every write slice at n events (extended to the end of
// a command) instead of sizing slices by the budget: deterministic slices for
// tests and benchmarks. n <= 0 restores budget sizing.
func (s *Store) SetSliceEvents(n int) {
	s.slices.mu.Lock()
	defer s.slices.mu.Unlock()
	s.slices.fixed = n
}

// sliceSizer remembers, per scope, the slice size to cut next, and whether
// the scope's slices are dominated by newer retained trades.
type sliceSizer struct {
	mu     sync.Mutex
	budget time.Duration
	fixed  int
	n      map[string]int
	// quiet counts the scope's slices in a row that ended with nobody
	// waiting for the lock.
	quiet map[string]int
	// whole: the scope's last slice re-folded far more retained legs newer
	// than itself than it had events (a re-verification after a cursor
	// reset, where "newer" is the rest of the history). Every slice pays
	// that re-fold again, so slicing would multiply it by the slices per
	// page; such a scope commits a page's worth per slice
	// (wholeSliceEvents) until it is no longer so.
	whole map[string]bool
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
	case z.whole[scope]:
		return wholeSliceEvents
	}
	if n, ok := z.n[scope]; ok {
		return n
	}
	return firstSliceEvents
}

// sliceObservation is what a committed slice measured.
type sliceObservation struct {
	events int           // events in the slice
	held   time.Duration // projection write lock held, granted to committed
	newer  int64         // retained legs newer than the slice re-folded (R1)
	waited bool          // a transaction waited for the lock when the slice finished
}

// observe records a slice cut at the requested size (0: the rest of the
// page). A slice shorter than requested (a page's tail) teaches no rate: its
// fixed cost dominates.
func (z *sliceSizer) observe(scope string, requested int, o sliceObservation) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.fixed > 0 || z.budget < 0 || (requested > 0 && o.events < requested) {
		return
	}
	if z.whole == nil {
		z.whole, z.n, z.quiet = map[string]bool{}, map[string]int{}, map[string]int{}
	}
	if o.newer > int64(newerFactor*o.events) {
		z.whole[scope] = true
		return
	}
	delete(z.whole, scope)
	cur := requested
	if cur <= 0 {
		cur = maxSliceEvents
	}
	if !o.waited {
		// Nobody waits: after quietSlices such slices in a row, grow
		// towards whole pages (a live write that comes then waits for one
		// such slice, and the next is back at the budget). One quiet slice
		// is not enough: a steady live writer is now and then between two
		// of its own transactions when a slice ends.
		if z.quiet[scope]++; z.quiet[scope] >= quietSlices {
			z.n[scope] = quietGrowth(cur, z.quiet[scope])
		}
		return
	}
	delete(z.quiet, scope)
	budget := z.budget
	if budget == 0 {
		budget = DefaultSliceBudget
	}
	z.n[scope] = nextSliceSize(cur, o.events, o.held, budget)
}

// quietGrowth is the size after a slice cut at cur that ended the quiet-th
// in a row with nobody waiting: double, up to a page's worth until
// quietSlicesBeyondPage such slices, then up to maxSliceEvents; never below
// cur (a unit's size reached stays while nobody waits).
func quietGrowth(cur, quiet int) int {
	limit := maxSliceEvents
	if quiet < quietSlicesBeyondPage {
		limit = wholeSliceEvents
	}
	return max(cur, min(2*cur, limit))
}

// nextSliceSize is the size after a slice of events, cut at size cur, held
// the lock for held while a live write waited: the size that would have held
// it for budget at the same rate. Down at once (a live write is waiting
// now), up halfway (one fast slice is not yet a trend); within
// [minSliceEvents, maxSliceEvents].
func nextSliceSize(cur, events int, held, budget time.Duration) int {
	target := 2 * cur
	if held > 0 {
		target = int(float64(events) * float64(budget) / float64(held))
	}
	next := target
	if target > cur {
		next = (cur + target) / 2
	}
	return min(max(next, minSliceEvents), maxSliceEvents)
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
	r.NewerLegs += s.NewerLegs
	r.DeferredKeys += s.DeferredKeys
	r.LockWaited, r.VerifiedAt = s.LockWaited, s.VerifiedAt
	r.Slices++
	return r
}
