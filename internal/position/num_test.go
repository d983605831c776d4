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
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/shopspring/decimal"
)

// same is true when a and b have the same coefficient and exponent: the same
// value spelled the same way (what numeric stores).
func same(a, b decimal.Decimal) bool {
	return a.Exponent() == b.Exponent() && a.Coefficient().Cmp(b.Coefficient()) == 0
}

func sameState(a, b State) bool { return same(a.Quantity, b.Quantity) && same(a.AvgCost, b.AvgCost) }

// randNum draws coefficients from every size class the integer route must
// handle or hand over: zero, small, around the int64 limits, and past them.
func randNum(r *rand.Rand, signed bool) decimal.Decimal {
	var c *big.Int
	switch r.IntN(8) {
	case 0:
		c = big.NewInt(0)
	case 1, 2, 3:
		c = big.NewInt(r.Int64N(100_000))
	case 4:
		c = big.NewInt(r.Int64N(1_000_000_000_000))
	case 5:
		c = big.NewInt(math.MaxInt64 - r.Int64N(1000))
	case 6:
		c = new(big.Int).Mul(big.NewInt(r.Int64N(math.MaxInt64)), big.NewInt(r.Int64N(1000)+2))
	default:
		c = big.NewInt(r.Int64N(math.MaxInt64 / 1000))
	}
	if signed && r.IntN(2) == 0 {
		c.Neg(c)
	}
	return decimal.NewFromBigInt(c, int32(r.IntN(26)-20))
}

// TestApplyNum_SameAsApply: ApplyNum returns Apply's coefficient and
// exponent for single steps over every size class, and for folds of
// workload-like trades (prices at 2 places, half-unit quantities, both
// signs) chained over thousands of steps.
func TestApplyNum_SameAsApply(t *testing.T) {
	t.Run("single steps", func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 200_000; i++ {
			s := State{Quantity: randNum(r, true), AvgCost: randNum(r, r.IntN(10) == 0)}
			qty, price := randNum(r, true), randNum(r, r.IntN(10) == 0)
			want := Apply(s, qty, price)
			got := ApplyNum(NumStateOf(s), NumOf(qty), NumOf(price)).State()
			if !sameState(got, want) {
				t.Fatalf("Apply(%v, %v, %v): got %v/%v (exp %d/%d), want %v/%v (exp %d/%d)", s, qty, price,
					got.Quantity, got.AvgCost, got.Quantity.Exponent(), got.AvgCost.Exponent(),
					want.Quantity, want.AvgCost, want.Quantity.Exponent(), want.AvgCost.Exponent())
			}
		}
	})
	t.Run("workload folds", func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		for k := 0; k < 50; k++ {
			s := State{Quantity: decimal.New(int64(r.IntN(41)-20), 0), AvgCost: decimal.New(int64(9000+r.IntN(2000)), -2)}
			ns := NumStateOf(s)
			for i := 0; i < 5_000; i++ {
				qty := decimal.New(int64(2+r.IntN(19)), 0).Div(decimal.New(2, 0))
				if r.IntN(2) == 0 {
					qty = qty.Neg()
				}
				price := decimal.New(int64(9800+r.IntN(401)), -2)
				s = Apply(s, qty, price)
				ns = ApplyNum(ns, NumOf(qty), NumOf(price))
				if !sameState(ns.State(), s) {
					t.Fatalf("fold %d step %d: got %v, want %v", k, i, ns.State(), s)
				}
			}
		}
	})
	t.Run("edges", func(t *testing.T) {
		big19 := decimal.RequireFromString("9223372036854775807")
		cases := []struct {
			name       string
			s          State
			qty, price decimal.Decimal
		}{
			{"zero quantity keeps the average", State{d("3"), d("1.1234567890123456")}, d("0"), d("5")},
			{"opening from flat", State{decimal.Zero, decimal.Zero}, d("2.5"), d("100.25")},
			{"closing to flat", State{d("2.5"), d("100.25")}, d("-2.5"), d("90")},
			{"crossing takes the price", State{d("2"), d("100")}, d("-3"), d("99.1234567890123456789")},
			{"reducing keeps the average", State{d("-5"), d("101.5")}, d("2"), d("1")},
			{"half to even, down", State{d("1"), d("0.0000000000005")}, d("1"), d("0")},
			{"coefficient at the int64 limit", State{big19, d("1")}, d("1"), d("1")},
			{"product past 128 bits", State{big19, big19}, big19, big19},
			{"negative price", State{d("1"), d("10")}, d("1"), d("-4")},
			{"huge exponent gap", State{decimal.New(0, -2000), d("1")}, decimal.New(1, 2000), d("1")},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var want State
				wantPanic := func() (p any) {
					defer func() { p = recover() }()
					want = Apply(c.s, c.qty, c.price)
					return nil
				}()
				if wantPanic != nil {
					t.Skipf("Apply itself panics: %v", wantPanic)
				}
				got := ApplyNum(NumStateOf(c.s), NumOf(c.qty), NumOf(c.price)).State()
				if !sameState(got, want) {
					t.Fatalf("got %v/%v (exp %d/%d), want %v/%v (exp %d/%d)", got.Quantity, got.AvgCost,
						got.Quantity.Exponent(), got.AvgCost.Exponent(), want.Quantity, want.AvgCost,
						want.Quantity.Exponent(), want.AvgCost.Exponent())
				}
			})
		}
	})
}

