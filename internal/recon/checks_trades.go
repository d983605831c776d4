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
func (d *detector) markLegs(bk, sk posKey, why string) {
	d.markKey(bk, why)
	d.markKey(sk, why)
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

// checkTrades: one pass over the SQL trades (maps keyed by identity, no
// nested scans), one over the source trades below the cursor.
func checkTrades(d *detector) {
	s := d.s
	firstBySeq := make(map[int64]int, len(s.SQL.Trades)) // trade_seq -> first row index
	var dupSeq map[int64][]int                           // trade_seq -> every row sharing it (rare)
	var dupOrder []int64                                 // dupSeq's keys in snapshot order (deterministic evidence)
	for i := range s.SQL.Trades {
		r := &s.SQL.Trades[i]
		bk, sk := legKeys(r.BuyAccount, r.SellAccount, r.Instrument)
		if first, dup := d.sqlTrades[r.TradeID]; dup {
			rel := relatedKeys(bk, sk)
			// Two rows under one primary key: the table lost its constraint;
			// no row can be chosen from the snapshot (Expected nil: manual).
			d.emit(TradeIdentityUnique, tradeRecord(r.TradeID), tradeRowFields(first), nil,
				RootCause{Code: CauseDuplicateWritePath, Confidence: Likely,
					Hint:     "two rows share the primary key trade_id: the table lost its constraint or two write paths bypassed it",
					Evidence: []string{"trade_id=" + r.TradeID, "rows=2+"}}, false, "duplicate primary key", rel...)
			d.markLegs(bk, sk, "trade "+r.TradeID+" duplicated")
			continue
		}
		d.sqlTrades[r.TradeID] = r
		if j, dup := firstBySeq[r.TradeSeq]; dup {
			if dupSeq == nil {
				dupSeq = map[int64][]int{}
			}
			if len(dupSeq[r.TradeSeq]) == 0 {
				dupSeq[r.TradeSeq] = []int{j}
				dupOrder = append(dupOrder, r.TradeSeq)
			}
			dupSeq[r.TradeSeq] = append(dupSeq[r.TradeSeq], i)
		} else {
			firstBySeq[r.TradeSeq] = i
		}

		src, _ := d.srcTrade(r.TradeID)
		seq, hasSeq := r.Seq.Get()
		if src != nil && hasSeq && seq == src.Seq && r.BookingStatus == BookingBooked && sameTrade(r, src) {
			continue // the clean path: nothing allocated
		}
		rel := relatedKeys(bk, sk)
		switch {
		case !hasSeq:
			d.legacy[r.TradeID] = true
			d.emit(TradeProvenance, tradeRecord(r.TradeID), tradeRowFields(r), orNil(src, srcTradeFields),
				RootCause{Code: CauseLegacyRow, Confidence: Likely,
					Hint:     "the row carries no consensus seq: unknown legacy history that cannot be placed in authoritative order",
					Evidence: []string{"seq=NULL", "written_by=" + r.WrittenBy}}, false, "", rel...)
			d.markLegs(bk, sk, "trade "+r.TradeID+" legacy")
		case src == nil && seq <= d.b:
			d.orphan[r.TradeID] = true
			d.emit(TradePresentInSource, tradeRecord(r.TradeID), tradeRowFields(r), nil,
				RootCause{Code: CauseNotInConsensus, Confidence: Likely,
					Hint:     "the row sits at or below the source boundary yet the consensus never emitted it: written outside the consensus (replayed, forged or hand-written)",
					Evidence: []string{"seq=" + itoa(seq), "boundary=" + itoa(d.b), "written_by=" + r.WrittenBy}},
				true, "", rel...)
			d.markLegs(bk, sk, "trade "+r.TradeID+" orphan")
		case src == nil:
			// Past B: newer than the source read; not verifiable, not drift.
		default:
			d.compareTrade(r, src, rel, bk, sk)
		}
	}
	for _, seq := range dupOrder {
		d.duplicateTradeSeq(seq, dupSeq[seq])
	}
	// Source trades the cursor claims but SQL lacks. Above the cursor they
	// are catch-up's backlog, not drift.
	for i := range s.Source.Trades {
		t := &s.Source.Trades[i]
		if t.Seq > d.v {
			continue
		}
		if _, ok := d.sqlTrades[t.TradeID]; ok {
			continue
		}
		bk, sk := legKeys(t.BuyAccount, t.SellAccount, t.Instrument)
		d.emit(TradeSourceRetained, tradeRecord(t.TradeID), nil, srcTradeFields(t),
			RootCause{Code: CauseRowDeleted, Confidence: Likely,
				Hint:     "the cursor claims completeness through its verified seq, yet this verified trade is gone: deleted after verification",
				Evidence: []string{"seq=" + itoa(t.Seq), "verified_through=" + itoa(d.v)}},
			false, "", relatedKeys(bk, sk)...)
		d.markLegs(bk, sk, "trade "+t.TradeID+" missing")
	}
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
		d.markLegs(bk, sk, "trade "+r.TradeID+" conflicts with its source event")
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

// duplicateTradeSeq reports every row of a group sharing one engine trade
// sequence that the source does not verify (trade_id known with that
// trade_seq). Expected names the verified row to keep, nil when none is.
func (d *detector) duplicateTradeSeq(seq int64, rows []int) {
	keep := ""
	for _, i := range rows {
		r := &d.s.SQL.Trades[i]
		if src, _ := d.srcTrade(r.TradeID); src != nil && src.TradeSeq == r.TradeSeq {
			keep = r.TradeID
			break
		}
	}
	ids := make([]string, len(rows))
	for n, i := range rows {
		ids[n] = d.s.SQL.Trades[i].TradeID
	}
	for n, i := range rows {
		r := &d.s.SQL.Trades[i]
		if r.TradeID == keep || (keep == "" && n == 0) {
			continue
		}
		var expected Fields
		if keep != "" {
			expected = Fields{"keep_trade_id": keep}
		}
		bk, sk := legKeys(r.BuyAccount, r.SellAccount, r.Instrument)
		d.emit(TradeIdentityUnique, tradeRecord(r.TradeID), tradeRowFields(r), expected,
			RootCause{Code: CauseDuplicateWritePath, Confidence: Likely,
				Hint:     "several rows claim one engine trade sequence: two write paths recorded the same trade under different ids",
				Evidence: []string{"trade_seq=" + itoa(seq), "trade_ids=" + strings.Join(ids, "|"), "verified=" + keep}},
			false, "", relatedKeys(bk, sk)...)
		d.markLegs(bk, sk, "trade "+r.TradeID+" duplicates trade_seq "+itoa(seq))
	}
}
