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
	"fmt"
	"slices"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/position"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// keyInputs is what the source (and the unverifiable retained tail past B)
// says one position key must be derived from.
type keyInputs struct {
	fills    []fillRef
	unsorted bool
	opening  *wire.Opening // the key's source opening at seq <= B (the first)
	conflict string        // why that opening cannot be proven ("" = it can)
}

// fillRef is one trade leg of a key by its position in the snapshot: the
// index of its trade in Source.Trades, or in SQL.Trades when row is set (a
// retained row past B, no source event), and the leg (0 buy, 1 sell). Every
// leg of every trade of the scope has one, all alive until the keys are
// checked, which is where the detection's heap peaks: 8 bytes instead of the
// 40 of two pointers plus a copied sort key (~15 MB less live heap at 1M
// events; position.Fill copies were 56 bytes plus a negated quantity per
// sell leg). Order and fold are position.Less and position.Apply's, reading
// the trade through the index (fillRef.of).
type fillRef struct {
	i   uint32
	leg uint8
	row bool
}

// maxFillIndex bounds the trade slices a fillRef can index; a snapshot past
// it (hundreds of GB of trades) fails detection instead of aliasing legs.
const maxFillIndex = 1<<32 - 1

// fill is a fillRef resolved against the snapshot: position.Fill's fields.
type fill struct {
	seq, tradeSeq int64
	leg           uint8
	qty, price    decimal.Decimal
}

// of resolves f. A row fill's Seq is set: only rows with a consensus seq
// become fills.
func (f fillRef) of(s *Snapshot) fill {
	if f.row {
		r := &s.SQL.Trades[f.i]
		return fill{seq: int64(r.Seq), tradeSeq: r.TradeSeq, leg: f.leg, qty: r.Quantity, price: r.Price}
	}
	t := &s.Source.Trades[f.i]
	return fill{seq: t.Seq, tradeSeq: t.TradeSeq, leg: f.leg, qty: t.Quantity, price: t.Price}
}

// less is position.Less: (seq, tradeSeq, leg).
func (f fill) less(g fill) bool {
	if f.seq != g.seq {
		return f.seq < g.seq
	}
	if f.tradeSeq != g.tradeSeq {
		return f.tradeSeq < g.tradeSeq
	}
	return f.leg < g.leg
}

// apply folds the leg onto s (the sell leg's quantity negated).
func (f fill) apply(s position.State) position.State {
	qty := f.qty
	if f.leg == 1 {
		qty = qty.Neg()
	}
	return position.Apply(s, qty, f.price)
}

// sortFills is position.Sort over references (stable, in place).
func sortFills(s *Snapshot, fs []fillRef) {
	slices.SortStableFunc(fs, func(a, b fillRef) int {
		fa, fb := a.of(s), b.of(s)
		switch {
		case fa.less(fb):
			return -1
		case fb.less(fa):
			return 1
		}
		return 0
	})
}

// desiredOpening is the opening the key's row must carry.
type desiredOpening struct {
	state   position.State
	seq     *int64
	present bool // false: the key starts flat (zero, proven)
}

// rowClaimsOpening: the row says anything about an opening (a seq, values,
// or the unproven flag). A stored flag or seq without a source event proves
// nothing.
// firstByKey indexes the rows of one SQL table by position key; the first
// row of a key stands for it (the primary key forbids a second), and every
// key is registered with get, in snapshot order.
func firstByKey[T any](xs []T, key func(*T) posKey, get func(posKey) *keyInputs) map[posKey]*T {
	m := make(map[posKey]*T, len(xs))
	for i := range xs {
		if k := key(&xs[i]); m[k] == nil {
			m[k] = &xs[i]
			get(k)
		}
	}
	return m
}

func rowClaimsOpening(r *PositionRow) bool {
	return r.OpeningSeq != nil || !r.OpeningQuantity.IsZero() || !r.OpeningAvgCost.IsZero() || !r.OpeningProven
}

