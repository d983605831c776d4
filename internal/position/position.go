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

// Package position is the authoritative position derivation (FR-APR06 R1):
// a pure function of a key's proven opening and its trades in authoritative
// order (consensus seq, engine trade seq). No I/O, no floats, no pre-rounded
// quotients: every division is exact big-integer arithmetic rounded half-even
// to Places decimal places, and the average cost is rounded after EVERY trade,
// so the result depends only on the ordered inputs, never on arrival order or on
// how many intermediate states a caller stored.
package position

import (
	"math/big"
	"sort"

	"github.com/shopspring/decimal"
)

// Places is the number of decimal places the average cost is rounded to
// (half-even) after every trade.
const Places = 12

// State is a key's position: signed quantity (negative = short) and average cost.
type State struct {
	Quantity decimal.Decimal
	AvgCost  decimal.Decimal
}

// Equal compares numerically (1.0 == 1.00), as numeric columns do.
func (s State) Equal(o State) bool {
	return s.Quantity.Equal(o.Quantity) && s.AvgCost.Equal(o.AvgCost)
}

// Fill is one leg of a trade for one key: Quantity is signed (+ buy, - sell).
type Fill struct {
	Seq      int64 // consensus sequence of the trade
	TradeSeq int64 // engine trade sequence
	Leg      int   // 0 = buy leg, 1 = sell leg (a self-trade has both, buy first)
	Quantity decimal.Decimal
	Price    decimal.Decimal
}

// Less is the authoritative order: (seq, tradeSeq, leg).
func Less(a, b Fill) bool {
	if a.Seq != b.Seq {
		return a.Seq < b.Seq
	}
	if a.TradeSeq != b.TradeSeq {
		return a.TradeSeq < b.TradeSeq
	}
	return a.Leg < b.Leg
}

// Sort puts fills in authoritative order (stable, in place).
func Sort(fills []Fill) {
	sort.SliceStable(fills, func(i, j int) bool { return Less(fills[i], fills[j]) })
}

// Derive folds fills, which must already be in authoritative order, onto the
// opening. Callers that cannot guarantee order call Sort first; Derive does not
// sort so that an incremental fold (basis + newer fills) is the same function.
func Derive(opening State, fills []Fill) State {
	s := opening
	for _, f := range fills {
		s = Apply(s, f.Quantity, f.Price)
	}
	return s
}

// Apply is one trade leg:
//   - adding (flat before, or same sign as the position): weighted average
//     (|q|*avg + |t|*price) / (|q| + |t|);
//   - reducing without crossing: average unchanged;
//   - reducing to flat: 0;
//   - crossing zero: the trade price (the new position was opened at it).
//
// The average is then rounded half-even to Places. A zero-quantity leg changes
// nothing but the rounding.
func Apply(s State, qty, price decimal.Decimal) State {
	newQty := s.Quantity.Add(qty)
	var avg decimal.Decimal
	switch {
	case qty.Sign() == 0:
		avg = s.AvgCost
	case s.Quantity.Sign() == 0 || s.Quantity.Sign() == qty.Sign():
		q, t := s.Quantity.Abs(), qty.Abs()
		avg = DivHalfEven(q.Mul(s.AvgCost).Add(t.Mul(price)), q.Add(t), Places)
	case newQty.Sign() == 0:
		avg = decimal.Zero
	case newQty.Sign() == s.Quantity.Sign():
		avg = s.AvgCost
	default:
		avg = price
	}
	return State{Quantity: newQty, AvgCost: RoundHalfEven(avg, Places)}
}

// DivHalfEven returns num/den rounded half-even to places decimals, computed
// exactly: with num = a·10^ea and den = b·10^eb, the scaled quotient is
// a·10^(ea-eb+places) / b, taken as a big.Int quotient and remainder; the
// remainder decides the rounding (2|r| against |b|), so no intermediate value is
// ever rounded or truncated. Panics on division by zero (a caller bug: the
// weighted-average denominator |q|+|t| is never zero when t != 0).
func DivHalfEven(num, den decimal.Decimal, places int32) decimal.Decimal {
	if den.Sign() == 0 {
		panic("position: division by zero")
	}
	a := new(big.Int).Set(num.Coefficient())
	b := new(big.Int).Set(den.Coefficient())
	k := int64(num.Exponent()) - int64(den.Exponent()) + int64(places)
	if k >= 0 {
		a.Mul(a, pow10(k))
	} else {
		b.Mul(b, pow10(-k))
	}
	return decimal.NewFromBigInt(quoHalfEven(a, b), -places)
}

// RoundHalfEven rounds d half-even to places decimals exactly.
func RoundHalfEven(d decimal.Decimal, places int32) decimal.Decimal {
	if d.Exponent() >= -places {
		return d
	}
	a := new(big.Int).Set(d.Coefficient())
	b := pow10(int64(-places - d.Exponent()))
	return decimal.NewFromBigInt(quoHalfEven(a, b), -places)
}

// quoHalfEven is a/b rounded to the nearest integer, ties to even.
func quoHalfEven(a, b *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(a, b, new(big.Int))
	if r.Sign() == 0 {
		return q
	}
	twoR := new(big.Int).Abs(r)
	twoR.Lsh(twoR, 1)
	cmp := twoR.Cmp(new(big.Int).Abs(b))
	if cmp > 0 || (cmp == 0 && q.Bit(0) == 1) {
		// Away from zero: the exact quotient's sign is sign(a)*sign(b).
		if (a.Sign() < 0) != (b.Sign() < 0) {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q
}

func pow10(n int64) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(n), nil)
}
