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

package position

import (
	"testing"

	"github.com/shopspring/decimal"
)

func d(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func TestPosition_DivHalfEven(t *testing.T) {
	for _, c := range []struct{ num, den, want string }{
		{"1", "3", "0.333333333333"},
		{"2", "3", "0.666666666667"},
		{"-2", "3", "-0.666666666667"},
		{"2", "-3", "-0.666666666667"},
		// Ties: exactly half at the 13th place goes to the even neighbour.
		{"0.0000000000005", "1", "0"},
		{"0.0000000000015", "1", "0.000000000002"},
		{"0.0000000000025", "1", "0.000000000002"},
		{"-0.0000000000025", "1", "-0.000000000002"},
		{"-0.0000000000035", "1", "-0.000000000004"},
		// Just above a tie rounds up: a pre-rounded quotient would lose this.
		{"0.00000000000250000000000000001", "1", "0.000000000003"},
		{"10", "4", "2.5"},
		{"123456789012345678901234567890", "7", "17636684144620811271604938270"},
		{"1e-20", "1e-8", "0.000000000001"},
	} {
		t.Run(c.num+"/"+c.den, func(t *testing.T) {
			got := DivHalfEven(d(c.num), d(c.den), Places)
			if !got.Equal(d(c.want)) {
				t.Errorf("%s/%s = %s, want %s", c.num, c.den, got, c.want)
			}
		})
	}
}

func TestPosition_ApplyRules(t *testing.T) {
	for _, c := range []struct {
		name           string
		q, avg, tq, px string
		wantQ, wantAvg string
	}{
		{"from flat", "0", "0", "10", "100", "10", "100"},
		{"adding long", "10", "100", "10", "110", "20", "105"},
		{"adding short", "-10", "100", "-30", "120", "-40", "115"},
		{"reducing long keeps avg", "10", "100", "-4", "150", "6", "100"},
		{"reducing short keeps avg", "-10", "100", "4", "50", "-6", "100"},
		{"to flat is zero", "10", "100", "-10", "150", "0", "0"},
		{"crossing long to short takes price", "10", "100", "-15", "90", "-5", "90"},
		{"crossing short to long takes price", "-10", "100", "15", "90", "5", "90"},
		{"weighted average rounds half-even", "3", "1", "3", "0.0000000000005", "6", "0.5"},
		{"repeating average", "1", "1", "2", "2", "3", "1.666666666667"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Apply(State{d(c.q), d(c.avg)}, d(c.tq), d(c.px))
			if !got.Quantity.Equal(d(c.wantQ)) || !got.AvgCost.Equal(d(c.wantAvg)) {
				t.Errorf("got %s@%s want %s@%s", got.Quantity, got.AvgCost, c.wantQ, c.wantAvg)
			}
		})
	}
}

// Rounding after every trade is part of the definition: 1@1 + 1@2 + 1@2 gives
// 1.5 then (2*1.5+2)/3 = 1.666666666667, not (1+2+2)/3 computed once.
func TestPosition_RoundAfterEveryTrade(t *testing.T) {
	s := Derive(State{d("0"), d("0")}, []Fill{
		{Seq: 1, Quantity: d("3"), Price: d("1")},
		{Seq: 2, Quantity: d("3"), Price: d("2")},
		{Seq: 3, Quantity: d("1"), Price: d("0.1")},
	})
	// 3@1, +3@2 -> 1.5; +1@0.1 -> (6*1.5+0.1)/7 = 9.1/7 = 1.3
	if !s.AvgCost.Equal(d("1.3")) || !s.Quantity.Equal(d("7")) {
		t.Fatalf("got %s@%s", s.Quantity, s.AvgCost)
	}
	s = Derive(State{d("0"), d("0")}, []Fill{
		{Seq: 1, Quantity: d("1"), Price: d("1")},
		{Seq: 2, Quantity: d("2"), Price: d("1.5")},
		{Seq: 3, Quantity: d("3"), Price: d("1")},
	})
	// 1@1 +2@1.5 -> 4/3 = 1.333333333333; +3@1 -> (3*1.333333333333+3)/6 = 6.999999999999/6 = 1.1666666666665 -> tie -> 1.166666666666
	if !s.AvgCost.Equal(d("1.166666666666")) {
		t.Fatalf("got %s", s.AvgCost)
	}
}

// Order matters for the average (which is why arrival order is never
// certified, R1); Sort restores the authoritative (seq, tradeSeq, leg) order.
func TestPosition_SortAuthoritativeOrder(t *testing.T) {
	fills := []Fill{
		{Seq: 5, TradeSeq: 2, Quantity: d("-5"), Price: d("300")},
		{Seq: 2, TradeSeq: 1, Quantity: d("10"), Price: d("100")},
		{Seq: 5, TradeSeq: 1, Quantity: d("10"), Price: d("200")},
	}
	Sort(fills)
	s := Derive(State{d("0"), d("0")}, fills)
	if !s.Quantity.Equal(d("15")) || !s.AvgCost.Equal(d("150")) {
		t.Fatalf("got %s@%s", s.Quantity, s.AvgCost)
	}
	arrival := Derive(State{d("0"), d("0")}, []Fill{
		{Quantity: d("-5"), Price: d("300")}, {Quantity: d("10"), Price: d("100")}, {Quantity: d("10"), Price: d("200")},
	})
	if arrival.Equal(s) {
		t.Fatalf("arrival order should differ in this example")
	}
}

func TestPosition_RoundHalfEven(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"1.0000000000005", "1"}, {"1.0000000000015", "1.000000000002"}, {"-1.0000000000015", "-1.000000000002"}, {"2.5", "2.5"},
	} {
		t.Run(c.in, func(t *testing.T) {
			if got := RoundHalfEven(d(c.in), Places); !got.Equal(d(c.want)) {
				t.Errorf("%s -> %s want %s", c.in, got, c.want)
			}
		})
	}
}
