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

package storetest

import (
	"math/big"
	"sort"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// Key is a position key.
type Key struct{ Account, Instrument string }

// Pos is a replayed position as exact rationals.
type Pos struct{ Qty, Avg *big.Rat }

// Replay computes every key's position from the source in authoritative order
// ((seq, tradeSeq), buy leg before sell leg) with big.Rat arithmetic and its
// own half-even rounding: an independent implementation of FR-APR06 R1's
// rule (docs/requirements.md) that shares no code with internal/position,
// so a bug there cannot hide.
func Replay(evs []wire.Event) map[Key]Pos {
	type leg struct {
		seq, tseq int64
		side      int
		k         Key
		q, px     *big.Rat
	}
	out := map[Key]Pos{}
	var legs []leg
	for _, e := range evs {
		switch {
		case e.Opening != nil:
			out[Key{e.Opening.Account, e.Opening.Instrument}] = Pos{e.Opening.Quantity.Rat(), e.Opening.AvgCost.Rat()}
		case e.Trade != nil:
			t := e.Trade
			q := t.Quantity.Rat()
			legs = append(legs, leg{t.Seq, t.TradeSeq, 0, Key{t.BuyAccount, t.Instrument}, q, t.Price.Rat()},
				leg{t.Seq, t.TradeSeq, 1, Key{t.SellAccount, t.Instrument}, new(big.Rat).Neg(q), t.Price.Rat()})
		}
	}
	sort.SliceStable(legs, func(i, j int) bool {
		a, b := legs[i], legs[j]
		if a.seq != b.seq {
			return a.seq < b.seq
		}
		if a.tseq != b.tseq {
			return a.tseq < b.tseq
		}
		return a.side < b.side
	})
	zero := new(big.Rat)
	for _, l := range legs {
		p, ok := out[l.k]
		if !ok {
			p = Pos{new(big.Rat), new(big.Rat)}
		}
		nq := new(big.Rat).Add(p.Qty, l.q)
		var avg *big.Rat
		switch {
		case p.Qty.Sign() == 0 || p.Qty.Sign() == l.q.Sign():
			absQ, absT := new(big.Rat).Abs(p.Qty), new(big.Rat).Abs(l.q)
			num := new(big.Rat).Add(new(big.Rat).Mul(absQ, p.Avg), new(big.Rat).Mul(absT, l.px))
			avg = new(big.Rat).Quo(num, new(big.Rat).Add(absQ, absT))
		case nq.Sign() == 0:
			avg = zero
		case nq.Sign() == p.Qty.Sign():
			avg = p.Avg
		default:
			avg = l.px
		}
		out[l.k] = Pos{nq, round12(avg)}
	}
	return out
}

// round12 rounds half-even to 12 places: scale by 10^12, split the integer
// part, compare the fraction with 1/2.
func round12(r *big.Rat) *big.Rat {
	scale := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(12), nil))
	x := new(big.Rat).Mul(r, scale)
	neg := x.Sign() < 0
	x.Abs(x)
	n := new(big.Int).Quo(x.Num(), x.Denom()) // floor of |x|
	frac := new(big.Rat).Sub(x, new(big.Rat).SetInt(n))
	switch frac.Cmp(big.NewRat(1, 2)) {
	case 1:
		n.Add(n, big.NewInt(1))
	case 0:
		if n.Bit(0) == 1 {
			n.Add(n, big.NewInt(1))
		}
	}
	if neg {
		n.Neg(n)
	}
	return new(big.Rat).Quo(new(big.Rat).SetInt(n), scale)
}
