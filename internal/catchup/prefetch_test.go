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
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/source"
)

// TestPageAhead: a page fetched ahead is used only when it continues from
// the cursor the current page committed; otherwise it is stopped, and a
// stopped fetch has ended (no goroutine, no request outlives its cycle),
// even against a member that hangs.
func TestPageAhead(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "ahead", 60)
	cl, err := source.NewClient(source.ClientConfig{BaseURL: f.url})
	if err != nil {
		t.Fatal(err)
	}
	_, run, err := f.store.ReadScope(ctx, f.scope)
	if err != nil {
		t.Fatal(err)
	}
	ended := func(a *pageAhead) bool {
		select {
		case <-a.done:
			return true
		default:
			return false
		}
	}

	t.Run("continues from the committed cursor", func(t *testing.T) {
		a := fetchAhead(ctx, f.store, cl, run, 0, chain.Genesis, 16, 1)
		if !a.take(0, chain.Genesis) {
			t.Fatal("a page fetched from the committed cursor was refused")
		}
		page, prep, err := a.unit()
		if err != nil || page == nil || prep == nil || page.AfterSeq != 0 || page.ThroughSeq == 0 || prep.Pages() != 1 {
			t.Fatalf("page %+v prep %v err %v", page, prep, err)
		}
	})
	t.Run("the pages after it merge into one unit, up to n, and stop at the boundary", func(t *testing.T) {
		a := fetchAhead(ctx, f.store, cl, run, 0, chain.Genesis, 16, 3)
		if !a.take(0, chain.Genesis) {
			t.Fatal("refused")
		}
		page, prep, err := a.unit()
		if err != nil || len(a.pages) != 3 || prep.Pages() != 3 || page != a.pages[2] {
			t.Fatalf("%d pages fetched, unit of %d ending at %+v: %v", len(a.pages), prep.Pages(), page, err)
		}
		for i := 1; i < 3; i++ {
			if a.pages[i].AfterSeq != a.pages[i-1].ThroughSeq || a.pages[i].DigestAfter != a.pages[i-1].DigestThrough {
				t.Fatalf("page %d does not continue page %d", i, i-1)
			}
		}
		all := fetchAhead(ctx, f.store, cl, run, 0, chain.Genesis, 16, 1000)
		all.take(0, chain.Genesis)
		last := all.pages[len(all.pages)-1]
		if all.err != nil || last.ThroughSeq != last.BoundarySeq || len(all.pages) >= 1000 {
			t.Fatalf("%d pages, the last through %d of boundary %d: %v", len(all.pages), last.ThroughSeq, last.BoundarySeq, all.err)
		}
	})
	t.Run("another cursor discards it", func(t *testing.T) {
		a := fetchAhead(ctx, f.store, cl, run, 0, chain.Genesis, 16, 1)
		if a.take(5, chain.Genesis) {
			t.Fatal("a page fetched after 0 was taken for a cursor at 5")
		}
		if !ended(a) {
			t.Fatal("the discarded fetch is still running")
		}
	})
	t.Run("a bad page is an error of the page, not a panic", func(t *testing.T) {
		a := fetchAhead(ctx, f.store, cl, run, 0, "not-a-digest", 16, 1)
		if !a.take(0, "not-a-digest") {
			t.Fatal("refused")
		}
		if _, _, err := a.unit(); err == nil {
			t.Fatal("no error, want the client's refusal of the digest")
		}
	})
	t.Run("stop ends a fetch from a member that hangs", func(t *testing.T) {
		f.delay.Store(int64(time.Minute))
		defer f.delay.Store(0)
		a := fetchAhead(ctx, f.store, cl, run, 0, chain.Genesis, 16, 1)
		time.Sleep(50 * time.Millisecond)
		start := time.Now()
		a.stop()
		if d := time.Since(start); d > 5*time.Second || !ended(a) {
			t.Fatalf("stop took %v (ended %v)", d, ended(a))
		}
		a.stop() // twice is harmless
	})
	t.Run("nil", func(t *testing.T) {
		var a *pageAhead
		if a.take(0, chain.Genesis) {
			t.Fatal("nil took")
		}
		a.stop()
	})
}
