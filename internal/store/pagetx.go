package store

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/position"
)

// pageTx is the data half of one page transaction (after lock, lease, run and
// cursor checks). All statements are set-based: the page rows go into
// temporary tables by COPY and every check or write is one statement over
// them, never one statement per row.
type pageTx struct {
	tx    pgx.Tx
	scope string
	p     *prepared

	existing    map[string]bool // page trade ids already retained
	rows        []posRow
	inserted    int64
	orderEvents int64
	changed     int
}

const tempTables = `
CREATE TEMP TABLE page_trades (trade_id text, trade_seq bigint, seq bigint, instrument text, price numeric, quantity numeric,
    buy_order_id text, sell_order_id text, buy_account text, sell_account text, ts timestamptz) ON COMMIT DROP;
CREATE TEMP TABLE page_orders (order_id text, version bigint, seq bigint, account text, instrument text, side text,
    price numeric, quantity numeric, remaining numeric, status text, ts timestamptz) ON COMMIT DROP;
CREATE TEMP TABLE page_keys (account text, instrument text) ON COMMIT DROP;
CREATE TEMP TABLE page_positions (account text, instrument text, quantity numeric, avg_cost numeric,
    opening_quantity numeric, opening_avg_cost numeric, opening_proven boolean, opening_seq bigint,
    basis_quantity numeric, basis_avg_cost numeric, changed boolean) ON COMMIT DROP;`

var (
	tradeCols = []string{"trade_id", "trade_seq", "seq", "instrument", "price", "quantity", "buy_order_id", "sell_order_id", "buy_account", "sell_account", "ts"}
	orderCols = []string{"order_id", "version", "seq", "account", "instrument", "side", "price", "quantity", "remaining", "status", "ts"}
)

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
		return refuse(CodeUnknownLegacyHistory, "scope %q has rows without consensus provenance (trades %v, order_events %v, orders %v)", w.scope, t, e, o)
	}
	return nil
}

func (w *pageTx) load(ctx context.Context) error {
	if _, err := w.tx.Exec(ctx, tempTables, pgx.QueryExecModeSimpleProtocol); err != nil {
		return dbErr("store: temp tables", err)
	}
	if _, err := w.tx.CopyFrom(ctx, pgx.Identifier{"page_trades"}, tradeCols, pgx.CopyFromRows(w.p.trades)); err != nil {
		return dbErr("store: copy page trades", err)
	}
	if _, err := w.tx.CopyFrom(ctx, pgx.Identifier{"page_orders"}, orderCols, pgx.CopyFromRows(w.p.orders)); err != nil {
		return dbErr("store: copy page orders", err)
	}
	keys := make([][]any, len(w.p.keys))
	for i, k := range w.p.keys {
		keys[i] = []any{k.account, k.instrument}
	}
	if _, err := w.tx.CopyFrom(ctx, pgx.Identifier{"page_keys"}, []string{"account", "instrument"}, pgx.CopyFromRows(keys)); err != nil {
		return dbErr("store: copy page keys", err)
	}
	// Statistics for the planner: without them it guesses the temp tables'
	// size and may choose sequential scans over the base tables.
	if _, err := w.tx.Exec(ctx, `ANALYZE page_trades, page_orders, page_keys`); err != nil {
		return dbErr("store: analyze page tables", err)
	}
	return nil
}

// checkTrades: in the window (A, T'] the retained trades must be exactly the
// source trades. Refuses ORPHAN_TRADE (retained, positioned in the window,
// absent from the source), TRADE_PROVENANCE_CONFLICT (same id, other seq),
// IMMUTABLE_TRADE_CONFLICT (same id and seq, other content; timestamps at
// microseconds) and REJECTED_BOOKING (a source trade retained as not BOOKED).
func (w *pageTx) checkTrades(ctx context.Context) error {
	var orphans []string
	rows, err := w.tx.Query(ctx, `
SELECT t.trade_id || '@' || t.seq FROM trades t
 WHERE t.scope = $1 AND t.seq > $2 AND t.seq <= $3
   AND NOT EXISTS (SELECT 1 FROM page_trades p WHERE p.trade_id = t.trade_id)
 ORDER BY t.seq, t.trade_seq LIMIT 5`, w.scope, w.p.after, w.p.through)
	if err != nil {
		return dbErr("store: orphan trades", err)
	}
	if orphans, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return dbErr("store: orphan trades", err)
	}
	if len(orphans) > 0 {
		return refuse(CodeOrphanTrade, "retained trades in (%d, %d] absent from the source: %s", w.p.after, w.p.through, strings.Join(orphans, ", "))
	}
	rows, err = w.tx.Query(ctx, `
SELECT p.trade_id, p.seq, t.seq, t.booking_status,
       (t.trade_seq = p.trade_seq AND t.instrument = p.instrument AND t.price = p.price AND t.quantity = p.quantity
        AND t.buy_order_id = p.buy_order_id AND t.sell_order_id = p.sell_order_id AND t.buy_account = p.buy_account
        AND t.sell_account = p.sell_account AND t.ts = p.ts)
  FROM page_trades p JOIN trades t ON t.scope = $1 AND t.trade_id = p.trade_id
 ORDER BY p.seq, p.trade_seq`, w.scope)
	if err != nil {
		return dbErr("store: retained page trades", err)
	}
	defer rows.Close()
	w.existing = map[string]bool{}
	var firstErr error
	for rows.Next() {
		var id, status string
		var srcSeq int64
		var rowSeq *int64
		var same bool
		if err := rows.Scan(&id, &srcSeq, &rowSeq, &status, &same); err != nil {
			return dbErr("store: scan retained trade", err)
		}
		w.existing[id] = true
		if firstErr != nil {
			continue
		}
		switch {
		case rowSeq == nil:
			firstErr = refuse(CodeUnknownLegacyHistory, "trade %s has no consensus seq", id)
		case *rowSeq != srcSeq:
			firstErr = refuse(CodeTradeProvenanceConflict, "trade %s retained at seq %d, source seq %d", id, *rowSeq, srcSeq)
		case !same:
			firstErr = refuse(CodeImmutableTradeConflict, "trade %s at seq %d differs from its source event", id, srcSeq)
		case status != "BOOKED":
			firstErr = refuse(CodeRejectedBooking, "trade %s at seq %d is retained with booking status %s", id, srcSeq, status)
		}
	}
	if err := rows.Err(); err != nil {
		return dbErr("store: retained page trades", err)
	}
	return firstErr
}

