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
	"sort"

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/position"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// positions is the position check's state: per key, what the source says
// the key must be derived from, folded as the inputs stream by in
// (seq, tradeSeq, leg) order. Nothing per trade is kept: a key folds its
// inputs from each start it may turn out to have (flat, the row's own
// opening past B, the source opening) and keeps each fold's state at the
// basis seq, so the key is checked at the end without its history.
type positions struct {
	d     *detector
	keys  map[posKey]*keyState
	rows  map[posKey]*PositionRow
	basis map[posKey]*BasisRow
	first map[posKey]tradeAt // each key's first source trade (at seq <= B)
	page  []keyedFill        // the page's inputs, folded in order by flush
}

type tradeAt struct {
	id  string
	seq int64
}

// keyState is one key's folds. A fold starts where the key may start; only
// one is used at the end (desired), the others cost a few decimals.
type keyState struct {
	opening     *wire.Opening // the key's first source opening at seq <= B
	lastOpening int64         // the last one's seq (two: a conflict)
	openings    int
	fills       int64
	flat, row   fold
	src         fold // from the source opening, once it came
	hasRow      bool // the row carries its own opening (row fold)
	hasSrc      bool
	hasBasis    bool
	basisSeq    int64
}

// fold is a position folded from a start, and its state just before the
// first input past the basis seq (the fold at the basis).
type fold struct {
	st, atBasis position.State
	captured    bool
}

func (f *fold) add(in fill, ks *keyState) {
	if ks.hasBasis && !f.captured && in.seq > ks.basisSeq {
		f.atBasis, f.captured = f.st, true
	}
	f.st = in.apply(f.st)
}

func (f *fold) basis() position.State {
	if f.captured {
		return f.atBasis
	}
	return f.st
}

// fill is one trade leg of a key: position.Fill's fields.
type fill struct {
	seq, tradeSeq int64
	leg           uint8
	qty, price    decimal.Decimal
}

// apply folds the leg onto s (the sell leg's quantity negated).
func (f fill) apply(s position.State) position.State {
	qty := f.qty
	if f.leg == 1 {
		qty = qty.Neg()
	}
	return position.Apply(s, qty, f.price)
}

// keyedFill is an input of a key (open: a source opening, which starts the
// key's source fold, before any leg of its seq).
type keyedFill struct {
	k    posKey
	f    fill
	open *wire.Opening
}

var flat = position.State{Quantity: decimal.Zero, AvgCost: decimal.Zero}

func newPositions(d *detector, s *Snapshot) *positions {
	p := &positions{d: d, keys: map[posKey]*keyState{}, rows: map[posKey]*PositionRow{}, basis: map[posKey]*BasisRow{},
		first: map[posKey]tradeAt{}}
	// The first row of a key stands for it (the primary key forbids a second).
	for i := range s.SQL.Positions {
		r := &s.SQL.Positions[i]
		if k := (posKey{r.Account, r.Instrument}); p.rows[k] == nil {
			p.rows[k] = r
		}
	}
	for i := range s.SQL.Basis {
		b := &s.SQL.Basis[i]
		if k := (posKey{b.Account, b.Instrument}); p.basis[k] == nil {
			p.basis[k] = b
		}
	}
	for k := range p.rows {
		p.get(k)
	}
	for k := range p.basis {
		p.get(k)
	}
	return p
}

func (p *positions) get(k posKey) *keyState {
	ks := p.keys[k]
	if ks != nil {
		return ks
	}
	ks = &keyState{flat: fold{st: flat}}
	if r := p.rows[k]; r != nil && r.OpeningSeq != nil {
		ks.hasRow, ks.row = true, fold{st: position.State{Quantity: r.OpeningQuantity, AvgCost: r.OpeningAvgCost}}
	}
	if b := p.basis[k]; b != nil {
		ks.hasBasis, ks.basisSeq = true, b.BasisSeq
	}
	p.keys[k] = ks
	return ks
}

// opening is a source opening event.
func (p *positions) opening(o *wire.Opening) {
	p.d.accounts[o.Account] = true
	if o.Seq > p.d.b {
		return
	}
	p.page = append(p.page, keyedFill{k: posKey{o.Account, o.Instrument}, f: fill{seq: o.Seq}, open: o})
}