// checkPositions re-derives every key from its proven opening and its inputs
// in (seq, tradeSeq, leg) order, and compares rows, openings and bases.
//
// The inputs of a key are what the SQL side must hold now, given it verified
// through the cursor V and keeps what the live feed wrote after it:
//   - source trades with seq <= V (authoritative, whether retained or not);
//   - retained trades with seq > V: their source event when the source has
//     it (seq <= B), else the retained row itself if BOOKED (past B: newer
//     than the read, kept as R1 keeps newer live trades);
//   - never orphans (seq <= B, absent from the source) nor legacy rows.
//
// Source events in (V, B] that SQL lacks are catch-up's backlog: excluded,
// so a scope that is merely catching up does not drift.
func checkPositions(d *detector) {
	s := d.s
	keys := make(map[posKey]*keyInputs, len(s.SQL.Positions))
	var order []posKey
	get := func(k posKey) *keyInputs {
		ki := keys[k]
		if ki == nil {
			ki = &keyInputs{}
			keys[k] = ki
			order = append(order, k)
		}
		return ki
	}
	if len(s.Source.Trades) > maxFillIndex || len(s.SQL.Trades) > maxFillIndex {
		d.err = fmt.Errorf("recon: detect: %d source and %d SQL trades exceed the %d a position fill can index",
			len(s.Source.Trades), len(s.SQL.Trades), maxFillIndex)
		return
	}
	add := func(k posKey, f fillRef) {
		ki := get(k)
		if n := len(ki.fills); n > 0 && f.of(s).less(ki.fills[n-1].of(s)) {
			ki.unsorted = true
		}
		ki.fills = append(ki.fills, f)
	}
	addSource := func(i int) {
		t := &s.Source.Trades[i]
		add(posKey{t.BuyAccount, t.Instrument}, fillRef{i: uint32(i), leg: 0})
		add(posKey{t.SellAccount, t.Instrument}, fillRef{i: uint32(i), leg: 1})
	}
	addRow := func(i int) {
		r := &s.SQL.Trades[i]
		add(posKey{r.BuyAccount, r.Instrument}, fillRef{i: uint32(i), leg: 0, row: true})
		add(posKey{r.SellAccount, r.Instrument}, fillRef{i: uint32(i), leg: 1, row: true})
	}

	rows := firstByKey(s.SQL.Positions, func(p *PositionRow) posKey { return posKey{p.Account, p.Instrument} }, get)
	basis := firstByKey(s.SQL.Basis, func(b *BasisRow) posKey { return posKey{b.Account, b.Instrument} }, get)
	for i := range s.Source.Openings {
		o := &s.Source.Openings[i]
		if o.Seq > d.b {
			continue
		}
		ki := get(posKey{o.Account, o.Instrument})
		if ki.opening != nil {
			ki.conflict = "two source openings at seq " + itoa(ki.opening.Seq) + " and " + itoa(o.Seq)
			continue
		}
		ki.opening = o
	}
	for i := range s.Source.Trades {
		t := &s.Source.Trades[i]
		if t.Seq > d.b {
			continue
		}
		for _, k := range [2]posKey{{t.BuyAccount, t.Instrument}, {t.SellAccount, t.Instrument}} {
			if ki := keys[k]; ki != nil && ki.opening != nil && ki.conflict == "" && t.Seq <= ki.opening.Seq {
				ki.conflict = "source trade " + t.TradeID + " at seq " + itoa(t.Seq) + " precedes the opening at seq " + itoa(ki.opening.Seq)
			}
		}
		if t.Seq <= d.v {
			addSource(i)
		}
	}
	for i := range s.SQL.Trades {
		r := &s.SQL.Trades[i]
		if d.sqlTrades[r.TradeID] != r || !r.Seq.Valid() || d.orphan[r.TradeID] {
			continue // a duplicate primary key, legacy history, or an orphan
		}
		if src, j := d.srcTrade(r.TradeID); src != nil {
			if src.Seq > d.v {
				addSource(j)
			}
			continue
		}
		if seq, _ := r.Seq.Get(); seq > d.b && r.BookingStatus == BookingBooked {
			addRow(i)
		}
	}

	for _, k := range order {
		d.checkKey(k, keys[k], rows[k], basis[k])
	}
}

