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
	"fmt"
	"strings"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/reference/enginetest"
	"github.com/projection-recovery/projection-recovery/internal/source"
	. "github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// ledgerPages cuts the whole ledger into pages of at most max events.
func ledgerPages(src *Ledger, max int) []*source.Page {
	var pages []*source.Page
	for after := int64(0); after < src.Boundary; {
		p := src.Page(after, max)
		pages = append(pages, p)
		after = p.ThroughSeq
	}
	return pages
}

func mustPrepare(t *testing.T, s *Store, run Run, p *source.Page) *PreparedPage {
	t.Helper()
	pp, err := s.PreparePage(run, p)
	if err != nil {
		t.Fatal(err)
	}
	return pp
}

// projection is what a catch-up leaves that does not depend on how its
// events were cut into transactions: every trade, order and order version,
// every position, and the cursor.
func projection(t *testing.T, s *Store) string {
	t.Helper()
	dump := strings.Split(snapshot(t, s), "\n")
	return strings.Join(dump[:5], "\n")
}

// latestPublished checks R2 across transactions of any size: each key's
// latest outbox message carries the key's final position.
func latestPublished(t *testing.T, s *Store, scope string) {
	t.Helper()
	var stale int
	if err := s.pool.QueryRow(ctxb, `
SELECT count(*) FROM positions p
  LEFT JOIN LATERAL (SELECT o.quantity, o.avg_cost FROM projection_catchup_outbox o
                      WHERE o.scope = p.scope AND o.account = p.account AND o.instrument = p.instrument
                      ORDER BY o.cursor_seq DESC LIMIT 1) o ON true
 WHERE p.scope = $1 AND (o.quantity IS DISTINCT FROM p.quantity OR o.avg_cost IS DISTINCT FROM p.avg_cost)
   AND (p.quantity <> 0 OR o.quantity IS NOT NULL)`, scope).Scan(&stale); err != nil {
		t.Fatal(err)
	}
	if stale > 0 {
		t.Errorf("%d keys whose latest publication is not their final position (R2)", stale)
	}
}

// Merged pages (page_merge.go): pages merged into one unit commit the
// projection the pages commit one by one, in fewer transactions, equal to
// an independent replay of the source, and each key's latest publication is
// its final position (R2).
func TestMerge_CommitsWhatThePagesCommit(t *testing.T) {
	t.Parallel()
	src := enginetest.Ledger(t, 31, 1_500, 12)
	pages := ledgerPages(src, 300)
	if len(pages) < 6 {
		t.Fatalf("only %d pages", len(pages))
	}
	var dumps [2]string
	var slices [2]int
	for i, merge := range []bool{false, true} {
		s := newStore(t)
		s.SetSliceBudget(-1) // one transaction per unit: the count below is the units'
		run := addRun(t, s, "s", PhaseActive, nil)
		l := lease(t, s, "s", "a")
		for j := 0; j < len(pages); {
			pp := mustPrepare(t, s, run, pages[j])
			j++
			for merge && j < len(pages) && pp.Pages() < 3 && pp.Merge(mustPrepare(t, s, run, pages[j])) {
				j++
			}
			res, err := s.ApplyPrepared(ctxb, l, run, pp)
			if err != nil {
				t.Fatal(err)
			}
			slices[i] += res.Slices
		}
		dumps[i] = projection(t, s)
		AssertPositions(t, s.pool, "s", src.Decoded)
		for name, cmp := range map[string]func() (int, []string, error){
			"trades": func() (int, []string, error) { return CompareTrades(ctxb, s.pool, "s", src.Decoded) },
			"orders": func() (int, []string, error) { return CompareOrders(ctxb, s.pool, "s", src.Decoded) },
		} {
			if _, diffs, err := cmp(); err != nil || len(diffs) > 0 {
				t.Fatalf("merge=%v: %s differ from the source: %v %v", merge, name, err, diffs)
			}
		}
		latestPublished(t, s, "s")
	}
	if dumps[0] != dumps[1] {
		t.Errorf("the merged pages committed another projection than the pages one by one")
	}
	if want := (len(pages) + 2) / 3; slices[1] != want || slices[0] != len(pages) {
		t.Errorf("transactions: %d one by one, %d merged; want %d and %d", slices[0], slices[1], len(pages), want)
	}
}