// checkOrders: every retained order row positioned in the window (order_events
// versions and current orders rows) must be the SQL representation of its
// source event: same seq (else ORDER_PROVENANCE_CONFLICT), same content with
// timestamps compared at microseconds (else ORDER_ROW_MISMATCH), and present
// in the source (else ORPHAN_ORDER).
func (w *pageTx) checkOrders(ctx context.Context) error {
	rows, err := w.tx.Query(ctx, `
SELECT x.order_id || ' v' || x.version || '@' || x.seq FROM (
    SELECT order_id, version, seq FROM order_events WHERE scope = $1 AND seq > $2 AND seq <= $3
    UNION ALL
    SELECT order_id, version, seq FROM orders WHERE scope = $1 AND seq > $2 AND seq <= $3) x
 WHERE NOT EXISTS (SELECT 1 FROM page_orders p WHERE p.order_id = x.order_id AND p.version = x.version)
 ORDER BY x.seq LIMIT 5`, w.scope, w.p.after, w.p.through)
	if err != nil {
		return dbErr("store: orphan orders", err)
	}
	orphans, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return dbErr("store: orphan orders", err)
	}
	if len(orphans) > 0 {
		return refuse(CodeOrphanOrder, "retained order rows in (%d, %d] absent from the source: %s", w.p.after, w.p.through, strings.Join(orphans, ", "))
	}
	const same = `r.account = p.account AND r.instrument = p.instrument AND r.side = p.side AND r.price = p.price
        AND r.quantity = p.quantity AND r.remaining = p.remaining AND r.status = p.status AND r.ts = p.ts`
	rows, err = w.tx.Query(ctx, `
SELECT 'order_events', p.order_id, p.version, p.seq, r.seq, (`+same+`)
  FROM page_orders p JOIN order_events r ON r.scope = $1 AND r.order_id = p.order_id AND r.version = p.version
UNION ALL
SELECT 'orders', p.order_id, p.version, p.seq, r.seq, (`+same+`)
  FROM page_orders p JOIN orders r ON r.scope = $1 AND r.order_id = p.order_id AND r.version = p.version`, w.scope)
	if err != nil {
		return dbErr("store: retained page orders", err)
	}
	defer rows.Close()
	for rows.Next() {
		var table, id string
		var version, srcSeq int64
		var rowSeq *int64
		var ok bool
		if err := rows.Scan(&table, &id, &version, &srcSeq, &rowSeq, &ok); err != nil {
			return dbErr("store: scan retained order", err)
		}
		switch {
		case rowSeq == nil:
			return refuse(CodeUnknownLegacyHistory, "%s row %s v%d has no consensus seq", table, id, version)
		case *rowSeq != srcSeq:
			return refuse(CodeOrderProvenanceConflict, "%s row %s v%d retained at seq %d, source seq %d", table, id, version, *rowSeq, srcSeq)
		case !ok:
			return refuse(CodeOrderRowMismatch, "%s row %s v%d at seq %d differs from its source event", table, id, version, srcSeq)
		}
	}
	if err := rows.Err(); err != nil {
		return dbErr("store: retained page orders", err)
	}
	return nil
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
}

func (r posRow) describe() string { return fmt.Sprintf("%s/%s", r.k.account, r.k.instrument) }

// sortFills puts fills in authoritative order (seq, tradeSeq, leg).
func sortFills(f []fillRow) {
	sort.Slice(f, func(i, j int) bool {
		a, b := f[i], f[j]
		if a.seq != b.seq {
			return a.seq < b.seq
		}
		if a.tradeSeq != b.tradeSeq {
			return a.tradeSeq < b.tradeSeq
		}
		return a.leg < b.leg
	})
}
