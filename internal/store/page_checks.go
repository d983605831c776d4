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
	"fmt"

	"github.com/projection-recovery/projection-recovery/internal/codes"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/position"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// pageTx is the data half of one page transaction (after lock, lease, run and
// cursor checks). Everything is set-based, never one statement per row: keys
// and derived positions go into temporary tables and each write is one
// statement over them; the retained trades and order rows are read by a range
// scan of the window and probes for the rest (page_trades_check.go) and
// compared in Go, and the missing ones are COPYed.
type pageTx struct {
	tx    pgx.Tx
	scope string
	p     *prepared

	existing      map[string]bool  // page trade ids already retained
	missingOrders []*wire.Order    // order versions to insert (COPY)
	orderRows     map[string]int64 // version of the current orders row of each page order id that has one
	lockIDs       []int64          // the key locks the slice holds (KeyLocks)
	rows          []posRow
	inserted      int64
	orderEvents   int64
	changed       int
	newer         int64       // retained legs newer than the page folded into its keys (R1)
	noDefer       bool        // every key is folded in full: a flush slice, or one that makes the scope CURRENT (deferred.go)
	deferred      int         // keys whose derivation the slice deferred (deferFold)
	probeAll      bool        // probe every page row the window did not show (page_unprobed.go)
	keysRead      bool        // unprobed read the catalog's keys for this slice
	skipped       bool        // a probe that could only have found a refusal was skipped
	currentProbes func(n int) // hooks.currentProbes: how many current orders rows the slice probes
}

// tempTables are created once per connection and emptied at every commit
// (ON COMMIT DELETE ROWS; a rollback discards their rows anyway), so a page
// pays no catalog churn for them. The same script sets how the transaction's
// statements are planned: custom plans (a generic plan, which PostgreSQL may
// pick for a prepared statement after five executions, ignores the window
// bounds and scanned the scope per slice), and no JIT (the estimates over
// never-analyzed temporary tables cross jit_above_cost on a large scope, and
// compiling took ~400 ms per statement, for statements that run in
// milliseconds).
const tempTables = `
CREATE TEMP TABLE IF NOT EXISTS page_keys (account text, instrument text) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS page_positions (account text, instrument text, quantity numeric, avg_cost numeric,
    opening_quantity numeric, opening_avg_cost numeric, opening_proven boolean, opening_seq bigint,
    basis_quantity numeric, basis_avg_cost numeric, changed boolean, deferred boolean) ON COMMIT DELETE ROWS;
SET LOCAL plan_cache_mode = force_custom_plan;
SET LOCAL jit = off;`

// The COPY statements of the page path, with their columns in the order
// copyBuf writes them (encodeOrderEvents, encodeOrders,
// encodeMissingTrades, copyPagePositions).
const (
	copyOrderEventsSQL = `COPY order_events (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining,
    status, ts) FROM STDIN (FORMAT binary)`
	copyOrdersSQL = `COPY orders (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining,
    status, ts) FROM STDIN (FORMAT binary)`
	copyTradesSQL = `COPY trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id,
    buy_account, sell_account, ts, booking_status, written_by) FROM STDIN (FORMAT binary)`
	copyPagePositionsSQL = `COPY page_positions (account, instrument, quantity, avg_cost, opening_quantity, opening_avg_cost,
    opening_proven, opening_seq, basis_quantity, basis_avg_cost, changed, deferred) FROM STDIN (FORMAT binary)`
)

// encodeOrderEvents encodes the order versions checkOrders found missing.
func (w *pageTx) encodeOrderEvents() *copyBuf {
	c := getCopyBuf(12)
	for _, o := range w.missingOrders {
		c.row()
		c.order(w.scope, o)
	}
	return c
}

// trade writes the columns of a trade row from trade_id to ts, in
// copyTradesSQL's order.
func (c *copyBuf) trade(t *wire.Trade) {
	c.text(t.TradeID)
	c.int8(t.TradeSeq)
	c.int8(t.Seq)
	c.text(t.Instrument)
	c.numeric(t.Price)
	c.numeric(t.Quantity)
	c.text(t.BuyOrderID)
	c.text(t.SellOrderID)
	c.text(t.BuyAccount)
	c.text(t.SellAccount)
	c.timestamptz(t.TS)
}

// order writes the columns of an order row (order_events and orders share
// them, copyOrderEventsSQL and copyOrdersSQL name them in this order).
func (c *copyBuf) order(scope string, o *wire.Order) {
	c.text(scope)
	c.text(o.OrderID)
	c.int8(o.Version)
	c.int8(o.Seq)
	c.text(o.Account)
	c.text(o.Instrument)
	c.text(string(o.Side))
	c.numeric(o.Price)
	c.numeric(o.Quantity)
	c.numeric(o.Remaining)
	c.text(string(o.Status))
	c.timestamptz(o.TS)
}