// Merge joins only pages that apply as they would one by one; otherwise it
// reports false and changes neither.
func TestMerge_OnlyWhatAppliesAsThePages(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	run := addRun(t, s, "s", PhaseActive, nil)
	src := enginetest.Ledger(t, 5, 400, 8)
	pages := ledgerPages(src, 150)
	frozen := pages[0].ThroughSeq - 1
	draining := run
	draining.Phase, draining.FrozenSeq = PhaseDraining, &frozen
	other := run
	other.RunID++
	dup := func(evs ...wire.Event) (*source.Page, *source.Page) {
		l := NewLedger(t, 4, evs...)
		return l.Page(0, 1), l.Page(l.Page(0, 1).ThroughSeq, 10)
	}
	withHeader := func(pp *PreparedPage, f func(*source.Page)) *PreparedPage {
		h := *pp.prep.page
		f(&h)
		pp.prep.page = &h
		return pp
	}
	for _, tc := range []struct {
		name  string
		pages func(t *testing.T) (*PreparedPage, *PreparedPage)
	}{
		{"not consecutive", func(t *testing.T) (*PreparedPage, *PreparedPage) {
			return mustPrepare(t, s, run, pages[0]), mustPrepare(t, s, run, pages[2])
		}},
		{"the chain does not continue", func(t *testing.T) (*PreparedPage, *PreparedPage) {
			return mustPrepare(t, s, run, pages[0]), withHeader(mustPrepare(t, s, run, pages[1]), func(p *source.Page) { p.DigestAfter = strings.Repeat("0", 64) })
		}},
		{"the boundary moves back", func(t *testing.T) (*PreparedPage, *PreparedPage) {
			return mustPrepare(t, s, run, pages[0]), withHeader(mustPrepare(t, s, run, pages[1]), func(p *source.Page) { p.BoundarySeq = pages[0].BoundarySeq - 1 })
		}},
		{"prepared against another run", func(t *testing.T) (*PreparedPage, *PreparedPage) {
			return mustPrepare(t, s, run, pages[0]), mustPrepare(t, s, other, pages[1])
		}},
		{"a DRAINING run keeps a prefix of the first", func(t *testing.T) (*PreparedPage, *PreparedPage) {
			// The second cannot be prepared against that run (it starts past
			// the frozen seq): only the first page's prefix is in question.
			b := mustPrepare(t, s, run, pages[1])
			b.run = draining
			return mustPrepare(t, s, draining, pages[0]), b
		}},
		{"an idle page", func(t *testing.T) (*PreparedPage, *PreparedPage) {
			last := pages[len(pages)-1]
			return mustPrepare(t, s, run, last), mustPrepare(t, s, run, src.Page(last.ThroughSeq, 10))
		}},
		{"the first already applied", func(t *testing.T) (*PreparedPage, *PreparedPage) {
			a := mustPrepare(t, s, run, pages[0])
			a.prep.nextSlice(0)
			return a, mustPrepare(t, s, run, pages[1])
		}},
		{"a trade in both pages", func(t *testing.T) (*PreparedPage, *PreparedPage) {
			a, b := dup(Trade(1, 1, "t1", "ACME", "10", "1", "A", "B"), Trade(3, 2, "t1", "ACME", "10", "1", "A", "B"))
			return mustPrepare(t, s, run, a), mustPrepare(t, s, run, b)
		}},
		{"an order version in both pages", func(t *testing.T) (*PreparedPage, *PreparedPage) {
			o := func(seq int64) wire.Event {
				return Order(seq, "o1", 1, "A", "ACME", wire.SideBuy, "10", "1", "1", wire.StatusNew)
			}
			a, b := dup(o(1), o(3))
			return mustPrepare(t, s, run, a), mustPrepare(t, s, run, b)
		}},
		{"an opening of the same key in both pages", func(t *testing.T) (*PreparedPage, *PreparedPage) {
			a, b := dup(Opening(1, "A", "ACME", "1", "10"), Opening(3, "A", "ACME", "2", "10"))
			return mustPrepare(t, s, run, a), mustPrepare(t, s, run, b)
		}},
		{"more than the bound of a unit", func(t *testing.T) (*PreparedPage, *PreparedPage) {
			a, b := mustPrepare(t, s, run, pages[0]), mustPrepare(t, s, run, pages[1])
			a.prep.decoded = append(a.prep.decoded, make([]wire.Event, maxMergedEvents-len(a.prep.decoded)-len(b.prep.decoded)+1)...)
			return a, b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tc.pages(t)
			na, nb, ha := len(a.prep.decoded), len(b.prep.decoded), *a.prep.page
			if a.Merge(b) {
				t.Fatal("merged")
			}
			if len(a.prep.decoded) != na || len(b.prep.decoded) != nb || a.prep.page.ThroughSeq != ha.ThroughSeq || a.Pages() != 1 || len(a.prep.ends) != 0 || b.prep.cut != 0 {
				t.Fatal("a refused merge changed a page")
			}
		})
	}
	t.Run("consecutive pages of one run merge, and the second is consumed", func(t *testing.T) {
		a, b := mustPrepare(t, s, run, pages[0]), mustPrepare(t, s, run, pages[1])
		if !a.Merge(b) || a.Pages() != 2 || a.prep.page.ThroughSeq != pages[1].ThroughSeq || a.prep.page.AfterSeq != 0 {
			t.Fatalf("merge: %d pages through %d", a.Pages(), a.prep.page.ThroughSeq)
		}
		if _, err := s.ApplyPrepared(ctxb, lease(t, s, "s", "a"), run, b); err == nil {
			t.Fatal("a consumed page applied")
		}
	})
}

