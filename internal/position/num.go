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
	"cmp"
	"math"
	"math/big"
	"math/bits"
	"slices"

	"github.com/shopspring/decimal"
)

// Num is an exact decimal, coefficient × 10^exponent, held in an int64 when
// the coefficient fits and as a decimal.Decimal when it does not.
//
// It exists for one reason: folding a key's retained trades (R1) is the hot
// loop of a re-verification, which folds every retained trade newer than
// each page for every key the page touches, and decimal.Decimal allocates a
// big.Int for every intermediate value. ApplyNum computes exactly what Apply
// computes, coefficient AND exponent (numeric keeps the scale it is given,
// so a different exponent would be stored as different text), in integer
// arithmetic when every operand and intermediate fits, and through Apply
// itself when one does not. Without the exponent equality, the same
// projection could be written with two spellings depending on which path a
// value took. TestApplyNum_SameAsApply and FuzzApplyNum hold it.
type Num struct {
	c   int64
	e   int32
	big *decimal.Decimal // non-nil: the value, whose coefficient overflows c
}

// NumOf returns d as a Num with d's coefficient and exponent. A coefficient
// of up to 18 digits is read without copying it (Coefficient copies the
// big.Int, a measurable share of a catch-up's derivation).
func NumOf(d decimal.Decimal) Num {
	if d.NumDigits() <= 18 {
		return Num{c: d.CoefficientInt64(), e: d.Exponent()}
	}
	if c := d.Coefficient(); c.IsInt64() {
		return Num{c: c.Int64(), e: d.Exponent()}
	}
	return Num{big: &d}
}

// NumFromParts returns c × 10^e with that coefficient and exponent.
func NumFromParts(c int64, e int32) Num { return Num{c: c, e: e} }

// NumFromBig returns c × 10^e, small when c fits an int64.
func NumFromBig(c *big.Int, e int32) Num {
	if c.IsInt64() {
		return Num{c: c.Int64(), e: e}
	}
	d := decimal.NewFromBigInt(c, e)
	return Num{big: &d}
}

// Neg returns -n, with the same exponent (what decimal's Neg gives).
func (n Num) Neg() Num {
	if n.big == nil && n.c != math.MinInt64 {
		return Num{c: -n.c, e: n.e}
	}
	d := n.Decimal().Neg()
	return Num{big: &d}
}

// Decimal returns n as a decimal with the same coefficient and exponent.
func (n Num) Decimal() decimal.Decimal {
	if n.big != nil {
		return *n.big
	}
	return decimal.New(n.c, n.e)
}

// Sign is -1, 0 or 1.
func (n Num) Sign() int {
	if n.big != nil {
		return n.big.Sign()
	}
	switch {
	case n.c < 0:
		return -1
	case n.c > 0:
		return 1
	}
	return 0
}

// NumState is State in Nums.
type NumState struct{ Quantity, AvgCost Num }

// NumStateOf converts s exactly.
func NumStateOf(s State) NumState {
	return NumState{Quantity: NumOf(s.Quantity), AvgCost: NumOf(s.AvgCost)}
}

// State converts s exactly.
func (s NumState) State() State {
	return State{Quantity: s.Quantity.Decimal(), AvgCost: s.AvgCost.Decimal()}
}

// ApplyNum is Apply over Nums: the same coefficient and exponent.
func ApplyNum(s NumState, qty, price Num) NumState {
	if s.Quantity.big == nil && s.AvgCost.big == nil && qty.big == nil && price.big == nil {
		if r, ok := applySmall(s, qty, price); ok {
			return r
		}
	}
	return NumStateOf(Apply(s.State(), qty.Decimal(), price.Decimal()))
}

// applySmall is Apply on int64 coefficients; ok is false when an operand or
// an intermediate does not fit the integer arithmetic used here, and the
// caller then takes Apply's own route.
func applySmall(s NumState, qty, price Num) (NumState, bool) {
	newQty, ok := addSmall(s.Quantity, qty)
	if !ok {
		return NumState{}, false
	}
	qs, xs := s.Quantity.Sign(), qty.Sign()
	var avg Num
	switch {
	case xs == 0:
		avg = s.AvgCost
	case qs == 0 || qs == xs:
		if avg, ok = weightedSmall(s.Quantity, s.AvgCost, qty, price); !ok {
			return NumState{}, false
		}
		return NumState{Quantity: newQty, AvgCost: avg}, true // already at Places
	case newQty.Sign() == 0:
		avg = Num{} // decimal.Zero: coefficient 0, exponent 0
	case newQty.Sign() == qs:
		avg = s.AvgCost
	default:
		avg = price
	}
	if avg, ok = roundSmall(avg, Places); !ok {
		return NumState{}, false
	}
	return NumState{Quantity: newQty, AvgCost: avg}, true
}