// copyPagePositions streams the derived positions into page_positions.
func (w *pageTx) copyPagePositions(ctx context.Context) error {
	c := getCopyBuf(12)
	defer putCopyBuf(c)
	for i := range w.rows {
		r := &w.rows[i]
		c.row()
		c.text(r.k.account)
		c.text(r.k.instrument)
		c.numeric(r.final.Quantity)
		c.numeric(r.final.AvgCost)
		c.numeric(r.openQty)
		c.numeric(r.openAvg)
		c.boolean(r.openProven)
		c.int8p(r.openSeq)
		c.numeric(r.newBasis.Quantity)
		c.numeric(r.newBasis.AvgCost)
		c.boolean(r.changed)
		c.boolean(r.deferred)
	}
	_, err := c.send(ctx, w.tx, copyPagePositionsSQL)
	return err
}

// checkLegacy refuses a scope holding rows without consensus provenance
// (seq NULL): they can be neither verified nor placed in authoritative order,
// so no cursor may claim completeness over them (UNKNOWN_LEGACY_HISTORY).
func (w *pageTx) checkLegacy(ctx context.Context) error {
	var t, e, o bool
	err := w.tx.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM trades WHERE scope = $1 AND seq IS NULL),
       EXISTS (SELECT 1 FROM order_events WHERE scope = $1 AND seq IS NULL),
       EXISTS (SELECT 1 FROM orders WHERE scope = $1 AND seq IS NULL)`, w.scope).Scan(&t, &e, &o)
	if err != nil {
		return dbErr("store: legacy check", err)
	}
	if t || e || o {
		return refuse(codes.UnknownLegacyHistory, "scope %q has rows without consensus provenance (trades %v, order_events %v, orders %v)", w.scope, t, e, o)
	}
	return nil
}

func (w *pageTx) load(ctx context.Context) error {
	if _, err := w.tx.Exec(ctx, tempTables, pgx.QueryExecModeSimpleProtocol); err != nil {
		return dbErr("store: temp tables", err)
	}
	accts := make([]string, len(w.p.keys))
	instrs := make([]string, len(w.p.keys))
	for i, k := range w.p.keys {
		accts[i], instrs[i] = k.account, k.instrument
	}
	if _, err := w.tx.Exec(ctx, `INSERT INTO page_keys SELECT * FROM unnest($1::text[], $2::text[])`, accts, instrs); err != nil {
		return dbErr("store: page keys", err)
	}
	// No ANALYZE: the planner sizes never-analyzed temp tables from their
	// actual block count, and the queries over them are shaped (LATERAL per
	// key) so that index probes win regardless.
	return nil
}

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
	rows, err := w.tx.Query(ctx, `
SELECT 'order_events', `+orderCols+` FROM order_events WHERE scope = $1 AND seq > $2 AND seq <= $3
UNION ALL
SELECT 'orders', `+orderCols+` FROM orders WHERE scope = $1 AND seq > $2 AND seq <= $3`, w.scope, w.p.after, w.p.through)
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

// probeOrdersSQL reads, for each page order id, its retained versions in
// [lo, hi] and, when cur, its current orders row; probeCurrentOrdersSQL only
// the current rows (an unprobed slice, page_unprobed.go). LATERAL: one
// primary-key probe each, never a scan of the scope, whatever the
// statistics say (OFFSET 0 or LIMIT keeps the planner from flattening it).
// The current row is probed with LIMIT 1 (see pkProbe).
const (
	probeOrdersSQL = `
SELECT 'order_events', e.* FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS i(id, lo, hi)
  CROSS JOIN LATERAL (SELECT ` + orderCols + ` FROM order_events WHERE scope = $1 AND order_id = i.id AND version BETWEEN i.lo AND i.hi OFFSET 0) e
UNION ALL
SELECT 'orders', o.* FROM unnest($2::text[], $5::bool[]) AS i(id, cur)
  CROSS JOIN LATERAL (SELECT ` + orderCols + ` FROM orders WHERE i.cur AND scope = $1 AND order_id = i.id ` + pkProbe + `) o`
	probeCurrentOrdersSQL = `
SELECT 'orders', o.* FROM unnest($2::text[]) AS i(id)
  CROSS JOIN LATERAL (SELECT ` + orderCols + ` FROM orders WHERE scope = $1 AND order_id = i.id ` + pkProbe + `) o`
)

// orderCols are the order columns compareOrders scans after the table name.
const orderCols = `order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts`

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
	if h := w.currentProbes; h != nil {
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

// posRow is one touched key: its pre-page row, its starting point and result.
type posRow struct {
	k                key
	exists           bool
	pre              position.State
	openQty, openAvg decimal.Decimal
	openProven       bool
	openSeq          *int64
	basisSeq         *int64
	basis            position.State
	final, newBasis  position.State
	changed          bool
	derived          *position.State // the basis row's derived position (NULL: nil)
	deferred         bool            // the slice took derived as the key's fold (derivedHolds)
}

func (r posRow) describe() string { return fmt.Sprintf("%s/%s", r.k.account, r.k.instrument) }