// desired computes the key's opening: the source opening when it is proven
// and either verified (seq <= V) or claimed by the row; a retained opening
// past B (unverifiable, kept); otherwise flat.
func (d *detector) desired(ki *keyInputs, row *PositionRow) desiredOpening {
	valid := ki.opening != nil && ki.conflict == ""
	switch {
	case valid && (ki.opening.Seq <= d.v || (row != nil && rowClaimsOpening(row))):
		o := ki.opening
		seq := o.Seq
		return desiredOpening{state: position.State{Quantity: o.Quantity, AvgCost: o.AvgCost}, seq: &seq, present: true}
	case row != nil && row.OpeningSeq != nil && *row.OpeningSeq > d.b:
		return desiredOpening{state: position.State{Quantity: row.OpeningQuantity, AvgCost: row.OpeningAvgCost}, seq: row.OpeningSeq, present: true}
	}
	return desiredOpening{state: position.State{Quantity: decimal.Zero, AvgCost: decimal.Zero}}
}

func positionBefore(row *PositionRow, b *BasisRow) Fields {
	if row == nil && b == nil {
		return nil
	}
	f := Fields{}
	if row != nil {
		f["account"], f["instrument"] = row.Account, row.Instrument
		f["quantity"], f["avg_cost"] = dec(row.Quantity), dec(row.AvgCost)
		f["opening_quantity"], f["opening_avg_cost"] = dec(row.OpeningQuantity), dec(row.OpeningAvgCost)
		f["opening_proven"], f["opening_seq"] = boolStr(row.OpeningProven), optSeq(row.OpeningSeq)
	} else {
		f["row"] = "absent"
	}
	if b != nil {
		f["basis_seq"], f["basis_quantity"], f["basis_avg_cost"] = itoa(b.BasisSeq), dec(b.Quantity), dec(b.AvgCost)
	}
	return f
}

