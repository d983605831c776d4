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
	"strings"

	"github.com/projection-recovery/projection-recovery/internal/codes"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/position"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// pageTx is the data half of one page transaction (after lock, lease, run and
// cursor checks). Everything is set-based, never one statement per row: page
// trades, keys and derived positions go into temporary tables by COPY and each
// check or write is one statement over them; retained order versions are read
// by a few indexed probes and compared in Go, and the missing ones are COPYed.
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
	newer         int64 // retained legs newer than the page folded into its keys (R1)
	noDefer       bool  // every key is folded in full: a flush slice, or one that makes the scope CURRENT (deferred.go)
	deferred      int   // keys whose derivation the slice deferred (deferFold)
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
CREATE TEMP TABLE IF NOT EXISTS page_trades (trade_id text, trade_seq bigint, seq bigint, instrument text, price numeric, quantity numeric,
    buy_order_id text, sell_order_id text, buy_account text, sell_account text, ts timestamptz) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS page_keys (account text, instrument text) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS page_positions (account text, instrument text, quantity numeric, avg_cost numeric,
    opening_quantity numeric, opening_avg_cost numeric, opening_proven boolean, opening_seq bigint,
    basis_quantity numeric, basis_avg_cost numeric, changed boolean, deferred boolean) ON COMMIT DELETE ROWS;
SET LOCAL plan_cache_mode = force_custom_plan;
SET LOCAL jit = off;`

// The COPY statements of the page path, with their columns in the order
// copyBuf writes them (copyPageTrades, copyOrderEvents, writeOrders,
// copyMissingTrades, copyPagePositions).
const (
	copyPageTradesSQL = `COPY page_trades (trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id,
    buy_account, sell_account, ts) FROM STDIN (FORMAT binary)`
	copyOrderEventsSQL = `COPY order_events (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining,
    status, ts) FROM STDIN (FORMAT binary)`
	copyOrdersSQL = `COPY orders (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining,
    status, ts) FROM STDIN (FORMAT binary)`
	copyTradesSQL = `COPY trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id,
    buy_account, sell_account, ts, booking_status, written_by) FROM STDIN (FORMAT binary)`
	copyPagePositionsSQL = `COPY page_positions (account, instrument, quantity, avg_cost, opening_quantity, opening_avg_cost,
    opening_proven, opening_seq, basis_quantity, basis_avg_cost, changed, deferred) FROM STDIN (FORMAT binary)`
)

// copyPageTrades streams the slice's trades into page_trades.
func (w *pageTx) copyPageTrades(ctx context.Context) error {
	c := getCopyBuf(11)
	defer putCopyBuf(c)
	for _, t := range w.p.trades {
		c.row()
		c.trade(t)
	}
	_, err := c.send(ctx, w.tx, copyPageTradesSQL)
	return err
}

// copyOrderEvents inserts the order versions checkOrders found missing.
func (w *pageTx) copyOrderEvents(ctx context.Context) (int64, error) {
	c := getCopyBuf(12)
	defer putCopyBuf(c)
	for _, o := range w.missingOrders {
		c.row()
		c.order(w.scope, o)
	}
	return c.send(ctx, w.tx, copyOrderEventsSQL)
}

// trade writes the columns a trade row shares with page_trades, from
// trade_id to ts (copyPageTradesSQL and copyTradesSQL name them in this
// order).
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
	if err := w.copyPageTrades(ctx); err != nil {
		return dbErr("store: copy page trades", err)
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
	// actual block count, and the queries over them are shaped (anti-join on
	// trade_id, LATERAL per key) so that index probes win regardless.
	return nil
}

// orphanTradesSQL lists up to five retained trades of the window that the
// page does not hold, for the refusal's detail. It runs only once a count
// has shown that there are some (checkTrades): as an anti-join against the
// unindexed page_trades, the planner chose a nested loop whenever it
// expected few rows (a LIMIT in sight, or no statistics on trades yet), and
// compared every retained trade of the window with every page trade: ~40 ms
// a page of 10,000 events whose window is retained (after a cursor reset, or
// behind a live feed that lost little), 250 ms at 2,500 trades.
const orphanTradesSQL = `
SELECT o.trade_id || '@' || o.seq FROM (
    SELECT t.trade_id, t.seq, t.trade_seq FROM trades t
     WHERE t.scope = $1 AND t.seq > $2 AND t.seq <= $3
       AND NOT EXISTS (SELECT 1 FROM page_trades p WHERE p.trade_id = t.trade_id)
    OFFSET 0) o
 ORDER BY o.seq, o.trade_seq LIMIT 5`

// checkTrades compares every page trade with its retained row, if any
// (provenance, immutable content, booking), and refuses orphans: retained
// trades positioned in the window that the page does not hold. An orphan is
// found by counting, not by joining: the page trades found retained at a
// seq inside the window are retained trades of the window (trade_id is the
// key, and the page holds each trade_id once: prepare refuses a repeat, which
// would otherwise be counted twice and could hide an orphan), so the window
// holds an orphan exactly when it holds more retained trades than that. One indexed count of the window, linear whatever the
// planner knows; orphanTradesSQL names them only then. ORPHAN_TRADE takes
// precedence over what the comparison found, as it always has.
func (w *pageTx) checkTrades(ctx context.Context) error {
	// LATERAL ... OFFSET 0: one primary-key probe per page trade. OFFSET 0
	// keeps the planner from pulling the subquery up into a plain join, which
	// stale statistics during a bulk catch-up turned into a hash of ALL the
	// scope's trades on every page (O(table) per page, quadratic overall).
	rows, err := w.tx.Query(ctx, `
