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
	"errors"
	"math/big"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	. "github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// FR-APR06: a page refused for several reasons names the earliest page trade
// in authoritative order, whether the window scan or a probe found its row
// (checkTrades reads the window first and probes the rest).
func TestCheckTrades_EarliestRefusalWhicheverReadFoundIt(t *testing.T) {
	mismatch := Trade(3, 2, "t2", "ACME", "121", "2", "B", "A") // evTrade2 with another price
	for _, tc := range []struct {
		name string
		seed func(f fixture)
		want codes.Code
	}{
		{"t1 probed (retained after the window), t2 in the window differs", func(f fixture) {
			seedTrade(t, f.s, "s", evTrade1, i64(99), "BOOKED")
			seedTrade(t, f.s, "s", mismatch, i64(3), "BOOKED")
		}, codes.TradeProvenanceConflict},
		{"t1 in the window differs, t2 probed (retained after the window)", func(f fixture) {
			seedTrade(t, f.s, "s", Trade(2, 1, "t1", "ACME", "111", "5", "A", "B"), i64(2), "BOOKED")
			seedTrade(t, f.s, "s", evTrade2, i64(99), "BOOKED")
		}, codes.ImmutableTradeConflict},
		{"t1 in the window rejected, t2 in the window differs", func(f fixture) {
			seedTrade(t, f.s, "s", evTrade1, i64(2), "REJECTED")
			seedTrade(t, f.s, "s", mismatch, i64(3), "BOOKED")
		}, codes.RejectedBooking},
		{"t1 probed (no consensus seq is refused scope-wide first)", func(f fixture) {
			seedTrade(t, f.s, "s", evTrade1, nil, "BOOKED")
		}, codes.UnknownLegacyHistory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			tc.seed(f)
			refused(t, f.s, f.l, f.run, f.page(), tc.want)
		})
	}
}

func TestTradeRefusal_KeepsTheEarliestPageTrade(t *testing.T) {
	a := errors.New("a")
	b := errors.New("b")
	for _, tc := range []struct {
		name   string
		offers []struct{ seq, tradeSeq int64 }
		want   int // index of the offer that must win
	}{
		{"one", []struct{ seq, tradeSeq int64 }{{5, 1}}, 0},
		{"a later seq loses", []struct{ seq, tradeSeq int64 }{{5, 1}, {6, 0}}, 0},
		{"an earlier seq wins", []struct{ seq, tradeSeq int64 }{{6, 0}, {5, 9}}, 1},
		{"same seq, lower trade seq wins", []struct{ seq, tradeSeq int64 }{{5, 2}, {5, 1}}, 1},
		{"same seq, higher trade seq loses", []struct{ seq, tradeSeq int64 }{{5, 1}, {5, 2}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f tradeRefusal
			errs := []error{a, b}
			for i, o := range tc.offers {
				f.offer(Trade(o.seq, o.tradeSeq, "x", "ACME", "1", "1", "A", "B").Trade, errs[i])
			}
			if f.err != errs[tc.want] {
				t.Fatalf("kept %v, want %v", f.err, errs[tc.want])
			}
		})
	}
}

