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

package catchup

import (
	"context"

	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// pageAhead is the next unit of a cycle: the pages after the current unit,
// fetched from the member one after the other, verified (store.PreparePage)
// and merged (store.PreparedPage.Merge) while the current unit commits, so
// the member and the verification overlap PostgreSQL's work
// (docs/performance.md, "What the manager does for speed").
//
// The first page is fetched from the cursor the current unit leaves when it
// commits whole (its through, its digest-through), each next one from the one
// before, and they are used only if the unit did commit exactly there;
// anything else (a DRAINING run's prefix, a refused slice, an error) discards
// them. They are thus the requests the sequential cycle would send next, only
// sent earlier. No transaction is open in this goroutine (never hold one
// across HTTP), and it never outlives its cycle: stop waits for it.
type pageAhead struct {
	after  int64
	digest string
	cancel context.CancelFunc
	done   chan struct{}

	pages []*source.Page // fetched in order; an idle page only first
	err   error          // the first page's fetch or verification failed
	// merged is the first page, verified (nil for an idle page), with the
	// pages after it merged in as they came, through last (in the
	// goroutine, so the merge overlaps the commit too).
	merged *store.PreparedPage
	last   *source.Page
}

// fetchAhead starts fetching and preparing up to n pages after (after,
// digest), each from the one before (n: what is left of the cycle's page
// budget). It stops early at the source boundary, at an idle page, at the
// first failure and at the first page that does not merge (the unit's bound,
// 40,000 events: four pages of the contract's largest size, many more of
// the default); a failure of a later page only ends the unit before it (the
// next fetch from the cursor meets it again).
func fetchAhead(ctx context.Context, st *store.Store, cl *source.Client, run store.Run, after int64, digest string, size, n int) *pageAhead {
	actx, cancel := context.WithCancel(ctx)
	a := &pageAhead{after: after, digest: digest, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for i := 0; i < n; i++ {
			page, err := cl.Fetch(actx, after, digest, run.DescriptorHash, size)
			var prep *store.PreparedPage
			if err == nil && !page.Idle {
				prep, err = st.PreparePage(run, page)
			}
			if err != nil || (page.Idle && i > 0) {
				if i == 0 {
					a.err = err
				}
				return
			}
			if i > 0 && !a.merged.Merge(prep) {
				return // the next fetch from the cursor asks for it again
			}
			a.pages = append(a.pages, page)
			if i == 0 {
				a.merged = prep
			}
			a.last = page
			if page.Idle || page.ThroughSeq >= page.BoundarySeq {
				return
			}
			after, digest = page.ThroughSeq, page.DigestThrough
		}
	}()
	return a
}

// take waits for the pages fetched ahead and reports true when they continue
// from (through, digest), the cursor the current unit committed; unit then
// returns them. Otherwise it stops the fetch and reports false. Safe on a
// nil *pageAhead.
func (a *pageAhead) take(through int64, digest string) bool {
	if a == nil {
		return false
	}
	if a.after != through || a.digest != digest {
		a.stop()
		return false
	}
	<-a.done
	a.cancel()
	return true
}

// unit returns the pages taken as one unit: page is the last page merged
// (the unit ends at its through, digest and boundary), prep the unit (nil
// for an idle page), err the first page's failure. A page that did not merge
// ended the fetch: the next fetch from the cursor asks for it again.
func (a *pageAhead) unit() (page *source.Page, prep *store.PreparedPage, err error) {
	if a.err != nil || len(a.pages) == 0 {
		return nil, nil, a.err
	}
	return a.last, a.merged, nil
}

// stop cancels the fetch and waits for its goroutine. Safe on nil and twice.
func (a *pageAhead) stop() {
	if a == nil {
		return
	}
	a.cancel()
	<-a.done
}