// A slice across merged pages that is refused is cut again page by page:
// the pages before the refused one commit, the cursor stops where applying
// the pages one by one stops it, with the same refusal, and nothing of the
// refused page is written.
func TestMerge_RefusedSliceCutAgainPageByPage(t *testing.T) {
	t.Parallel()
	src := enginetest.Ledger(t, 13, 600, 8)
	pages := ledgerPages(src, 200)
	if len(pages) < 3 {
		t.Fatalf("only %d pages", len(pages))
	}
	var orphanSeq int64
	for _, e := range src.Decoded {
		if e.Trade != nil && e.Seq() > pages[1].AfterSeq && e.Seq() <= pages[1].ThroughSeq {
			orphanSeq = e.Seq()
			break
		}
	}
	if orphanSeq == 0 {
		t.Fatal("no trade in the second page")
	}
	type outcome struct {
		code    codes.Code
		cursor  int64
		written string
	}
	var got [2]outcome
	for i, merge := range []bool{false, true} {
		s := newStore(t)
		s.SetSliceBudget(-1)
		run := addRun(t, s, "s", PhaseActive, nil)
		l := lease(t, s, "s", "a")
		seedTrade(t, s, "s", Trade(orphanSeq, 999, "orphan", "ACME", "1", "1", "A", "B"), i64(orphanSeq), "BOOKED")
		var err error
		if merge {
			pp := mustPrepare(t, s, run, pages[0])
			for _, p := range pages[1:] {
				if !pp.Merge(mustPrepare(t, s, run, p)) {
					t.Fatal("not merged")
				}
			}
			_, err = s.ApplyPrepared(ctxb, l, run, pp)
		} else {
			for _, p := range pages {
				if _, err = s.ApplyPage(ctxb, l, run, p); err != nil {
					break
				}
			}
		}
		c, rerr := s.ReadCursor(ctxb, "s")
		if rerr != nil {
			t.Fatal(rerr)
		}
		got[i] = outcome{codes.Of(err), c.VerifiedThroughSeq, projection(t, s)}
	}
	if got[0].code != codes.OrphanTrade || got[0].cursor != pages[0].ThroughSeq {
		t.Fatalf("one by one: %s at %d, want ORPHAN_TRADE at %d", got[0].code, got[0].cursor, pages[0].ThroughSeq)
	}
	if got[1] != got[0] {
		t.Errorf("merged: %s at %d, one by one: %s at %d (projections equal: %v)", got[1].code, got[1].cursor, got[0].code, got[0].cursor, got[1].written == got[0].written)
	}
}