SELECT p.trade_id, p.seq, t.seq, t.booking_status,
       (t.trade_seq = p.trade_seq AND t.instrument = p.instrument AND t.price = p.price AND t.quantity = p.quantity
        AND t.buy_order_id = p.buy_order_id AND t.sell_order_id = p.sell_order_id AND t.buy_account = p.buy_account
        AND t.sell_account = p.sell_account AND t.ts = p.ts)
  FROM page_trades p
  CROSS JOIN LATERAL (SELECT * FROM trades t WHERE t.scope = $1 AND t.trade_id = p.trade_id OFFSET 0) t
 ORDER BY p.seq, p.trade_seq`, w.scope)
	if err != nil {
		return dbErr("store: retained page trades", err)
	}
	defer rows.Close()
	w.existing = map[string]bool{}
	var firstErr error
	var inWindow int64 // page trades retained at a seq inside the window
	for rows.Next() {
		var id, status string
		var srcSeq int64
		var rowSeq *int64
		var same bool
		if err := rows.Scan(&id, &srcSeq, &rowSeq, &status, &same); err != nil {
			return dbErr("store: scan retained trade", err)
		}
		w.existing[id] = true
		if rowSeq != nil && *rowSeq > w.p.after && *rowSeq <= w.p.through {
			inWindow++
		}
		if firstErr != nil {
			continue
		}
		switch {
		case rowSeq == nil:
			firstErr = refuse(codes.UnknownLegacyHistory, "trade %s has no consensus seq", id)
		case *rowSeq != srcSeq:
			firstErr = refuse(codes.TradeProvenanceConflict, "trade %s retained at seq %d, source seq %d", id, *rowSeq, srcSeq)
		case !same:
			firstErr = refuse(codes.ImmutableTradeConflict, "trade %s at seq %d differs from its source event", id, srcSeq)
		case status != "BOOKED":
			firstErr = refuse(codes.RejectedBooking, "trade %s at seq %d is retained with booking status %s", id, srcSeq, status)
		}
	}
	if err := rows.Err(); err != nil {
		return dbErr("store: retained page trades", err)
	}
	rows.Close()
	var retained int64
	if err := w.tx.QueryRow(ctx, `SELECT count(*) FROM trades WHERE scope = $1 AND seq > $2 AND seq <= $3`,
		w.scope, w.p.after, w.p.through).Scan(&retained); err != nil {
		return dbErr("store: count retained trades", err)
	}
	if retained > inWindow {
		rows, err := w.tx.Query(ctx, orphanTradesSQL, w.scope, w.p.after, w.p.through)
		if err != nil {
			return dbErr("store: orphan trades", err)
		}
		orphans, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return dbErr("store: orphan trades", err)
		}
		return refuse(codes.OrphanTrade, "%d retained trades in (%d, %d], %d of them in the source; absent from the source: %s",
			retained, w.p.after, w.p.through, inWindow, strings.Join(orphans, ", "))
	}
	return firstErr
}

// checkOrders: every retained order row positioned in the window (order_events
// versions and current orders rows) must be the SQL representation of its
// source event: same seq (else ORDER_PROVENANCE_CONFLICT), same content with
// timestamps compared at microseconds (else ORDER_ROW_MISMATCH), and present
// in the source (else ORPHAN_ORDER). A retained version of a page order
// outside the window is a provenance conflict too. The retained rows are
// read with two indexed queries (by the page's order ids, and by the window)
// and compared here; w.missingOrders collects the versions to insert.
func (w *pageTx) checkOrders(ctx context.Context) error {
	// Each page order id once, with the lowest and highest of its versions
	// in the page: every page version is in that range (versions follow
	// their seqs, so it usually holds nothing else; another version in it
	// is handled as any version outside the page: skipped unless the window
	// holds it).
	ids := make([]string, 0, len(w.p.orders))
	lo := make([]int64, 0, len(w.p.orders))
	hi := make([]int64, 0, len(w.p.orders))
	at := make(map[string]int, len(w.p.orders))
	for _, o := range w.p.orders {
		i, ok := at[o.OrderID]
		if !ok {
			at[o.OrderID] = len(ids)
			ids, lo, hi = append(ids, o.OrderID), append(lo, o.Version), append(hi, o.Version)
			continue
		}
		lo[i], hi[i] = min(lo[i], o.Version), max(hi[i], o.Version)
	}
	// Indexed probes only (a row may come twice; processing is idempotent):
	// the page's order versions (each order's range of them) and current
	// order rows through their primary keys (LATERAL ... OFFSET 0, so stale statistics cannot turn
	// them into a scan of the scope), and the window through the (scope,
	// seq) indexes. Only the page's own versions are probed, not every
	// version of a page order: another version is checked against its
	// source by the page whose window holds it (and is returned by the
	// window query when that is this page), a version without a seq is
	// refused scope-wide by checkLegacy, so reading them here decided
	// nothing and cost a probe of each page order's whole history.
	const cols = `order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts`
	rows, err := w.tx.Query(ctx, `
