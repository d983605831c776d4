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
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/position"
	"github.com/projection-recovery/projection-recovery/internal/reference/enginetest"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// TestDerivedHolds: the page takes the last full fold as its derivation only
// when nothing of the key's own can have changed it (deferred.go).
func TestDerivedHolds(t *testing.T) {
	k := key{"A", "ACME"}
	tr := storetest.Trade(5, 1, "t5", "ACME", "10", "2", "A", "B").Trade
	held := position.State{Quantity: dec("3"), AvgCost: dec("9.5")}
	other := position.State{Quantity: dec("3"), AvgCost: dec("9.6")}
	seq := int64(4)
	for _, tc := range []struct {
		name     string
		row      posRow
		retained bool // the slice's trade of the key is retained already
		opening  bool // the slice holds an opening of the key
		want     bool
	}{
		{"the row holds the last full fold, every trade of the slice retained", posRow{exists: true, openProven: true, basisSeq: &seq, derived: &held, pre: held}, true, false, true},
		{"the row moved since (a live write, a repair)", posRow{exists: true, openProven: true, basisSeq: &seq, derived: &held, pre: other}, true, false, false},
		{"the slice inserts a trade of the key", posRow{exists: true, openProven: true, basisSeq: &seq, derived: &held, pre: held}, false, false, false},
		{"the slice holds an opening of the key", posRow{exists: true, openProven: true, basisSeq: &seq, derived: &held, pre: held}, true, true, false},
		{"no derived position recorded (a repair cleared it, or before 00005)", posRow{exists: true, openProven: true, basisSeq: &seq, pre: held}, true, false, false},
		{"no basis", posRow{exists: true, openProven: true, derived: &held, pre: held}, true, false, false},
		{"no row", posRow{openProven: true, basisSeq: &seq, derived: &held, pre: held}, true, false, false},
		{"an unproven opening", posRow{exists: true, basisSeq: &seq, derived: &held, pre: held}, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newSlice(nil, 4, "", nil)
			p.add(wire.Event{Type: wire.TypeTrade, Trade: tr}, nil)
			if tc.opening {
				p.openings[k] = &wire.Opening{Seq: 5, Account: "A", Instrument: "ACME", Quantity: decimal.Zero, AvgCost: decimal.Zero}
			}
			w := &pageTx{p: p, existing: map[string]bool{"t5": tc.retained}}
			r := tc.row
			r.k = k
			if got := w.derivedHolds(&r); got != tc.want {
				t.Fatalf("derivedHolds = %v, want %v", got, tc.want)
			}
		})
	}
}

// reverified is a complete projection of src whose cursor was reset
// (FR-APR07), as BenchmarkReverifyFromGenesis prepares it.
func reverified(t *testing.T, src *storetest.Ledger, foldAll bool) (*Store, Lease, Run) {
	t.Helper()
	s := newStore(t)
	s.hooks.foldAll = foldAll
	run := addRun(t, s, "s", PhaseActive, nil)
	l := lease(t, s, "s", "a")
	catchUp(t, s, l, run, src, 60)
	mustExec(t, s, `DELETE FROM projection_catchup_cursor`)
	mustExec(t, s, `DELETE FROM projection_catchup_outbox`)
	return s, l, run
}

// pagesUntil applies pages of max events from the cursor until it reaches
// seq or the scope is CURRENT, summing the results; the first error stops it.
func pagesUntil(t *testing.T, s *Store, l Lease, run Run, src *storetest.Ledger, max int, seq int64) (PageResult, error) {
	t.Helper()
	var total PageResult
	for {
		c, err := s.ReadCursor(ctxb, run.Scope)
		if err != nil {
			t.Fatal(err)
		}
		if c.VerifiedThroughSeq >= seq || (c.State == StateCurrent && c.VerifiedThroughSeq == src.Boundary) {
			return total, nil
		}
		res, err := s.ApplyPage(ctxb, l, run, src.Page(c.VerifiedThroughSeq, max))
		total.DeferredKeys += res.DeferredKeys
		total.NewerLegs += res.NewerLegs
		total.TouchedKeys += res.TouchedKeys
		total.State, total.VerifiedThroughSeq = res.State, res.VerifiedThroughSeq
		if err != nil {
			return total, err
		}
	}
}