// PrepareUnits sends units of at most maxPages merged pages in order, and a
// failure to prepare a page as the stream's last item.
func TestPrepareUnits(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	run := addRun(t, s, "s", PhaseActive, nil)
	pages := ledgerPages(enginetest.Ledger(t, 3, 350, 6), 100)
	if len(pages) < 5 {
		t.Fatalf("only %d pages", len(pages))
	}
	for _, tc := range []struct {
		name     string
		maxPages int
		bad      int // index of a page whose chain is broken; -1: none
		want     []int
		err      bool
	}{
		{"one page per unit", 1, -1, repeat(1, len(pages)), false},
		{"three pages per unit", 3, -1, append(repeat(3, len(pages)/3), repeat(len(pages)%3, min(1, len(pages)%3))...), false},
		{"up to Merge's bound", 0, -1, []int{len(pages)}, false},
		{"a broken page ends the stream after the units before it", 2, 3, []int{2, 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]*source.Page(nil), pages...)
			if tc.bad >= 0 {
				broken := *in[tc.bad]
				broken.DigestThrough = strings.Repeat("0", 64)
				in[tc.bad] = &broken
			}
			var got []int
			var err error
			for u := range s.PrepareUnits(ctxb, run, in, tc.maxPages) {
				if u.Err != nil {
					err = u.Err
					continue
				}
				got = append(got, u.Unit.Pages())
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || (err != nil) != tc.err {
				t.Fatalf("units of %v pages, err %v; want %v, err %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestOrderIndex_Join: a unit joined from any number of pages finds every
// version of every page and none other, and never holds more than
// maxUnitMaps maps (a lookup reads at most that many).
func TestOrderIndex_Join(t *testing.T) {
	page := func(p, n int) orderIndex {
		m := map[orderKey]*wire.Order{}
		for i := range n {
			k := orderKey{fmt.Sprintf("o%d-%d", p, i), int64(i + 1)}
			m[k] = &wire.Order{OrderID: k.id, Version: k.version}
		}
		return orderIndex{m}
	}
	for _, pages := range []int{1, maxUnitMaps, maxUnitMaps + 1, 40} {
		t.Run(fmt.Sprintf("%d pages", pages), func(t *testing.T) {
			x := page(0, 3)
			for p := 1; p < pages; p++ {
				x = x.join(page(p, 3))
			}
			if want := min(pages, maxUnitMaps); len(x) != want {
				t.Fatalf("%d maps, want %d", len(x), want)
			}
			for p := range pages {
				for i := range 3 {
					k := orderKey{fmt.Sprintf("o%d-%d", p, i), int64(i + 1)}
					if o := x.get(k); o == nil || o.OrderID != k.id || o.Version != k.version {
						t.Fatalf("get(%v) = %v", k, o)
					}
				}
			}
			if o := x.get(orderKey{"o0-0", 2}); o != nil {
				t.Fatalf("get of a version no page holds = %v", o)
			}
		})
	}
}

// TestSharesIdentity_ManyPages: a unit joined from many pages (the pages of
// a small pageSize) still finds a trade id, an order version or an opening's
// key of any of its pages in the next page, the pages past maxUnitMaps
// included, and nothing that no page holds; the unit never keeps more than
// maxUnitMaps maps of each (the check of the next page reads at most that
// many).
func TestSharesIdentity_ManyPages(t *testing.T) {
	page := func(p int) *pagePrep {
		return &pagePrep{
			orderBy:     orderIndex{{orderKey{fmt.Sprintf("o%d", p), 1}: &wire.Order{}}},
			tradeIDs:    unitMaps[string, bool]{{fmt.Sprintf("t%d", p): true}},
			openingKeys: unitMaps[key, bool]{{key{fmt.Sprintf("a%d", p), "X"}: true}},
		}
	}
	const pages = 40
	unit := page(0)
	for p := 1; p < pages; p++ {
		unit.orderBy = unit.orderBy.join(page(p).orderBy)
		unit.tradeIDs = unit.tradeIDs.join(page(p).tradeIDs)
		unit.openingKeys = unit.openingKeys.join(page(p).openingKeys)
	}
	if len(unit.orderBy) > maxUnitMaps || len(unit.tradeIDs) > maxUnitMaps || len(unit.openingKeys) > maxUnitMaps {
		t.Fatalf("unit keeps %d, %d, %d maps, at most %d", len(unit.orderBy), len(unit.tradeIDs), len(unit.openingKeys), maxUnitMaps)
	}
	fresh := func() *pagePrep {
		return &pagePrep{
			orderBy:     orderIndex{{orderKey{"o-new", 1}: &wire.Order{}}},
			tradeIDs:    unitMaps[string, bool]{{"t-new": true}},
			openingKeys: unitMaps[key, bool]{{key{"a-new", "X"}: true}},
		}
	}
	if sharesIdentity(unit, fresh()) {
		t.Fatal("a page with identities no page of the unit holds shares one")
	}
	for _, p := range []int{0, 2, maxUnitMaps, pages - 1} {
		for name, next := range map[string]func(*pagePrep){
			"trade id":      func(n *pagePrep) { n.tradeIDs[0][fmt.Sprintf("t%d", p)] = true },
			"order version": func(n *pagePrep) { n.orderBy[0][orderKey{fmt.Sprintf("o%d", p), 1}] = &wire.Order{} },
			"opening key":   func(n *pagePrep) { n.openingKeys[0][key{fmt.Sprintf("a%d", p), "X"}] = true },
		} {
			t.Run(fmt.Sprintf("%s of page %d", name, p), func(t *testing.T) {
				n := fresh()
				next(n)
				if !sharesIdentity(unit, n) {
					t.Fatalf("the %s of page %d is not found in the unit", name, p)
				}
			})
		}
	}
}
