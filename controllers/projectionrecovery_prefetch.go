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
	"context"

	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// pageAhead is the next page of a cycle, fetched from the member and
// verified (store.PreparePage: identity, ordering, decoding, the chain)
// while the current page commits (issue 12, goal 2): the member and the
// verification then overlap with PostgreSQL's work instead of following it.
//
// It is fetched from the cursor the current page will leave when it commits
// whole: (its through, its digest-through). It is used only if the page did
// commit exactly there; anything else (a DRAINING run that kept a prefix, a
// slice refused, an error) discards it and, if the cycle goes on, fetches
// again from the cursor that really stands. A page fetched ahead is
// therefore the very request the sequential cycle would have sent next, only
// sent earlier. No transaction is open in this goroutine (never hold one
// across HTTP), and it never outlives its cycle: stop waits for it.
type pageAhead struct {
	after  int64
	digest string
	cancel context.CancelFunc
	done   chan struct{}

	page *source.Page
	prep *store.PreparedPage // nil for an idle page
	err  error
}

// fetchAhead starts fetching and preparing the page after (after, digest).
func fetchAhead(ctx context.Context, st *store.Store, cl *source.Client, run store.Run, after int64, digest string, size int) *pageAhead {
	actx, cancel := context.WithCancel(ctx)
	a := &pageAhead{after: after, digest: digest, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.page, a.err = cl.Fetch(actx, after, digest, run.DescriptorHash, size)
		if a.err == nil && !a.page.Idle {
			a.prep, a.err = st.PreparePage(run, a.page)
		}
	}()
	return a
}

// take waits for the page fetched ahead and reports true when it continues
// from (through, digest), the cursor the current page committed: page, prep
// and err are then the fetch's. Otherwise it stops the fetch and reports
// false. Safe on a nil *pageAhead.
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

// stop cancels the fetch and waits for its goroutine. Safe on nil and twice.
func (a *pageAhead) stop() {
	if a == nil {
		return
	}
	a.cancel()
	<-a.done
}