SELECT 'order_events', e.* FROM unnest($2::text[], $5::bigint[], $6::bigint[]) AS i(id, lo, hi)
  CROSS JOIN LATERAL (SELECT `+cols+` FROM order_events WHERE scope = $1 AND order_id = i.id AND version BETWEEN i.lo AND i.hi OFFSET 0) e
UNION ALL
SELECT 'order_events', `+cols+` FROM order_events WHERE scope = $1 AND seq > $3 AND seq <= $4
UNION ALL
SELECT 'orders', o.* FROM unnest($2::text[]) AS i(id)
  CROSS JOIN LATERAL (SELECT `+cols+` FROM orders WHERE scope = $1 AND order_id = i.id OFFSET 0) o
UNION ALL
SELECT 'orders', `+cols+` FROM orders WHERE scope = $1 AND seq > $3 AND seq <= $4`, w.scope, ids, w.p.after, w.p.through, lo, hi)
	if err != nil {
		return dbErr("store: retained orders", err)
	}
	defer rows.Close()
	retained := map[orderKey]bool{}
	w.orderRows = make(map[string]int64, len(ids))
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
	if first != nil {
		return first
	}
	w.missingOrders = make([]*wire.Order, 0, len(w.p.orders)-len(retained))
	for _, o := range w.p.orders {
		if !retained[orderKey{o.OrderID, o.Version}] {
			w.missingOrders = append(w.missingOrders, o)
		}
	}
	return nil
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