// The Go comparison of a retained trade with its source event is the SQL
// one it replaced: decimals numerically, whatever their scale; NaN equals
// nothing; timestamps at the column's microseconds.
func TestRetainedTrade_SameAs(t *testing.T) {
	src := evTrade1.Trade // price 110, quantity 5
	num := func(i int64, exp int32) pgtype.Numeric {
		return pgtype.Numeric{Int: big.NewInt(i), Exp: exp, Valid: true}
	}
	row := func(edit func(r *retainedTrade)) *retainedTrade {
		seq := src.Seq
		r := &retainedTrade{id: src.TradeID, instrument: src.Instrument, buyOrder: src.BuyOrderID, sellOrder: src.SellOrderID,
			buyAccount: src.BuyAccount, sellAccount: src.SellAccount, status: "BOOKED", seq: &seq, tradeSeq: src.TradeSeq,
			price: num(110, 0), quantity: num(5, 0), ts: tsSQL(src.TS)}
		if edit != nil {
			edit(r)
		}
		return r
	}
	for _, tc := range []struct {
		name string
		r    *retainedTrade
		want bool
	}{
		{"as written", row(nil), true},
		{"another scale", row(func(r *retainedTrade) { r.price, r.quantity = num(11000, -2), num(50, -1) }), true},
		{"another price", row(func(r *retainedTrade) { r.price = num(111, 0) }), false},
		{"another quantity", row(func(r *retainedTrade) { r.quantity = num(4, 0) }), false},
		{"NaN price", row(func(r *retainedTrade) { r.price = pgtype.Numeric{NaN: true, Valid: true} }), false},
		{"another trade seq", row(func(r *retainedTrade) { r.tradeSeq++ }), false},
		{"another instrument", row(func(r *retainedTrade) { r.instrument = "OTHER" }), false},
		{"another buy order", row(func(r *retainedTrade) { r.buyOrder = "x" }), false},
		{"another sell order", row(func(r *retainedTrade) { r.sellOrder = "x" }), false},
		{"another buyer", row(func(r *retainedTrade) { r.buyAccount = "x" }), false},
		{"another seller", row(func(r *retainedTrade) { r.sellAccount = "x" }), false},
		{"a microsecond off", row(func(r *retainedTrade) { r.ts = r.ts.Add(time.Microsecond) }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.sameAs(src); got != tc.want {
				t.Fatalf("sameAs = %v, want %v", got, tc.want)
			}
		})
	}
}

// orderProbes lists, after the window, exactly what it did not show: each
// page order id once, its versions' range among the ones not retained, and
// whether its current row is still wanted, and whether the slice holds its
// version 1; nothing for an order the window showed in full.
func TestOrderProbes(t *testing.T) {
	o := func(id string, v int64) *wire.Order { return &wire.Order{OrderID: id, Version: v} }
	type probe struct {
		id        string
		lo, hi    int64
		cur, born bool
	}
	for _, tc := range []struct {
		name     string
		orders   []*wire.Order
		retained []orderKey
		shown    []string // order ids whose current row the window showed
		want     []probe
	}{
		{"bootstrap: every version and every current row", []*wire.Order{o("a", 1), o("a", 2), o("b", 3)}, nil, nil,
			[]probe{{"a", 1, 2, true, true}, {"b", 3, 3, true, false}}},
		{"re-verification: the window showed everything", []*wire.Order{o("a", 1), o("a", 2)}, []orderKey{{"a", 1}, {"a", 2}}, []string{"a"}, nil},
		{"current row newer than the page: probed alone", []*wire.Order{o("a", 1), o("a", 2)}, []orderKey{{"a", 1}, {"a", 2}}, nil,
			[]probe{{"a", 1, 0, true, true}}},
		{"one version missing after one shown", []*wire.Order{o("a", 1), o("a", 2), o("a", 3)}, []orderKey{{"a", 1}, {"a", 3}}, []string{"a"},
			[]probe{{"a", 2, 2, false, true}}},
		{"missing versions widen the range, shown ones do not", []*wire.Order{o("a", 4), o("a", 2), o("a", 7), o("b", 1)}, []orderKey{{"a", 7}, {"b", 1}}, []string{"a", "b"},
			[]probe{{"a", 2, 4, false, false}}},
		{"born: version 1 after later ones, retained or not", []*wire.Order{o("a", 3), o("b", 2), o("a", 1), o("c", 1)}, []orderKey{{"c", 1}}, nil,
			[]probe{{"a", 1, 3, true, true}, {"b", 2, 2, true, false}, {"c", 1, 0, true, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			retained := map[orderKey]bool{}
			for _, k := range tc.retained {
				retained[k] = true
			}
			shown := map[string]int64{}
			for _, id := range tc.shown {
				shown[id] = 1
			}
			ids, lo, hi, cur, born := orderProbes(tc.orders, retained, shown)
			var got []probe
			for i := range ids {
				got = append(got, probe{ids[i], lo[i], hi[i], cur[i], born[i]})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("probes %+v, want %+v", got, tc.want)
			}
		})
	}
}