func deferredCount(t *testing.T, s *Store) (n int) {
	t.Helper()
	if err := adminOf(t, s).QueryRow(ctxb, `SELECT count(*) FROM projection_catchup_basis WHERE deferred`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// FR-APR06 R1 + FR-APR07 (docs/reverification.md): re-verifying a complete
// projection defers the keys whose last full fold still holds, keeps the
// deferral in the database (a restarted or new manager finds it), and
// re-derives every deferred key before the scope is CURRENT: the same
// projection, basis and notifications as folding every key in full on every
// page, for a fraction of the retained legs re-read.
func TestDeferred_ReverificationMatchesFoldingEverything(t *testing.T) {
	t.Parallel()
	src := enginetest.Ledger(t, 11, 1500, 6)
	var snaps [2]string
	var legs [2]int64
	for i, foldAll := range []bool{false, true} {
		s, l, run := reverified(t, src, foldAll)
		half, err := pagesUntil(t, s, l, run, src, 40, src.Boundary/2)
		if err != nil {
			t.Fatal(err)
		}
		if n := deferredCount(t, s); foldAll != (n == 0) || foldAll != (half.DeferredKeys == 0) {
			t.Fatalf("foldAll %v: %d keys deferred in the database, %d by the pages", foldAll, n, half.DeferredKeys)
		}
		// Another Store: nothing of the deferral lives in the process.
		s2 := New(s.pool)
		s2.hooks.foldAll = foldAll
		rest, err := pagesUntil(t, s2, l, run, src, 40, src.Boundary)
		if err != nil || rest.State != StateCurrent {
			t.Fatalf("foldAll %v: %+v %v", foldAll, rest, err)
		}
		if n := deferredCount(t, s); n != 0 {
			t.Fatalf("CURRENT with %d keys deferred", n)
		}
		storetest.AssertPositions(t, s.pool, "s", src.Decoded)
		if n := len(outbox(t, s)); n != 0 {
			t.Fatalf("re-verification changed %d keys", n)
		}
		snaps[i], legs[i] = sansBasisSeq(t, s), half.NewerLegs+rest.NewerLegs
	}
	if snaps[0] != snaps[1] {
		t.Fatalf("deferral left another projection:\n%s\nfolding everything:\n%s", snaps[0], snaps[1])
	}
	if legs[0]*2 > legs[1] {
		t.Fatalf("deferral re-read %d retained legs, folding everything %d", legs[0], legs[1])
	}
}

// sansBasisSeq is snapshot with the basis rows' basis_seq left out: the
// re-derivation before CURRENT moves a deferred key's basis up to the cursor,
// where a page that last touched the key left it at that page. No retained
// trade of the key lies between the two (each window was verified), so the
// basis values are the same.
func sansBasisSeq(t *testing.T, s *Store) string {
	t.Helper()
	lines := strings.Split(snapshot(t, s), "\n")
	var basis string
	if err := adminOf(t, s).QueryRow(ctxb, `SELECT coalesce(string_agg(b::text, '|' ORDER BY account, instrument), '') FROM (
SELECT scope, account, instrument, quantity, avg_cost, derived_quantity, derived_avg_cost, deferred FROM projection_catchup_basis) b`).Scan(&basis); err != nil {
		t.Fatal(err)
	}
	lines[5] = basis // snapshot's basis line
	return strings.Join(lines, "\n")
}

// liveTrade writes a trade beyond the source's boundary for a deferred key
// as a writer would: with its position (arrival order, position.Apply) or
// without it (a lost update). It returns the trade's event.
func liveTrade(t *testing.T, s *Store, src *storetest.Ledger, withPosition bool) wire.Event {
	t.Helper()
	var acct, instr string
	if err := adminOf(t, s).QueryRow(ctxb, `SELECT account, instrument FROM projection_catchup_basis WHERE deferred ORDER BY account, instrument LIMIT 1`).Scan(&acct, &instr); err != nil {
		t.Fatalf("no deferred key: %v", err)
	}
	seller := "live-counterparty"
	e := storetest.Trade(src.Boundary+1, 1, "live-1", instr, "101.5", "3", acct, seller)
	seedTrade(t, s, "s", e, &e.Trade.Seq, "BOOKED")
	if withPosition {
		for _, leg := range []struct {
			acct string
			qty  decimal.Decimal
		}{{acct, e.Trade.Quantity}, {seller, e.Trade.Quantity.Neg()}} {
			q, a := decimal.Zero, decimal.Zero
			_ = adminOf(t, s).QueryRow(ctxb, `SELECT quantity, avg_cost FROM positions WHERE scope = 's' AND account = $1 AND instrument = $2`, leg.acct, instr).Scan(&q, &a)
			n := position.Apply(position.State{Quantity: q, AvgCost: a}, leg.qty, e.Trade.Price)
			mustExec(t, s, `INSERT INTO positions (scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, quantity, avg_cost)
VALUES ('s', $1, $2, 0, 0, true, $3, $4) ON CONFLICT (scope, account, instrument) DO UPDATE SET quantity = EXCLUDED.quantity, avg_cost = EXCLUDED.avg_cost`,
				leg.acct, instr, n.Quantity, n.AvgCost)
		}
	}
	return e
}

// R1 under deferral: a live trade newer than the source's boundary, written
// with its position while the scope re-verifies, moves its key's row off the
// recorded fold, so the key's next page folds it in full and keeps it; the
// scope ends CURRENT with exactly the independent replay of the source plus
// that trade.
func TestDeferred_ALiveWriteIsFoldedAndKept(t *testing.T) {
	t.Parallel()
	src := enginetest.Ledger(t, 12, 1200, 5)
	s, l, run := reverified(t, src, false)
	if _, err := pagesUntil(t, s, l, run, src, 40, src.Boundary/3); err != nil {
		t.Fatal(err)
	}
	e := liveTrade(t, s, src, true)
	res, err := pagesUntil(t, s, l, run, src, 40, src.Boundary)
	if err != nil || res.State != StateCurrent {
		t.Fatalf("%+v %v", res, err)
	}
	storetest.AssertPositions(t, s.pool, "s", append(append([]wire.Event{}, src.Decoded...), e))
}

// The certificate of completeness is never issued over a deferred key: a
// trade written without its position (a lost update) after its key's fold
// was recorded is not seen by the pages that defer the key, but the
// re-derivation before CURRENT refuses it (UNEXPLAINED_BALANCE), exactly as
// folding every key on every page refuses it at the key's next page; the
// scope is not CURRENT either way.
func TestDeferred_ALostUpdateIsRefusedBeforeCurrent(t *testing.T) {
	t.Parallel()
	src := enginetest.Ledger(t, 13, 1200, 5)
	for _, foldAll := range []bool{false, true} {
		s, l, run := reverified(t, src, false)
		if _, err := pagesUntil(t, s, l, run, src, 40, src.Boundary/3); err != nil {
			t.Fatal(err)
		}
		liveTrade(t, s, src, false)
		s.hooks.foldAll = foldAll
		_, err := pagesUntil(t, s, l, run, src, 40, src.Boundary)
		wantCode(t, err, codes.UnexplainedBalance)
		c, rerr := s.ReadCursor(ctxb, "s")
		if rerr != nil || c.State == StateCurrent || c.VerifiedThroughSeq >= src.Boundary {
			t.Fatalf("foldAll %v: cursor %+v %v after the refusal", foldAll, c, rerr)
		}
	}
}