// pow10u[i] = 10^i for the exponents an int64 holds.
var pow10u = func() (p [20]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// scaleSmall returns c × 10^k (k ≥ 0) if it fits an int64.
func scaleSmall(c int64, k int64) (int64, bool) {
	if c == 0 {
		return 0, true
	}
	if k >= 19 || c == math.MinInt64 {
		return 0, false
	}
	neg := c < 0
	u := uint64(c)
	if neg {
		u = uint64(-c)
	}
	hi, lo := bits.Mul64(u, pow10u[k])
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	if neg {
		return -int64(lo), true
	}
	return int64(lo), true
}

// addSmall is decimal.Add: both rescaled to the smaller exponent.
func addSmall(a, b Num) (Num, bool) {
	e := min(a.e, b.e)
	ac, ok1 := scaleSmall(a.c, int64(a.e)-int64(e))
	bc, ok2 := scaleSmall(b.c, int64(b.e)-int64(e))
	if !ok1 || !ok2 {
		return Num{}, false
	}
	sum := ac + bc
	if (ac > 0 && bc > 0 && sum < 0) || (ac < 0 && bc < 0 && sum >= 0) {
		return Num{}, false
	}
	return Num{c: sum, e: e}, true
}

// abs is decimal.Abs.
func (n Num) abs() (Num, bool) {
	if n.c == math.MinInt64 {
		return Num{}, false
	}
	if n.c < 0 {
		return Num{c: -n.c, e: n.e}, true
	}
	return n, true
}

// u128 is an unsigned 128-bit integer.
type u128 struct{ hi, lo uint64 }

func (x u128) mul(m uint64) (u128, bool) {
	h1, l1 := bits.Mul64(x.lo, m)
	h2, l2 := bits.Mul64(x.hi, m)
	if h2 != 0 {
		return u128{}, false
	}
	hi, carry := bits.Add64(h1, l2, 0)
	return u128{hi, l1}, carry == 0
}

// scale returns x × 10^k.
func (x u128) scale(k int64) (u128, bool) {
	if x == (u128{}) {
		return x, true // 0 × 10^k, whatever k: no loop over a huge exponent
	}
	ok := true
	for k > 0 && ok {
		step := min(k, 19)
		x, ok = x.mul(pow10u[step])
		k -= step
	}
	return x, ok
}

func (x u128) add(y u128) (u128, bool) {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	hi, c2 := bits.Add64(x.hi, y.hi, c)
	return u128{hi, lo}, c2 == 0
}

// weightedSmall is DivHalfEven(|q|·avg + |x|·price, |q| + |x|, Places) for a
// non-negative avg and price (Apply's exponents: the products' exponents are
// the sums of their factors', each sum decimal.Add's).
func weightedSmall(q, avg, x, price Num) (Num, bool) {
	if avg.c < 0 || price.c < 0 {
		return Num{}, false
	}
	qa, ok1 := q.abs()
	xa, ok2 := x.abs()
	if !ok1 || !ok2 {
		return Num{}, false
	}
	// Numerator: two 64×64 products, aligned to the smaller exponent.
	p1e, p2e := int64(qa.e)+int64(avg.e), int64(xa.e)+int64(price.e)
	h1, l1 := bits.Mul64(uint64(qa.c), uint64(avg.c))
	h2, l2 := bits.Mul64(uint64(xa.c), uint64(price.c))
	ne := min(p1e, p2e)
	n1, ok1 := u128{h1, l1}.scale(p1e - ne)
	n2, ok2 := u128{h2, l2}.scale(p2e - ne)
	if !ok1 || !ok2 {
		return Num{}, false
	}
	num, ok := n1.add(n2)
	if !ok {
		return Num{}, false
	}
	den, ok := addSmall(qa, xa)
	if !ok || den.c <= 0 {
		return Num{}, false
	}
	// DivHalfEven: k = num.exp − den.exp + places scales one side.
	k := ne - int64(den.e) + int64(Places)
	b := uint64(den.c)
	if k >= 0 {
		if num, ok = num.scale(k); !ok {
			return Num{}, false
		}
	} else {
		bb, ok := scaleSmall(den.c, -k)
		if !ok {
			return Num{}, false
		}
		b = uint64(bb)
	}
	if num.hi >= b {
		return Num{}, false // the quotient needs more than 64 bits
	}
	qt, r := bits.Div64(num.hi, num.lo, b)
	// Half to even: r < b < 2^63, so 2r does not overflow.
	if r != 0 && (2*r > b || (2*r == b && qt&1 == 1)) {
		qt++
	}
	if qt > math.MaxInt64 {
		return Num{}, false
	}
	return Num{c: int64(qt), e: -Places}, true
}

// roundSmall is RoundHalfEven(n, places).
func roundSmall(n Num, places int32) (Num, bool) {
	if n.e >= -places {
		return n, true
	}
	k := int64(-places) - int64(n.e)
	if k >= 19 {
		return Num{}, false
	}
	b := int64(pow10u[k])
	qt, r := n.c/b, n.c%b // truncated toward zero, as big.Int.QuoRem
	if r != 0 {
		ar := r
		if ar < 0 {
			ar = -ar
		}
		if 2*uint64(ar) > uint64(b) || (2*uint64(ar) == uint64(b) && qt&1 != 0) {
			if n.c < 0 {
				qt--
			} else {
				qt++
			}
		}
	}
	return Num{c: qt, e: -places}, true
}

// AddNum is decimal.Add over Nums: the same coefficient and exponent.
func AddNum(a, b Num) Num {
	if a.big == nil && b.big == nil {
		if r, ok := addSmall(a, b); ok {
			return r
		}
	}
	return NumOf(a.Decimal().Add(b.Decimal()))
}

// NumFill is Fill in Nums.
type NumFill struct {
	Seq      int64
	TradeSeq int64
	Leg      int
	Quantity Num
	Price    Num
}

// Num converts f exactly.
func (f Fill) Num() NumFill {
	return NumFill{Seq: f.Seq, TradeSeq: f.TradeSeq, Leg: f.Leg, Quantity: NumOf(f.Quantity), Price: NumOf(f.Price)}
}

// SortNum sorts fills in authoritative order (Less), stably.
func SortNum(fills []NumFill) {
	slices.SortStableFunc(fills, func(a, b NumFill) int {
		if c := cmp.Compare(a.Seq, b.Seq); c != 0 {
			return c
		}
		if c := cmp.Compare(a.TradeSeq, b.TradeSeq); c != 0 {
			return c
		}
		return cmp.Compare(a.Leg, b.Leg)
	})
}
