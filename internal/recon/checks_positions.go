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
	"strings"

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/position"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// keyInputs is what the source says of one position key's opening.
type keyInputs struct {
	opening  *wire.Opening // the key's source opening at seq <= B (the first)
	conflict string        // why that opening cannot be proven ("" = it can)
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
func rowClaimsOpening(r *PositionRow) bool {
	return r.OpeningSeq != nil || !r.OpeningQuantity.IsZero() || !r.OpeningAvgCost.IsZero() || !r.OpeningProven
}

// The position check (positions.check, stream_positions.go) re-derives every
// key from its proven opening and its inputs in (seq, tradeSeq, leg) order,
// and compares rows, openings and bases.
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

// checkKey checks one key: opening, basis, phantom balance, derivation.
// final is the key folded from its desired opening over its fills inputs,
// atBasis the fold at the basis seq. All findings of the key share Before
// (row and basis) and Expected (the desired row), so whichever action the
// record gets writes one consistent row.
func (d *detector) checkKey(k posKey, ki *keyInputs, row *PositionRow, b *BasisRow, final, atBasis position.State, fills int64) {
	open := d.desired(ki, row)
	hasInputs := fills > 0 || open.present
	if row == nil && b == nil && !hasInputs {
		return // only mentioned by trades above the cursor: nothing expected yet
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
			Evidence: []string{"fills=" + itoa(fills)}}
		if drift != nil {
			cause = driftCause(drift)
		}
		d.emit(PositionDerivationAgrees, rec, before, expected, cause, true, "")
	case row != nil && (!row.Quantity.Equal(final.Quantity) || !row.AvgCost.Equal(final.AvgCost)):
		ev := []string{"row_quantity=" + dec(row.Quantity), "derived_quantity=" + dec(final.Quantity),
			"row_avg_cost=" + dec(row.AvgCost), "derived_avg_cost=" + dec(final.AvgCost), "fills=" + itoa(fills)}
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
