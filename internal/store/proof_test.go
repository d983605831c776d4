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
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/position"
	. "github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// verdict applies src from genesis in pages of at most max events on a fresh
// store prepared by seed, until a page refuses or the scope is CURRENT. It
// returns the refusal code ("" when CURRENT) and requires that the refused
// page wrote nothing. When CURRENT, every position must equal the replay.
func verdict(t *testing.T, src *Ledger, max int, seed func(s *Store)) codes.Code {
	t.Helper()
	s := newStore(t)
	run := addRun(t, s, "s", PhaseActive, nil)
	l := lease(t, s, "s", "a")
	if seed != nil {
		seed(s)
	}
	for after := int64(0); ; {
		before := snapshot(t, s)
		res, err := s.ApplyPage(ctxb, l, run, src.Page(after, max))
		if err != nil {
			if after := snapshot(t, s); after != before {
				t.Fatalf("refused page (%v) wrote:\nbefore %s\nafter  %s", err, before, after)
			}
			return codes.Of(err)
		}
		if res.Current() {
			AssertPositions(t, s.pool, "s", src.Decoded)
			return ""
		}
		if res.VerifiedThroughSeq == after {
			t.Fatalf("page size %d makes no progress at %d", max, after)
		}
		after = res.VerifiedThroughSeq
	}
}

// pageSizes are the page sizes verdict tests run at, so a page boundary falls
// between every two commands: one event, two, three and the whole ledger.
// baseSizes are those the base ledger can be served at (its seq-2 command
// holds two events and pages hold whole commands).
var (
	pageSizes = []int{1, 2, 3, 100}
	baseSizes = []int{2, 3, 100}
)

// A flag in SQL proves nothing (defect: opening_proven = true was trusted).
// B's row claims a proven opening of 7 with no retained trade behind it; the
// source has no opening for B and derives -3 from its two trades. Starting
// from the stored 7 would certify 4 as CURRENT. Only the verified opening
// event or a basis an earlier verified page wrote proves an opening, so the
// page that touches B refuses, at every page size, and writes nothing:
// UNPROVEN_INITIAL_BALANCE without provenance, OPENING_CONFLICT when
// opening_seq names a seq whose verified source holds no such opening (inside
// the window, or beyond it: then it would follow B's trades).
func TestOpeningProof_StoredFlagProvesNothing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		openingSeq *int64
		want       codes.Code
	}{
		{"no provenance", nil, codes.UnprovenInitialBalance},
		{"seq of another key's opening", i64(1), codes.OpeningConflict},
		{"seq of a trade in the window", i64(3), codes.OpeningConflict},
		{"seq beyond the window, after B's trades", i64(9), codes.OpeningConflict},
	} {
		for _, max := range baseSizes {
			t.Run(fmt.Sprintf("%s/max=%d", c.name, max), func(t *testing.T) {
				t.Parallel()
				got := verdict(t, baseLedger(t), max, func(s *Store) {
					mustExec(t, s, `INSERT INTO positions (scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq, quantity, avg_cost)
VALUES ('s', 'B', 'ACME', 7, 95, true, $1, 7, 95)`, c.openingSeq)
				})
				if got != c.want {
					t.Fatalf("verdict %q, want %s", got, c.want)
				}
			})
		}
	}
}

// A stored zero opening is the zero start every key without an opening event
// has: it proves nothing and needs nothing proven. The live feed retained t1
// but lost A's opening: A's row holds 5 on a zero opening, which its retained
// trade explains, and the page holding the opening re-derives 15 from it; at
// every page size catch-up certifies exactly the source's positions.
func TestOpeningProof_ZeroStoredOpeningIsTheZeroStart(t *testing.T) {
	t.Parallel()
	for _, max := range baseSizes {
		t.Run(fmt.Sprintf("max=%d", max), func(t *testing.T) {
			t.Parallel()
			got := verdict(t, baseLedger(t), max, func(s *Store) {
				seedTrade(t, s, "s", evTrade1, i64(2), "BOOKED")
				seedPosition(t, s, "s", "A", "ACME", "5", "110", true, "0")
				seedPosition(t, s, "s", "B", "ACME", "-5", "110", true, "0")
			})
			if got != "" {
				t.Fatalf("verdict %q, want CURRENT", got)
			}
		})
	}
}