// checkKey checks one key: opening, basis, phantom balance, derivation. All
// findings of the key share Before (row and basis) and Expected (the desired
// row), so whichever action the record gets writes one consistent row.
func (d *detector) checkKey(k posKey, ki *keyInputs, row *PositionRow, b *BasisRow) {
	if ki.unsorted {
		sortFills(d.s, ki.fills) // our own slice, never the snapshot's
	}
	open := d.desired(ki, row)
	hasInputs := len(ki.fills) > 0 || open.present
	if row == nil && b == nil && !hasInputs {
		return // only mentioned by trades above the cursor: nothing expected yet
	}

	// Fold once; capture the fold at the basis seq on the way when the basis
	// starts where the key does (always, unless the opening follows it).
	final := open.state
	var atBasis position.State
	basisSameStart := b == nil || !open.present || *open.seq <= b.BasisSeq
	captured := false
	if b != nil && !basisSameStart {
		atBasis = position.State{Quantity: decimal.Zero, AvgCost: decimal.Zero}
		for _, r := range ki.fills {
			if f := r.of(d.s); f.seq <= b.BasisSeq {
				atBasis = f.apply(atBasis)
			}
		}
	}
	for _, r := range ki.fills {
		f := r.of(d.s)
		if b != nil && basisSameStart && !captured && f.seq > b.BasisSeq {
			atBasis, captured = final, true
		}
		final = f.apply(final)
	}
	if b != nil && basisSameStart && !captured {
		atBasis = final
	}

	rec := k.record()
	before := positionBefore(row, b)
	expected := Fields{"account": k.account, "instrument": k.instrument, "quantity": dec(final.Quantity), "avg_cost": dec(final.AvgCost),
		"opening_quantity": dec(open.state.Quantity), "opening_avg_cost": dec(open.state.AvgCost), "opening_proven": "true",
		"opening_seq": optSeq(open.seq)}
	drift := d.keyDrift[k]

	openingFinding := false
	if row != nil {
		openingFinding = d.checkOpening(rec, ki, row, before, expected)
	}
	basisFinding := false
	if b != nil {
		bq := Fields{"basis_seq": itoa(b.BasisSeq), "verified_through": itoa(d.v)}
		switch {
		case b.BasisSeq > d.v:
			basisFinding = true
			d.emit(PositionBasisAgrees, rec, before, expected, RootCause{Code: CauseBasisAheadOfCursor, Confidence: Likely,
				Hint:     "the basis claims a fold past the cursor's verified seq: it was written outside a page",
				Evidence: []string{"basis_seq=" + bq["basis_seq"], "verified_through=" + bq["verified_through"]}}, true, "")
		case !atBasis.Equal(position.State{Quantity: b.Quantity, AvgCost: b.AvgCost}):
			basisFinding = true
			d.emit(PositionBasisAgrees, rec, before, expected, RootCause{Code: CauseBasisStale, Confidence: Likely,
				Hint: "the basis is not the authoritative fold through its seq: a repair or an edit did not invalidate it, so the next page would fold from it",
				Evidence: []string{"basis_seq=" + bq["basis_seq"], "basis_quantity=" + dec(b.Quantity), "derived_quantity=" + dec(atBasis.Quantity),
					"basis_avg_cost=" + dec(b.AvgCost), "derived_avg_cost=" + dec(atBasis.AvgCost)}}, true, "")
		}
	}

	switch {
	case row != nil && !hasInputs:
		if row.Quantity.IsZero() && row.AvgCost.IsZero() {
			return // a flat row nothing needs: harmless
		}
		cause := RootCause{Code: CausePhantomBalance, Confidence: Likely,
			Hint:     "a clean source read holds no opening and no trade for the key, yet the row holds a balance: written outside the trade path",
			Evidence: []string{"quantity=" + dec(row.Quantity), "avg_cost=" + dec(row.AvgCost)}}
		switch {
		case rowClaimsOpening(row):
			cause = RootCause{Code: CauseUnprovenOpeningClaim, Confidence: Possible,
				Hint:     "the row claims an opening the source never emitted (flag, seq or values): a human decides whether an opening event is missing",
				Evidence: []string{"opening_quantity=" + dec(row.OpeningQuantity), "opening_proven=" + boolStr(row.OpeningProven), "opening_seq=" + optSeq(row.OpeningSeq)}}
		case !d.accounts[k.account]:
			cause = RootCause{Code: CauseKeyNotLoaded, Confidence: Possible,
				Hint:     "the source knows nothing of this account: re-read it before dropping the row",
				Evidence: []string{"account=" + k.account, "source_accounts=" + itoa(int64(len(d.accounts)))}}
		}
		d.emit(PositionSourceBacked, rec, before, nil, cause, true, "")
	case row == nil && hasInputs:
		cause := RootCause{Code: CausePositionNeverWritten, Confidence: Likely,
			Hint:     "the key has verified inputs but no row: the projector never wrote it (or it was deleted)",
			Evidence: []string{"fills=" + itoa(int64(len(ki.fills)))}}
		if drift != nil {
			cause = driftCause(drift)
		}
		d.emit(PositionDerivationAgrees, rec, before, expected, cause, true, "")
	case row != nil && (!row.Quantity.Equal(final.Quantity) || !row.AvgCost.Equal(final.AvgCost)):
		ev := []string{"row_quantity=" + dec(row.Quantity), "derived_quantity=" + dec(final.Quantity),
			"row_avg_cost=" + dec(row.AvgCost), "derived_avg_cost=" + dec(final.AvgCost), "fills=" + itoa(int64(len(ki.fills)))}
		var cause RootCause
		switch {
		case overPrecise(row.Quantity, row.AvgCost):
			cause = RootCause{Code: CausePrecisionMismatch, Confidence: Likely,
				Hint: "the row carries more than 12 decimal places: it was not produced by the derivation; fix the writer, not the number", Evidence: ev}
		case drift != nil:
			cause = driftCause(drift)
		case openingFinding:
			cause = RootCause{Code: CauseOpeningUnproven, Confidence: Likely,
				Hint: "the key's opening is not the proven source opening: the derivation starts from another balance", Evidence: ev}
		case row.Quantity.Equal(final.Quantity):
			cause = RootCause{Code: CauseArrivalOrder, Confidence: Likely,
				Hint: "same quantity, different average cost: the trades were folded in arrival order, not (seq, tradeSeq); re-derivation fixes it (R1)", Evidence: ev}
		case basisFinding:
			cause = RootCause{Code: CauseBasisStale, Confidence: Possible,
				Hint: "the key's basis disagrees with its history: a page folded newer trades onto a stale basis", Evidence: ev}
		default:
			cause = RootCause{Code: CauseUnexplainedWrite, Confidence: Possible,
				Hint: "the quantity is not what the key's trades explain: a write outside the trade path (manual edit, lost update, double apply)", Evidence: ev}
		}
		d.emit(PositionDerivationAgrees, rec, before, expected, cause, true, "")
	}
}

