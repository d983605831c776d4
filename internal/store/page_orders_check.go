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

package store

import (
	"context"

	"github.com/projection-recovery/projection-recovery/internal/codes"

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// checkOrders: every retained order row positioned in the window (order_events
// versions and current orders rows) must be the SQL representation of its
// source event: same seq (else ORDER_PROVENANCE_CONFLICT), same content with
// timestamps compared at microseconds (else ORDER_ROW_MISMATCH), and present
// in the source (else ORPHAN_ORDER). A retained version of a page order
// outside the window is a provenance conflict too. The rows are read window
// first (page_trades_check.go): one range scan of both tables' (scope, seq)
// indexes, then primary-key probes for the page versions the window did not
// show and the current rows of page orders it did not show (a row of a
// version newer than the page, or none). w.missingOrders collects the
// versions to insert.
func (w *pageTx) checkOrders(ctx context.Context) error {
	retained := map[orderKey]bool{}
	w.orderRows = map[string]int64{} // grows with what the reads find: nothing in a bootstrap
	rows, err := w.tx.Query(ctx, windowOrdersSQL, w.scope, w.p.after, w.p.through)
	if err != nil {
		return dbErr("store: retained window orders", err)
	}
	if err := w.compareOrders(rows, retained); err != nil {
		return err
	}
	// The probes: each page order id once, with the lowest and highest of
	// its versions the window did not show (another version in that range
	// is handled as any version outside the page: skipped unless the window
	// holds it, and then the window query returned it already), and the
	// page order ids whose current row the window did not show. Only the
	// page's own versions are probed, not every version of a page order:
	// another version is checked against its source by the page whose window
	// holds it, and a version without a seq is refused scope-wide by
	// checkLegacy.
	ids, lo, hi, cur, born := orderProbes(w.p.orders, retained, w.orderRows)
	if rows, err = w.probeOrders(ctx, ids, lo, hi, cur, born); err != nil {
		return dbErr("store: retained orders", err)
	}
	if rows != nil {
		if err := w.compareOrders(rows, retained); err != nil {
			return err
		}
	}
	w.missingOrders = make([]*wire.Order, 0, len(w.p.orders)-len(retained))
	for _, o := range w.p.orders {
		if !retained[orderKey{o.OrderID, o.Version}] {
			w.missingOrders = append(w.missingOrders, o)
		}
	}
	return nil
}

// probeOrders runs the probes orderProbes listed (nil rows: nothing to
// probe). Without a version to probe, or when the slice may skip them
// (page_unprobed.go), it reads only the current rows.
func (w *pageTx) probeOrders(ctx context.Context, ids []string, lo, hi []int64, cur, bornIn []bool) (pgx.Rows, error) {
	curIDs, curBorn, versions := currentOrderProbes(ids, lo, hi, cur, bornIn)
	born := 0 // of curIDs, the orders born in the slice
	for _, b := range curBorn {
		if b {
			born++
		}
	}
	skip := false
	if versions || born > 0 {
		var err error
		if skip, err = w.unprobed(ctx); err != nil {
			return nil, err
		}
	}
	if versions {
		if !skip {
			return w.tx.Query(ctx, probeOrdersSQL, w.scope, ids, lo, hi, cur)
		}
		w.skipped = true
	}
	if skip && born > 0 {
		var err error
		if curIDs, err = w.withoutBornHere(ctx, curIDs, curBorn, born); err != nil {
			return nil, err
		}
	}
	if h := w.hooks.currentProbes; h != nil {
		h(len(curIDs))
	}
	if len(curIDs) == 0 {
		return nil, nil
	}
	return w.tx.Query(ctx, probeCurrentOrdersSQL, w.scope, curIDs)
}

// orderProbes lists what checkOrders probes after the window: one entry per
// page order id with something the window did not show, its versions' range
// among those (lo > hi: none), whether its current row is wanted (cur) and
// whether the slice holds its version 1 (born: see page_unprobed.go, read
// here in the same pass rather than looked up again per id). ids serves both
// probes: a bootstrap probes every page order for both.
func orderProbes(orders []*wire.Order, retained map[orderKey]bool, shown map[string]int64) (ids []string, lo, hi []int64, cur, born []bool) {
	at := make(map[string]int, len(orders))
	ids, lo, hi = make([]string, 0, len(orders)), make([]int64, 0, len(orders)), make([]int64, 0, len(orders))
	cur, born = make([]bool, 0, len(orders)), make([]bool, 0, len(orders))
	for _, o := range orders {
		i, ok := at[o.OrderID]
		if !ok {
			_, has := shown[o.OrderID]
			i, at[o.OrderID] = len(ids), len(ids)
			ids, lo, hi, cur, born = append(ids, o.OrderID), append(lo, 1), append(hi, 0), append(cur, !has), append(born, false)
		}
		if o.Version == 1 {
			born[i] = true
		}
		switch v := o.Version; {
		case retained[orderKey{o.OrderID, v}]:
		case lo[i] > hi[i]:
			lo[i], hi[i] = v, v
		default:
			lo[i], hi[i] = min(lo[i], v), max(hi[i], v)
		}
	}
	n := 0 // keep the entries with something to probe
	for i := range ids {
		if lo[i] <= hi[i] || cur[i] {
			ids[n], lo[n], hi[n], cur[n], born[n] = ids[i], lo[i], hi[i], cur[i], born[i]
			n++
		}
	}
	return ids[:n], lo[:n], hi[:n], cur[:n], born[:n]
}

// compareOrders compares the retained order rows of rows (table name, then
// the order columns) with their source events, records in retained the
// page versions found retained as their source has them and in w.orderRows
// the current rows' versions, and returns the first refusal. A row may come
// twice (from the window and from a probe): recording it is idempotent.
func (w *pageTx) compareOrders(rows pgx.Rows, retained map[orderKey]bool) error {
	defer rows.Close()
	var first error
	for rows.Next() {
		var table, side, status string
		var r wire.Order
		var seq *int64
		if err := rows.Scan(&table, &r.OrderID, &r.Version, &seq, &r.Account, &r.Instrument, &side, numScan{&r.Price}, numScan{&r.Quantity},
			numScan{&r.Remaining}, &status, &r.TS); err != nil {
			return dbErr("store: scan retained order", err)
		}
		if first != nil {
			continue
		}
		k := orderKey{r.OrderID, r.Version}
		if table == "orders" {
			w.orderRows[r.OrderID] = r.Version
		}
		src := w.p.orderOf(k)
		inWindow := seq != nil && *seq > w.p.after && *seq <= w.p.through
		switch {
		case seq == nil:
			first = refuse(codes.UnknownLegacyHistory, "%s row %s v%d has no consensus seq", table, r.OrderID, r.Version)
		case src == nil && inWindow:
			first = refuse(codes.OrphanOrder, "%s row %s v%d at seq %d in (%d, %d] is absent from the source", table, r.OrderID, r.Version, *seq, w.p.after, w.p.through)
		case src == nil:
			// another version of a page order, outside the window: checked by its own page
		case *seq != src.Seq:
			first = refuse(codes.OrderProvenanceConflict, "%s row %s v%d retained at seq %d, source seq %d", table, r.OrderID, r.Version, *seq, src.Seq)
		case !sameOrder(&r, wire.Side(side), wire.OrderStatus(status), src):
			first = refuse(codes.OrderRowMismatch, "%s row %s v%d at seq %d differs from its source event", table, r.OrderID, r.Version, src.Seq)
		case table == "order_events":
			retained[k] = true
		}
	}
	if err := rows.Err(); err != nil {
		return dbErr("store: retained orders", err)
	}
	return first
}

// sameOrder compares a retained row with the SQL representation of its
// source event: decimals numerically (numeric keeps no canonical scale),
// timestamps at the column's microsecond precision (tsSQL).
func sameOrder(r *wire.Order, side wire.Side, status wire.OrderStatus, s *wire.Order) bool {
	return r.Account == s.Account && r.Instrument == s.Instrument && side == s.Side && status == s.Status &&
		r.Price.Equal(s.Price) && r.Quantity.Equal(s.Quantity) && r.Remaining.Equal(s.Remaining) && r.TS.Equal(tsSQL(s.TS))
}
