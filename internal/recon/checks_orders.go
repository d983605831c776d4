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

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

func orderEventRecord(id string, version int64) Record {
	return Record{Table: TableOrderEvents, Identity: Fields{"order_id": id, "version": itoa(version)}}
}

func orderRecord(id string) Record {
	return Record{Table: TableOrders, Identity: Fields{"order_id": id}}
}

func orderRowFields(r *OrderRow) Fields {
	return Fields{"order_id": r.OrderID, "version": itoa(r.Version), "seq": r.Seq.String(), "account": r.Account,
		"instrument": r.Instrument, "side": r.Side, "price": dec(r.Price), "quantity": dec(r.Quantity),
		"remaining": dec(r.Remaining), "status": r.Status, "ts": ts(r.TS)}
}

// srcOrderFields is the SQL representation of a source order version (ts
// truncated to the microsecond, as every writer stores it).
func srcOrderFields(o *wire.Order) Fields {
	return Fields{"order_id": o.OrderID, "version": itoa(o.Version), "seq": itoa(o.Seq), "account": o.Account,
		"instrument": o.Instrument, "side": string(o.Side), "price": dec(o.Price), "quantity": dec(o.Quantity),
		"remaining": dec(o.Remaining), "status": string(o.Status), "ts": ts(tsSQL(o.TS))}
}

// sameOrder is orderDiff without allocating (the clean path).
func sameOrder(r *OrderRow, s *wire.Order) bool {
	return r.Account == s.Account && r.Instrument == s.Instrument && r.Side == string(s.Side) && r.Status == string(s.Status) &&
		r.Price.Equal(s.Price) && r.Quantity.Equal(s.Quantity) && r.Remaining.Equal(s.Remaining) && r.TS.Equal(tsSQL(s.TS))
}

// orderDiff lists the fields on which a retained order row differs from the
// SQL representation of its source event (the reviewed comparator of
// internal/store's sameOrder: decimals exact, ts at the microsecond).
func orderDiff(r *OrderRow, s *wire.Order) []string {
	var diff fieldDiff
	diff.add(r.Account == s.Account, "account")
	diff.add(r.Instrument == s.Instrument, "instrument")
	diff.add(r.Side == string(s.Side), "side")
	diff.add(r.Price.Equal(s.Price), "price")
	diff.add(r.Quantity.Equal(s.Quantity), "quantity")
	diff.add(r.Remaining.Equal(s.Remaining), "remaining")
	diff.add(r.Status == string(s.Status), "status")
	diff.add(r.TS.Equal(tsSQL(s.TS)), "ts")
	return diff
}

// compareOrder checks one retained order row of table (order_events or
// orders) against its source event sv (nil: the source lacks the version).
// want is the version the row must become when it is not sv (a rewound
// current row: the newest verified version). Fields are built only on
// drift: a clean scope allocates none.
func (d *detector) compareOrder(table string, r *OrderRow, sv, want *wire.Order) {
	seq, hasSeq := r.Seq.Get()
	if hasSeq && sv != nil && seq == sv.Seq && sameOrder(r, sv) {
		return
	}
	rec := orderEventRecord(r.OrderID, r.Version)
	if table == TableOrders {
		rec = orderRecord(r.OrderID)
	}
	if want == nil {
		want = sv
	}
	before, expected := orderRowFields(r), orNil(want, srcOrderFields)
	switch {
	case !hasSeq:
		d.emit(OrderVersionAgrees, rec, before, expected, RootCause{Code: CauseLegacyRow, Confidence: Likely,
			Hint:     "the row carries no consensus seq: unknown legacy history",
			Evidence: []string{"seq=NULL", "version=" + itoa(r.Version)}}, false, "")
		return
	case sv == nil && seq <= d.b:
		d.emit(OrderPresentInSource, rec, before, nil, RootCause{Code: CauseNotInConsensus, Confidence: Likely,
			Hint:     "the version sits at or below the source boundary yet the consensus never emitted it",
			Evidence: []string{"seq=" + itoa(seq), "boundary=" + itoa(d.b)}}, true, "")
		return
	case sv == nil:
		return // past B: not verifiable
	}
	diff := orderDiff(r, sv)
	if seq == sv.Seq && len(diff) == 0 {
		return
	}
	cause := RootCause{Code: CauseRowMismatch, Confidence: Likely,
		Hint:     "the row differs from the SQL representation of its source event: a writer stored other values",
		Evidence: []string{"fields=" + strings.Join(diff, "|")}}
	switch {
	case seq != sv.Seq:
		cause = RootCause{Code: CauseProvenanceConflict, Confidence: Likely,
			Hint:     "the row carries another consensus seq than its source event",
			Evidence: []string{"row_seq=" + itoa(seq), "source_seq=" + itoa(sv.Seq), "fields=" + strings.Join(diff, "|")}}
	case overPrecise(r.Price, r.Quantity, r.Remaining, sv.Price, sv.Quantity, sv.Remaining) && onlyOf(diff, "price", "quantity", "remaining"):
		cause = RootCause{Code: CausePrecisionMismatch, Confidence: Likely,
			Hint:     "an amount carries more than 12 decimal places: fix the converter, not the number",
			Evidence: []string{"fields=" + strings.Join(diff, "|")}}
	case len(diff) == 1 && diff[0] == "ts" && tsRounded(r.TS, sv.TS):
		cause = RootCause{Code: CauseTimestampRounded, Confidence: Likely,
			Hint:     "the row holds the source timestamp rounded, not truncated, to the microsecond: the writer rounds",
			Evidence: []string{"row_ts=" + ts(r.TS), "source_ts=" + ts(sv.TS)}}
	}
	detail := "differs on seq"
	if len(diff) > 0 {
		detail = "differs on " + strings.Join(diff, ", ")
	}
	d.emit(OrderVersionAgrees, rec, before, expected, cause, false, detail)
}