// TestApplyNum_NoAllocations: the integer route allocates nothing (what it
// is for).
func TestApplyNum_NoAllocations(t *testing.T) {
	s := NumStateOf(State{Quantity: d("3.5"), AvgCost: d("100.123456789012")})
	qty, price := NumOf(d("1.5")), NumOf(d("99.75"))
	if n := testing.AllocsPerRun(1000, func() { s = ApplyNum(s, qty, price) }); n != 0 {
		t.Fatalf("ApplyNum allocates %v times per step", n)
	}
}

func FuzzApplyNum(f *testing.F) {
	f.Add(int64(3), int32(0), int64(100), int32(-2), int64(-5), int32(-1), int64(9925), int32(-2))
	f.Add(int64(math.MaxInt64), int32(-3), int64(1), int32(-12), int64(1), int32(0), int64(math.MaxInt64), int32(-20))
	f.Fuzz(func(t *testing.T, qc int64, qe int32, ac int64, ae int32, xc int64, xe int32, pc int64, pe int32) {
		clamp := func(e int32) int32 { return e%40 - 20 }
		s := State{Quantity: decimal.New(qc, clamp(qe)), AvgCost: decimal.New(ac, clamp(ae))}
		qty, price := decimal.New(xc, clamp(xe)), decimal.New(pc, clamp(pe))
		want := Apply(s, qty, price)
		got := ApplyNum(NumStateOf(s), NumOf(qty), NumOf(price)).State()
		if !sameState(got, want) {
			t.Fatalf("Apply(%v, %v, %v): got %v/%v, want %v/%v", s, qty, price, got.Quantity, got.AvgCost, want.Quantity, want.AvgCost)
		}
	})
}

// TestNumOf_AndNeg: NumOf keeps every decimal's coefficient and exponent
// exactly (18 digits and fewer without copying the coefficient, more through
// big.Int, beyond an int64 as a decimal), and Neg is decimal's Neg.
func TestNumOf_AndNeg(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    decimal.Decimal
	}{
		{"zero", decimal.Zero},
		{"zero with exponent", decimal.New(0, -4)},
		{"small", d("1.5")},
		{"negative", d("-99.75")},
		{"18 digits", d("123456789012345678")},
		{"19 digits in an int64", decimal.New(math.MaxInt64, -3)},
		{"min int64", decimal.New(math.MinInt64, 0)},
		{"beyond an int64", d("123456789012345678901234567890.5")},
		{"negative beyond an int64", d("-123456789012345678901234567890.5")},
		{"positive exponent", decimal.New(25, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := NumOf(tc.v)
			if got := n.Decimal(); got.Exponent() != tc.v.Exponent() || got.Coefficient().Cmp(tc.v.Coefficient()) != 0 {
				t.Fatalf("NumOf(%s).Decimal() = %s (exponent %d), want exponent %d", tc.v, got, got.Exponent(), tc.v.Exponent())
			}
			want := tc.v.Neg()
			if got := n.Neg().Decimal(); got.Exponent() != want.Exponent() || got.Coefficient().Cmp(want.Coefficient()) != 0 {
				t.Fatalf("NumOf(%s).Neg() = %s (exponent %d), want %s (exponent %d)", tc.v, got, got.Exponent(), want, want.Exponent())
			}
		})
	}
}
