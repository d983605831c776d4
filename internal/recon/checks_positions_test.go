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
		SQL: SQLSide{Trades: []TradeRow{{Seq: i64(6), TradeSeq: 4, Quantity: q, Price: q}}},
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
