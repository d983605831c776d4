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
	"context"
	"crypto/sha256"
	"errors"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// Merged pages (docs/design/page-transaction.md, "Merged pages"): Merge
// joins consecutive prepared pages into one unit that ApplyPrepared slices as
// it slices a page, only when applying them one after the other would apply
// exactly the same (same run, one chain, the first applied whole, boundary
// not moving back, no id in both, bounded size). A slice across merged pages
// that is refused is cut again at page ends (pagePrep.bounded), so the cursor
// stops where applying the pages one by one stops it.

// maxMergedEvents bounds a merged unit: FR-APR10 "pages are bounded", and a
// merged unit is what ApplyPrepared holds in memory at once.
const maxMergedEvents = 4 * source.MaxPageEvents

// Pages is how many fetched pages pp holds (1 unless Merge joined some).
func (pp *PreparedPage) Pages() int { return pp.pages }

// Merge appends next to pp when the two can be applied as one unit (see
// above) and reports whether it did; on false neither is changed. A merged
// next is consumed: applying it fails as applying a page twice does.
func (pp *PreparedPage) Merge(next *PreparedPage) bool {
	if pp == nil || next == nil || pp == next || !pp.mergeable(next) {
		return false
	}
	a, b := pp.prep, next.prep
	header := *b.page
	header.AfterSeq, header.DigestAfter = a.page.AfterSeq, a.page.DigestAfter
	header.Events = nil // the events were verified and decoded; slices read decoded
	a.ends = append(a.ends, pageEnd{i: len(a.decoded), through: a.through, digest: a.page.DigestThrough})
	for _, e := range b.ends {
		e.i += len(a.decoded)
		a.ends = append(a.ends, e)
	}
	a.page = &header
	if cap(a.decoded) < maxMergedEvents {
		// Once, at the first merge: a unit then grows in place, and each
		// merge copies only the page it adds.
		a.decoded = append(make([]wire.Event, 0, maxMergedEvents), a.decoded...)
		a.digests = append(make([][sha256.Size]byte, 0, maxMergedEvents), a.digests...)
	}
	a.decoded = append(a.decoded, b.decoded...)
	a.digests = append(a.digests, b.digests...)
	a.nums = append(a.nums, b.nums...)
	a.orderBy = a.orderBy.join(b.orderBy)
	a.tradeIDs, a.openingKeys = a.tradeIDs.join(b.tradeIDs), a.openingKeys.join(b.openingKeys)
	a.through = b.through
	pp.pages += next.pages
	b.cut = 1 // consumed: ApplyPrepared(next) now fails as for an applied page
	return true
}

// mergeable is Merge's condition (see the list above).
func (pp *PreparedPage) mergeable(next *PreparedPage) bool {
	a, b := pp.prep, next.prep
	switch {
	case !pp.run.SameBarrier(next.run), a.cut > 0, b.cut > 0, a.page.Idle, b.page.Idle:
		return false
	case b.page.AfterSeq != a.page.ThroughSeq || b.page.DigestAfter != a.page.DigestThrough:
		return false
	case a.through != a.page.ThroughSeq, b.page.BoundarySeq < a.page.BoundarySeq:
		return false
	case len(a.decoded)+len(b.decoded) > maxMergedEvents:
		return false
	case b.page.DescriptorHash != a.page.DescriptorHash, b.page.ProtocolVersion != a.page.ProtocolVersion:
		return false
	}
	return !sharesIdentity(a, b)
}

// sharesIdentity reports whether a trade id, an order version or an
// opening's key of b is in a: one lookup per identity of b in each of a's
// maps, at most maxUnitMaps of them (unitMaps), so the check of a unit's
// last page does not grow with the pages before it.
func sharesIdentity(a, b *pagePrep) bool {
	for _, m := range b.orderBy {
		for k := range m {
			if a.orderBy.get(k) != nil {
				return true
			}
		}
	}
	for _, ids := range b.tradeIDs {
		for id := range ids {
			if a.tradeIDs.get(id) {
				return true
			}
		}
	}
	for _, keys := range b.openingKeys {
		for k := range keys {
			if a.openingKeys.get(k) {
				return true
			}
		}
	}
	return false
}

// refusesContent reports whether err refused what a slice holds (its events
// or the rows of its window), so that the slice cut again page by page may
// commit a prefix. A lost lease, a superseded run, a moved cursor and an
// unknown COMMIT outcome are about the scope, not the events: cutting again
// would meet them again (and after an unknown COMMIT only the cursor may
// tell what is applied).
func refusesContent(err error) bool {
	var r *codes.Refusal
	if !errors.As(err, &r) {
		return false
	}
	switch r.Code {
	case codes.LeaseLost, codes.Superseded, codes.CursorMoved, codes.CommitOutcomeUnknown:
		return false
	}
	return true
}

// PreparedUnit is a unit PrepareUnits sent: a prepared page with those after
// it merged in, or the failure that ended the stream.
type PreparedUnit struct {
	Unit *PreparedPage
	Err  error
}

// PrepareUnits prepares already fetched pages in order in a goroutine and
// merges consecutive ones (Merge) into units of at most maxPages pages (<= 0:
// only Merge's own bound), sending each unit once the next page does not
// join it, so the next unit is prepared and merged while the caller applies
// the one before (the manager does the same with the pages it fetches
// ahead). A failure to prepare a page ends the stream as its last item,
// after the unit of the pages before it; the goroutine ends with ctx. For callers that hold a catch-up's pages already (benchmarks,
// tools).
func (s *Store) PrepareUnits(ctx context.Context, run Run, pages []*source.Page, maxPages int) <-chan PreparedUnit {
	out := make(chan PreparedUnit, 1)
	send := func(u PreparedUnit) bool {
		select {
		case out <- u:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		defer close(out)
		var unit *PreparedPage
		for _, p := range pages {
			pp, err := s.PreparePage(run, p)
			if err != nil {
				if unit == nil || send(PreparedUnit{Unit: unit}) {
					send(PreparedUnit{Err: err})
				}
				return
			}
			if unit != nil && (maxPages <= 0 || unit.Pages() < maxPages) && unit.Merge(pp) {
				continue
			}
			if unit != nil && !send(PreparedUnit{Unit: unit}) {
				return
			}
			unit = pp
		}
		if unit != nil {
			send(PreparedUnit{Unit: unit})
		}
	}()
	return out
}
