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

// checkOrders compares order_events (every version) and orders (the current
// version) with the source's order versions through B.
//
// Memory: one map indexes the source versions (the first per (order_id,
// version) at seq <= B); which of them SQL retains is a flag per source
// event, not a second map of every SQL version (at 1M events that map alone
// was ~50 MB of the read's peak). Only SQL versions the source lacks (rare:
// drift, or rows past B) get a map, to skip a repeated row.
func checkOrders(d *detector) {
	s := d.s
	idx := make(map[orderKey]int, len(s.Source.Orders))
	for i := range s.Source.Orders {
		o := &s.Source.Orders[i]
		if o.Seq > d.b {
			continue
		}
		if _, dup := idx[orderKey{o.OrderID, o.Version}]; !dup {
			idx[orderKey{o.OrderID, o.Version}] = i
		}
	}
	src := func(k orderKey) (*wire.Order, int) {
		if i, ok := idx[k]; ok {
			return &s.Source.Orders[i], i
		}
		return nil, -1
	}
	retained := make([]bool, len(s.Source.Orders)) // by source index: SQL holds the version
	var unsourced map[orderKey]bool                // SQL versions the source lacks, seen once
	for i := range s.SQL.OrderEvents {
		r := &s.SQL.OrderEvents[i]
		k := orderKey{r.OrderID, r.Version}
		sv, j := src(k)
		switch {
		case j >= 0 && retained[j], j < 0 && unsourced[k]:
			continue // the primary key forbids it; the first row stands for the version
		case j >= 0:
			retained[j] = true
		default:
			if unsourced == nil {
				unsourced = map[orderKey]bool{}
			}
			unsourced[k] = true
		}
		d.compareOrder(TableOrderEvents, r, sv, nil)
	}

	// want: per order, the newest source version the SQL side must reflect:
	// verified (seq <= V) or already retained as an order event.
	// Sized by the current rows (one per order on a clean scope), not by
	// the versions: a map sized for every version is mostly empty.
	want := make(map[string]*wire.Order, len(s.SQL.Orders))
	var wantOrder []string
	for i := range s.Source.Orders {
		o := &s.Source.Orders[i]
		if o.Seq > d.b {
			continue
		}
		if _, j := src(orderKey{o.OrderID, o.Version}); j != i {
			continue // a repeated version in the source: the first stands
		}
		retained := retained[i]
		if o.Seq <= d.v && !retained {
			d.emit(OrderSourceRetained, orderEventRecord(o.OrderID, o.Version), nil, srcOrderFields(o),
				RootCause{Code: CauseRowDeleted, Confidence: Likely,
					Hint:     "the cursor claims completeness through its verified seq, yet this verified order version is gone: deleted after verification",
					Evidence: []string{"seq=" + itoa(o.Seq), "verified_through=" + itoa(d.v)}}, false, "")
		}
		if o.Seq <= d.v || retained {
			w := want[o.OrderID]
			if w == nil {
				wantOrder = append(wantOrder, o.OrderID)
			}
			if w == nil || o.Version > w.Version {
				want[o.OrderID] = o
			}
		}
	}

	cur := make(map[string]*OrderRow, len(s.SQL.Orders))
	for i := range s.SQL.Orders {
		r := &s.SQL.Orders[i]
		if cur[r.OrderID] != nil {
			continue
		}
		cur[r.OrderID] = r
		w := want[r.OrderID]
		rewound := r.Seq.Valid() && w != nil && w.Version > r.Version
		sv, _ := src(orderKey{r.OrderID, r.Version})
		// The desired current row: the newest verified version when the row
		// is behind it, else the source event of the row's own version.
		var newest *wire.Order
		if rewound {
			newest = w
		}
		d.compareOrder(TableOrders, r, sv, newest)
		if rewound {
			d.emit(OrderNeverRewound, orderRecord(r.OrderID), orderRowFields(r), srcOrderFields(w),
				RootCause{Code: CauseVersionRewound, Confidence: Likely,
					Hint:     "the current row is older than a verified version: a late redelivery overwrote a newer version (a write without the version guard)",
					Evidence: []string{"row_version=" + itoa(r.Version), "newest_verified_version=" + itoa(w.Version)}}, false, "")
		}
	}
	for _, id := range wantOrder {
		if cur[id] == nil {
			w := want[id]
			d.emit(OrderSourceRetained, orderRecord(id), nil, srcOrderFields(w),
				RootCause{Code: CauseRowDeleted, Confidence: Likely,
					Hint:     "the order has verified versions but no current row: the row was deleted (or never written)",
					Evidence: []string{"newest_verified_version=" + itoa(w.Version), "seq=" + itoa(w.Seq)}}, false, "")
		}
	}
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
