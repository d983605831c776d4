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

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/wire"
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

// sortFills orders references like position.Sort orders fills: (seq,
// tradeSeq, leg), stable, whichever side (source event or retained row)
// each reference points into.
func TestPositions_SortFillsIsPositionOrder(t *testing.T) {
	q := decimal.NewFromInt(1)
	s := &Snapshot{
		Source: SourceSide{Trades: []wire.Trade{
			{Seq: 7, TradeSeq: 2, Quantity: q, Price: q},
			{Seq: 5, TradeSeq: 9, Quantity: q, Price: q},
			{Seq: 7, TradeSeq: 1, Quantity: q, Price: q},
		}},
		SQL: SQLSide{Trades: []TradeRow{{Seq: Seq(6), TradeSeq: 4, Quantity: q, Price: q}}},
	}
	src := func(i uint32, leg uint8) fillRef { return fillRef{i: i, leg: leg} }
	row := func(i uint32, leg uint8) fillRef { return fillRef{i: i, leg: leg, row: true} }
	for _, tc := range []struct {
		name string
		in   []fillRef
		want []fillRef
	}{
		{"already sorted", []fillRef{src(1, 0), row(0, 1), src(2, 0), src(0, 1)}, []fillRef{src(1, 0), row(0, 1), src(2, 0), src(0, 1)}},
		{"by seq across sides", []fillRef{src(0, 0), row(0, 0), src(1, 0)}, []fillRef{src(1, 0), row(0, 0), src(0, 0)}},
		{"by trade seq within a seq", []fillRef{src(0, 1), src(2, 1)}, []fillRef{src(2, 1), src(0, 1)}},
		{"by leg within a trade", []fillRef{src(1, 1), src(1, 0)}, []fillRef{src(1, 0), src(1, 1)}},
		{"stable on equal keys", []fillRef{row(0, 0), src(1, 1), row(0, 0)}, []fillRef{src(1, 1), row(0, 0), row(0, 0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := slices.Clone(tc.in)
			sortFills(s, got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("sortFills(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
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