// checkPhantomBalances: a non-zero row that no page touched (no basis) and no
// retained trade explains is unexplained whatever its opening_seq says, since
// a verified window holding that seq had no opening of the key; only an
// opening_seq beyond the page's through (a live opening newer than B, to be
// verified by a later page) is left to that page.
func TestOpeningProof_PhantomBalanceWithOpeningSeq(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		openingSeq *int64
		want       codes.Code
	}{
		{"seq inside the verified window", i64(3), codes.UnexplainedBalance},
		{"seq of another key's opening", i64(1), codes.UnexplainedBalance},
		{"live opening newer than B", i64(5), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			mustExec(t, f.s, `INSERT INTO positions (scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq, quantity, avg_cost)
VALUES ('s', 'Z', 'ACME', 5, 10, true, $1, 5, 10)`, c.openingSeq)
			if c.want != "" {
				refused(t, f.s, f.l, f.run, f.page(), c.want)
				return
			}
			if res, err := f.s.ApplyPage(ctxb, f.l, f.run, f.page()); err != nil || !res.Current() {
				t.Fatalf("want CURRENT, got %+v %v", res, err)
			}
		})
	}
}

// One ledger, one verdict at every page size: an opening event for a key that
// already has a trade at a seq <= the opening's seq is OPENING_CONFLICT, both
// when the trade and the opening land in one page (it used to fold the
// earlier trade onto the later opening and certify that) and when they land in
// different pages (a basis exists).
func TestOpeningProof_OpeningAfterTradesSameVerdictAtEveryPageSize(t *testing.T) {
	t.Parallel()
	ledgers := map[string]func(t *testing.T) *Ledger{
		"opening after a trade": func(t *testing.T) *Ledger {
			return NewLedger(t, 3,
				Trade(1, 1, "t1", "ACME", "100", "5", "A", "B"),
				Opening(2, "A", "ACME", "10", "90"),
				Trade(3, 2, "t2", "ACME", "110", "1", "B", "A"))
		},
		"opening of the seller after a trade": func(t *testing.T) *Ledger {
			return NewLedger(t, 4,
				Opening(1, "A", "ACME", "10", "90"),
				Trade(2, 1, "t1", "ACME", "100", "5", "A", "B"),
				Trade(3, 2, "t2", "ACME", "110", "1", "B", "A"),
				Opening(4, "B", "ACME", "3", "80"))
		},
	}
	for name, build := range ledgers {
		for _, max := range pageSizes {
			t.Run(fmt.Sprintf("%s/max=%d", name, max), func(t *testing.T) {
				t.Parallel()
				if got := verdict(t, build(t), max, nil); got != codes.OpeningConflict {
					t.Fatalf("verdict %q, want OPENING_CONFLICT", got)
				}
			})
		}
	}
	// The same command holding a trade of the key and then its opening (seq
	// equal): still an opening after a trade.
	for _, max := range []int{2, 100} {
		t.Run(fmt.Sprintf("same seq/max=%d", max), func(t *testing.T) {
			t.Parallel()
			src := NewLedger(t, 1, Trade(1, 1, "t1", "ACME", "100", "5", "A", "B"), Opening(1, "A", "ACME", "10", "90"))
			if got := verdict(t, src, max, nil); got != codes.OpeningConflict {
				t.Fatalf("verdict %q, want OPENING_CONFLICT", got)
			}
		})
	}
	// The trade already retained by the live feed, the opening in the page.
	t.Run("retained trade", func(t *testing.T) {
		t.Parallel()
		src := NewLedger(t, 2, Trade(1, 1, "t1", "ACME", "100", "5", "A", "B"), Opening(2, "A", "ACME", "10", "90"))
		got := verdict(t, src, 100, func(s *Store) {
			seedTrade(t, s, "s", src.Decoded[0], i64(1), "BOOKED")
			seedPosition(t, s, "s", "A", "ACME", "5", "100", true, "0")
			seedPosition(t, s, "s", "B", "ACME", "-5", "100", true, "0")
		})
		if got != codes.OpeningConflict {
			t.Fatalf("verdict %q, want OPENING_CONFLICT", got)
		}
	})
}