// sourceTrade notes a source trade at seq <= B on its keys: the first one
// of a key decides whether it precedes the key's opening.
func (p *positions) sourceTrade(t *wire.Trade) {
	for _, k := range [2]posKey{{t.BuyAccount, t.Instrument}, {t.SellAccount, t.Instrument}} {
		if _, ok := p.first[k]; !ok {
			p.first[k] = tradeAt{t.TradeID, t.Seq}
		}
	}
}

// tradeFills adds a trade's two legs as inputs of its keys.
func (p *positions) tradeFills(seq, tradeSeq int64, buy, sell, instrument string, qty, price decimal.Decimal) {
	p.page = append(p.page,
		keyedFill{k: posKey{buy, instrument}, f: fill{seq: seq, tradeSeq: tradeSeq, leg: 0, qty: qty, price: price}},
		keyedFill{k: posKey{sell, instrument}, f: fill{seq: seq, tradeSeq: tradeSeq, leg: 1, qty: qty, price: price}})
}

// flush folds the page's inputs in (seq, opening first, tradeSeq, leg)
// order: position.Sort's order, stable.
func (p *positions) flush() {
	less := func(i, j int) bool {
		a, b := &p.page[i], &p.page[j]
		switch {
		case a.f.seq != b.f.seq:
			return a.f.seq < b.f.seq
		case (a.open != nil) != (b.open != nil):
			return a.open != nil
		case a.f.tradeSeq != b.f.tradeSeq:
			return a.f.tradeSeq < b.f.tradeSeq
		}
		return a.f.leg < b.f.leg
	}
	// A page's legs come in that order but for its openings: sort only
	// when they do not.
	if !sort.SliceIsSorted(p.page, less) {
		sort.SliceStable(p.page, less)
	}
	for i := range p.page {
		in := &p.page[i]
		ks := p.get(in.k)
		if o := in.open; o != nil {
			ks.openings++
			ks.lastOpening = o.Seq
			if ks.opening == nil {
				cp := *o
				ks.opening, ks.hasSrc = &cp, true
				ks.src = fold{st: position.State{Quantity: o.Quantity, AvgCost: o.AvgCost}}
			}
			continue
		}
		ks.fills++
		ks.flat.add(in.f, ks)
		if ks.hasRow {
			ks.row.add(in.f, ks)
		}
		if ks.hasSrc {
			ks.src.add(in.f, ks)
		}
	}
	clear(p.page)
	p.page = p.page[:0]
}

// check checks every key once the history has streamed by.
func (p *positions) check() {
	d := p.d
	d.cur = checkPositionsDecl
	keys := make([]posKey, 0, len(p.keys))
	for k := range p.keys {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].account != keys[j].account {
			return keys[i].account < keys[j].account
		}
		return keys[i].instrument < keys[j].instrument
	})
	for _, k := range keys {
		ks := p.keys[k]
		ki := &keyInputs{opening: ks.opening}
		switch {
		case ks.openings > 1:
			ki.conflict = "two source openings at seq " + itoa(ks.opening.Seq) + " and " + itoa(ks.lastOpening)
		case ks.opening != nil:
			if t, ok := p.first[k]; ok && t.seq <= ks.opening.Seq {
				ki.conflict = "source trade " + t.id + " at seq " + itoa(t.seq) + " precedes the opening at seq " + itoa(ks.opening.Seq)
			}
		}
		row, b := p.rows[k], p.basis[k]
		open := d.desired(ki, row)
		// The fold that starts where desired says the key starts.
		var from *fold
		switch valid := ki.opening != nil && ki.conflict == ""; {
		case valid && (ki.opening.Seq <= d.v || (row != nil && rowClaimsOpening(row))):
			from = &ks.src
		case open.present:
			from = &ks.row
		default:
			from = &ks.flat
		}
		var atBasis position.State
		if b != nil {
			if !open.present || *open.seq <= b.BasisSeq {
				atBasis = from.basis()
			} else {
				atBasis = ks.flat.basis() // the opening follows the basis: the fold from zero through it
			}
		}
		d.checkKey(k, ki, row, b, from.st, atBasis, ks.fills)
	}
}