// driftCause: the key's inputs drift (its trades carry findings).
func driftCause(drift *driftEvidence) RootCause {
	ev := drift.first
	if drift.n > len(ev) {
		ev = append(append([]string{}, ev...), "and "+itoa(int64(drift.n-len(ev)))+" more")
	}
	return RootCause{Code: CauseInputsDrift, Confidence: Likely,
		Hint:     "the key's trades drift (" + strings.Join(ev, "; ") + "): fix them first, then re-derive",
		Evidence: ev}
}

// checkOpening checks the row's opening against the source. An opening is
// proven only by a verified source opening event for the key (same seq and
// values) that no source trade of the key precedes.
func (d *detector) checkOpening(rec Record, ki *keyInputs, row *PositionRow, before, expected Fields) bool {
	claims := rowClaimsOpening(row)
	rowEv := []string{"row_opening_quantity=" + dec(row.OpeningQuantity), "row_opening_avg_cost=" + dec(row.OpeningAvgCost),
		"row_opening_proven=" + boolStr(row.OpeningProven), "row_opening_seq=" + optSeq(row.OpeningSeq)}
	var cause RootCause
	switch {
	case ki.opening == nil:
		if !claims || (row.OpeningSeq != nil && *row.OpeningSeq > d.b) {
			return false // flat, or an opening past B: not verifiable
		}
		cause = RootCause{Code: CauseOpeningWithoutSourceEvent, Confidence: Likely,
			Hint:     "the row claims an opening (unproven flag, seq or values) but the source never emitted one for the key: a stored flag or seq proves nothing",
			Evidence: rowEv}
	case ki.conflict != "":
		cause = RootCause{Code: CauseOpeningAfterTrades, Confidence: Likely,
			Hint:     "the source opening cannot be proven: " + ki.conflict,
			Evidence: append(rowEv, "source_opening_seq="+itoa(ki.opening.Seq))}
	default:
		o := ki.opening
		seqOK := row.OpeningSeq != nil && *row.OpeningSeq == o.Seq
		valuesOK := row.OpeningQuantity.Equal(o.Quantity) && row.OpeningAvgCost.Equal(o.AvgCost)
		srcEv := append(rowEv, "source_opening_quantity="+dec(o.Quantity), "source_opening_avg_cost="+dec(o.AvgCost), "source_opening_seq="+itoa(o.Seq))
		switch {
		case seqOK && valuesOK && row.OpeningProven:
			return false
		case !claims && o.Seq > d.v:
			return false // catch-up's backlog: the page will adopt it
		case !claims:
			cause = RootCause{Code: CauseOpeningMissing, Confidence: Likely,
				Hint: "the source proves an opening the row lacks: the key starts from the wrong balance", Evidence: srcEv}
		case valuesOK && (seqOK || row.OpeningSeq == nil):
			cause = RootCause{Code: CauseOpeningFlagUnproven, Confidence: Likely,
				Hint: "the row holds the source opening's values but not its provenance (flag or seq): adopt the event", Evidence: srcEv}
		default:
			cause = RootCause{Code: CauseOpeningValuesDiffer, Confidence: Likely,
				Hint: "the row's opening contradicts the source opening", Evidence: srcEv}
		}
	}
	d.emit(OpeningProven, rec, before, expected, cause, ki.opening == nil, "")
	return true
}
