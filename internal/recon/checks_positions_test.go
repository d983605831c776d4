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

package recon

import (
	"slices"
	"strings"
	"testing"
)

// A key's fills reach checkPositions in snapshot order: source trades at or
// below the cursor in seq order, then the retained trades above it in SQL
// order (trade_id, as the provider reads them: t-10 before t-2). The fold
// must still run in (seq, tradeSeq, leg) order, or a scope whose live feed
// is merely ahead of the cursor reports arrival-order drift on every key.
func TestPositions_RetainedTradesAboveTheCursorFoldInSeqOrder(t *testing.T) {
	s := fixture(40)
	s.SQL.Cursor.VerifiedThroughSeq = 10
	s.SQL.Basis = nil // bases past the cursor are another finding
	slices.SortFunc(s.SQL.Trades, func(a, b TradeRow) int { return strings.Compare(a.TradeID, b.TradeID) })
	r := mustDetect(t, s)
	for _, f := range r.Findings {
		if strings.HasPrefix(string(f.Invariant), "position.") {
			t.Errorf("finding on a clean derivation: %s (%s)", f.ID, f.RootCause.Code)
		}
	}
}

// A page's inputs fold in position.Sort's order, (seq, tradeSeq, leg),
// stable, whatever order the page lists them in: the fold of a key is the
// fold of its fills sorted.
func TestPositions_PageInputsFoldInPositionOrder(t *testing.T) {
	k := posKey{"acc-1", "BTC-USD"}
	in := []fill{
		{seq: 7, tradeSeq: 2, leg: 0, qty: d("3"), price: d("101")},
		{seq: 5, tradeSeq: 9, leg: 1, qty: d("1"), price: d("99")},
		{seq: 7, tradeSeq: 1, leg: 1, qty: d("2"), price: d("100")},
		{seq: 7, tradeSeq: 1, leg: 0, qty: d("5"), price: d("98.5")},
		{seq: 6, tradeSeq: 4, leg: 0, qty: d("0.5"), price: d("102")},
	}
	sorted := slices.Clone(in)
	slices.SortStableFunc(sorted, func(a, b fill) int {
		switch {
		case a.seq != b.seq:
			return int(a.seq - b.seq)
		case a.tradeSeq != b.tradeSeq:
			return int(a.tradeSeq - b.tradeSeq)
		}
		return int(a.leg) - int(b.leg)
	})
	want := flat
	for _, f := range sorted {
		want = f.apply(want)
	}
	for _, perm := range [][]int{{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {2, 0, 4, 1, 3}} {
		p := newPositions(newDetector(fixture(1)), &Snapshot{})
		for _, i := range perm {
			p.page = append(p.page, keyedFill{k: k, f: in[i]})
		}
		p.flush()
		if got := p.keys[k].flat.st; !got.Equal(want) || p.keys[k].fills != int64(len(in)) {
			t.Fatalf("order %v: fold %v (%d fills), want %v", perm, got, p.keys[k].fills, want)
		}
	}
}

// RowSeq: NULL is the sentinel, every consensus seq round-trips, and the
// one value that collides with the sentinel is refused, from a scanned
// value and through database/sql's Scanner alike.
func TestRowSeq_NullSentinelAndRefusal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		src     any
		want    RowSeq
		valid   bool
		wantErr bool
	}{
		{"NULL", nil, NullSeq, false, false},
		{"genesis-adjacent seq", int64(1), Seq(1), true, false},
		{"zero is a value, not NULL", int64(0), Seq(0), true, false},
		{"largest seq", int64(1<<63 - 1), Seq(1<<63 - 1), true, false},
		{"the sentinel's value is refused", int64(-1 << 63), NullSeq, false, true},
		{"not an integer", "7", NullSeq, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s RowSeq
			err := s.Scan(tc.src)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Scan(%v) error %v, want error %v", tc.src, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if s != tc.want || s.Valid() != tc.valid {
				t.Fatalf("Scan(%v) = %v (valid %v), want %v (valid %v)", tc.src, s, s.Valid(), tc.want, tc.valid)
			}
			v, ok := tc.src.(int64)
			if got, err := SeqFromSQL(v, ok); err != nil || got != tc.want {
				t.Fatalf("SeqFromSQL(%d, %v) = %v, %v", v, ok, got, err)
			}
		})
	}
	if NullSeq.String() != "" || Seq(42).String() != "42" {
		t.Fatalf("String: %q %q", NullSeq.String(), Seq(42).String())
	}
}