// proveStart's decision table (pure: no database). Page through 10; key A/X.
func TestOpeningProof_ProveStartTable(t *testing.T) {
	t.Parallel()
	k := key{"A", "X"}
	open := func(seq int64, qty, avg string) *wire.Opening {
		return &wire.Opening{Seq: seq, Account: "A", Instrument: "X", Quantity: Dec(qty), AvgCost: Dec(avg)}
	}
	row := func(qty, avg string, seq *int64) posRow {
		return posRow{k: k, exists: true, openQty: Dec(qty), openAvg: Dec(avg), openProven: true, openSeq: seq}
	}
	withBasis := row("7", "1", nil)
	withBasis.basisSeq, withBasis.basis = i64(5), position.State{Quantity: Dec("3"), AvgCost: Dec("2")}
	for _, c := range []struct {
		name      string
		r         posRow
		open      *wire.Opening
		retained  []position.NumFill
		pageFills []fillRow
		want      codes.Code
		start     string // quantity@avg
	}{
		{name: "basis", r: withBasis, start: "3@2"},
		{name: "basis then opening", r: withBasis, open: open(6, "1", "1"), want: codes.OpeningConflict},
		{name: "no row", r: posRow{k: k, openQty: Dec("0"), openAvg: Dec("0"), openProven: true}, start: "0@0"},
		{name: "zero stored opening", r: row("0", "0", nil), start: "0@0"},
		{name: "zero stored opening with a seq", r: row("0", "0", i64(3)), start: "0@0"},
		{name: "stored opening without provenance", r: row("7", "1", nil), want: codes.UnprovenInitialBalance},
		{name: "stored opening in a verified window", r: row("7", "1", i64(10)), want: codes.OpeningConflict},
		{name: "stored opening beyond the window", r: row("7", "1", i64(11)), want: codes.OpeningConflict},
		{name: "opening event matches stored", r: row("7", "1", i64(4)), open: open(4, "7", "1"), start: "7@1"},
		{name: "opening event, stored at another seq", r: row("7", "1", i64(3)), open: open(4, "7", "1"), want: codes.OpeningConflict},
		{name: "opening event, stored other values", r: row("8", "1", i64(4)), open: open(4, "7", "1"), want: codes.OpeningConflict},
		{name: "opening event, lost live (zero stored)", r: row("0", "0", nil), open: open(4, "7", "1"), start: "0@0"},
		{name: "opening event, equal stored without seq", r: row("7", "1", nil), open: open(4, "7", "1"), start: "7@1"},
		{name: "opening event, other stored without seq", r: row("6", "1", nil), open: open(4, "7", "1"), want: codes.OpeningConflict},
		{name: "opening after a retained trade", r: row("0", "0", nil), open: open(4, "7", "1"),
			retained: []position.NumFill{{Seq: 2, Quantity: position.NumOf(Dec("1")), Price: position.NumOf(Dec("1"))}}, want: codes.OpeningConflict},
		{name: "opening after a page trade", r: row("0", "0", nil), open: open(4, "7", "1"),
			pageFills: []fillRow{{t: &wire.Trade{TradeID: "t", Seq: 4, Quantity: Dec("1"), Price: Dec("1")}}}, want: codes.OpeningConflict},
		{name: "opening before trades", r: row("0", "0", nil), open: open(4, "7", "1"),
			retained:  []position.NumFill{{Seq: 12, Quantity: position.NumOf(Dec("1")), Price: position.NumOf(Dec("1"))}},
			pageFills: []fillRow{{t: &wire.Trade{TradeID: "t", Seq: 5, Quantity: Dec("1"), Price: Dec("1")}}}, start: "0@0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &pageTx{p: &prepared{through: 10, fills: map[key][]fillRow{k: c.pageFills}}}
			r := c.r
			got, err := w.proveStart(&r, c.open, c.retained)
			if codes.Of(err) != c.want {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if err == nil && got.Quantity.String()+"@"+got.AvgCost.String() != c.start {
				t.Fatalf("start %s@%s, want %s", got.Quantity, got.AvgCost, c.start)
			}
		})
	}
}
