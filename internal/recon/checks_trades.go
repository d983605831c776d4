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

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// BookingBooked is the only booking status a source trade may be retained with.
const BookingBooked = "BOOKED"

func tradeRecord(id string) Record {
	return Record{Table: TableTrades, Identity: Fields{"trade_id": id}}
}

func tradeRowFields(r *TradeRow) Fields {
	return Fields{"trade_id": r.TradeID, "trade_seq": itoa(r.TradeSeq), "seq": r.Seq.String(), "instrument": r.Instrument,
		"price": dec(r.Price), "quantity": dec(r.Quantity), "buy_order_id": r.BuyOrderID, "sell_order_id": r.SellOrderID,
		"buy_account": r.BuyAccount, "sell_account": r.SellAccount, "ts": ts(r.TS), "booking_status": r.BookingStatus,
		"written_by": r.WrittenBy}
}

// srcTradeFields is the SQL representation of a source trade as recovery
// writes it (ts truncated to the microsecond, BOOKED, written_by recovery).
func srcTradeFields(t *wire.Trade) Fields {
	return Fields{"trade_id": t.TradeID, "trade_seq": itoa(t.TradeSeq), "seq": itoa(t.Seq), "instrument": t.Instrument,
		"price": dec(t.Price), "quantity": dec(t.Quantity), "buy_order_id": t.BuyOrderID, "sell_order_id": t.SellOrderID,
		"buy_account": t.BuyAccount, "sell_account": t.SellAccount, "ts": ts(tsSQL(t.TS)), "booking_status": BookingBooked,
		"written_by": "recovery"}
}

// legKeys are the two position keys a trade touches (buy leg, sell leg).
func legKeys(buy, sell, instrument string) (posKey, posKey) {
	return posKey{buy, instrument}, posKey{sell, instrument}
}

// markLegs notes a trade drift on both keys of the trade (markKey).
func (d *detector) markLegs(bk, sk posKey, o driftOrder, why string) {
	d.markKey(bk, o, why)
	d.markKey(sk, o, why)
}

func relatedKeys(a, b posKey) []string {
	if a == b {
		return []string{a.record().Key()}
	}
	return []string{a.record().Key(), b.record().Key()}
}

// sameTrade is tradeDiff without allocating (the clean path).
func sameTrade(r *TradeRow, s *wire.Trade) bool {
	return r.TradeSeq == s.TradeSeq && r.Instrument == s.Instrument && r.Price.Equal(s.Price) && r.Quantity.Equal(s.Quantity) &&
		r.BuyOrderID == s.BuyOrderID && r.SellOrderID == s.SellOrderID && r.BuyAccount == s.BuyAccount &&
		r.SellAccount == s.SellAccount && r.TS.Equal(tsSQL(s.TS))
}

// fieldDiff collects the names of the fields on which a row differs from
// its source event, in comparison order (the order evidence lists them).
type fieldDiff []string

func (d *fieldDiff) add(same bool, field string) {
	if !same {
		*d = append(*d, field)
	}
}

// tradeDiff lists the immutable fields on which a retained trade differs
// from its source event (decimals exact, ts at the microsecond).
func tradeDiff(r *TradeRow, s *wire.Trade) []string {
	var diff fieldDiff
	diff.add(r.TradeSeq == s.TradeSeq, "trade_seq")
	diff.add(r.Instrument == s.Instrument, "instrument")
	diff.add(r.Price.Equal(s.Price), "price")
	diff.add(r.Quantity.Equal(s.Quantity), "quantity")
	diff.add(r.BuyOrderID == s.BuyOrderID, "buy_order_id")
	diff.add(r.SellOrderID == s.SellOrderID, "sell_order_id")
	diff.add(r.BuyAccount == s.BuyAccount, "buy_account")
	diff.add(r.SellAccount == s.SellAccount, "sell_account")
	diff.add(r.TS.Equal(tsSQL(s.TS)), "ts")
	return diff
}

// orNil is f(p), or nil Fields when p is nil (the source lacks the record).
func orNil[T any](p *T, f func(*T) Fields) Fields {
	if p == nil {
		return nil
	}
	return f(p)
}

// compareTrade checks a retained trade against its source event: provenance
// (seq), immutable fields, booking.
func (d *detector) compareTrade(r *TradeRow, src *wire.Trade, rel []string, bk, sk posKey) {
	rec, before, want := tradeRecord(r.TradeID), tradeRowFields(r), srcTradeFields(src)
	drift := false
	seq, _ := r.Seq.Get() // set: legacy rows are never compared
	if seq != src.Seq {
		drift = true
		d.emit(TradeProvenance, rec, before, want,
			RootCause{Code: CauseProvenanceConflict, Confidence: Likely,
				Hint:     "the row carries another consensus seq than its source event: it was re-sequenced or written from another history",
				Evidence: []string{"row_seq=" + itoa(seq), "source_seq=" + itoa(src.Seq)}}, false, "", rel...)
	}
	if diff := tradeDiff(r, src); len(diff) > 0 {
		drift = true
		cause := RootCause{Code: CauseImmutableRewritten, Confidence: Possible,
			Hint:     "an immutable field was rewritten after the write, or the writer mis-decoded the event",
			Evidence: []string{"fields=" + strings.Join(diff, "|")}}
		switch {
		case overPrecise(r.Price, r.Quantity, src.Price, src.Quantity) && onlyOf(diff, "price", "quantity"):
			cause = RootCause{Code: CausePrecisionMismatch, Confidence: Likely,
				Hint:     "an amount carries more than 12 decimal places: fix the converter, not the number",
				Evidence: []string{"fields=" + strings.Join(diff, "|"), "row_price=" + dec(r.Price), "row_quantity=" + dec(r.Quantity)}}
		case len(diff) == 1 && diff[0] == "ts" && tsRounded(r.TS, src.TS):
			cause = RootCause{Code: CauseTimestampRounded, Confidence: Likely,
				Hint:     "the row holds the source timestamp rounded, not truncated, to the microsecond: the writer rounds",
				Evidence: []string{"row_ts=" + ts(r.TS), "source_ts=" + ts(src.TS)}}
		}
		d.emit(TradeImmutableAgrees, rec, before, want, cause, false, "differs on "+strings.Join(diff, ", "), rel...)
	}
	if r.BookingStatus != BookingBooked {
		drift = true
		d.emit(TradeBookingAccepted, rec, before, want,
			RootCause{Code: CauseBookingRejected, Confidence: Likely,
				Hint:     "the booking system rejected a trade the consensus matched; positions exclude it while the ledger holds it",
				Evidence: []string{"booking_status=" + r.BookingStatus}}, false, "", rel...)
	}
	if drift {
		d.markLegs(bk, sk, rowOrder(r.TradeID), "trade "+r.TradeID+" conflicts with its source event")
	}
}

// onlyOf reports whether diff is non-empty and names only fields of allowed
// (a drift of the amounts alone, say).
func onlyOf(diff []string, allowed ...string) bool {
	for _, f := range diff {
		if !slices.Contains(allowed, f) {
			return false
		}
	}
	return len(diff) > 0
}

// joinIDs is the evidence form of a list of ids.
func joinIDs(ids []string) string { return strings.Join(ids, "|") }
