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
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"
)

// This file holds the statements of internal/store on orders (each order's
// current row) and order_events (every version), the trade-processor's order
// tables: a page compares the retained rows of its window and probes the rest
// (page_orders_check.go), COPYs the missing versions and moves current rows
// forward, never back (writeOrders).

// The COPY statements of the order tables, their columns in the order
// copyBuf.order writes them.
const (
	copyOrderEventsSQL = `COPY order_events (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining,
    status, ts) FROM STDIN (FORMAT binary)`
	copyOrdersSQL = `COPY orders (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining,
    status, ts) FROM STDIN (FORMAT binary)`
)

// windowOrdersSQL reads every retained order row positioned in the window,
// from both tables, each row after its table's name (compareOrders).
const windowOrdersSQL = `
SELECT 'order_events', ` + orderCols + ` FROM order_events WHERE scope = $1 AND seq > $2 AND seq <= $3
UNION ALL
SELECT 'orders', ` + orderCols + ` FROM orders WHERE scope = $1 AND seq > $2 AND seq <= $3`

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

// ordersBeyondSQL reports whether an orders row of the scope lies beyond the
// slice's window (withoutBornHere).
const ordersBeyondSQL = `SELECT EXISTS (SELECT 1 FROM orders WHERE scope = $1 AND seq > $2)`

// ordersForwardSQL moves the current row of each order ($2 ids) to the
// version $3 from its order_events row, only forward (writeOrders).
const ordersForwardSQL = `
INSERT INTO orders AS o (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts)
SELECT e.scope, e.order_id, e.version, e.seq, e.account, e.instrument, e.side, e.price, e.quantity, e.remaining, e.status, e.ts
  FROM unnest($2::text[], $3::bigint[]) AS u(id, version)
 CROSS JOIN LATERAL (SELECT * FROM order_events e WHERE e.scope = $1 AND e.order_id = u.id AND e.version = u.version ` + pkProbe + `) e
ON CONFLICT (scope, order_id) DO UPDATE SET
    version = EXCLUDED.version, seq = EXCLUDED.seq, account = EXCLUDED.account, instrument = EXCLUDED.instrument,
    side = EXCLUDED.side, price = EXCLUDED.price, quantity = EXCLUDED.quantity, remaining = EXCLUDED.remaining,
    status = EXCLUDED.status, ts = EXCLUDED.ts
WHERE o.version < EXCLUDED.version`

// The statements a repair runs on one order row (internal/reconstore's
// handlers), in its transaction under the projection write lock and the
// fenced lease (WithScopeWrite).

// OrderRef names one order row: orders by order_id (the current version),
// order_events by (order_id, version).
type OrderRef struct {
	Table          string // "orders" or "order_events"
	Scope, OrderID string
	Version        string // order_events only
}

// from returns the row's table, quoted, and its WHERE clause and arguments.
func (r OrderRef) from() (string, string, []any, error) {
	switch r.Table {
	case "orders":
		return pgx.Identifier{r.Table}.Sanitize(), ` WHERE scope = $1 AND order_id = $2`, []any{r.Scope, r.OrderID}, nil
	case "order_events":
		return pgx.Identifier{r.Table}.Sanitize(), ` WHERE scope = $1 AND order_id = $2 AND version = $3::bigint`, []any{r.Scope, r.OrderID, r.Version}, nil
	}
	return "", "", nil, fmt.Errorf("store: %q is not an order table", r.Table)
}

// OrderRow is one order row as a repair reads it.
type OrderRow struct {
	Version                    int64
	Seq                        *int64
	Account, Instrument, Side  string
	Price, Quantity, Remaining decimal.Decimal
	Status                     string
	TS                         time.Time
}

// OrderGet reads the row r names (nil: absent).
func OrderGet(ctx context.Context, q Querier, r OrderRef) (*OrderRow, error) {
	table, where, args, err := r.from()
	if err != nil {
		return nil, err
	}
	var o OrderRow
	err = q.QueryRow(ctx, `SELECT version, seq, account, instrument, side, price, quantity, remaining, status, ts FROM `+
		table+where, args...).Scan(&o.Version, &o.Seq, &o.Account, &o.Instrument, &o.Side, &o.Price, &o.Quantity, &o.Remaining, &o.Status, &o.TS)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// OrderDelete deletes the row r names.
func OrderDelete(ctx context.Context, q Querier, r OrderRef) error {
	table, where, args, err := r.from()
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `DELETE FROM `+table+where, args...)
	return err
}

// OrderValues are an order row's values as a repair carries them: numbers
// as their decimal text, cast by the statement.
type OrderValues struct {
	Version                                               string
	Seq                                                   *int64
	Account, Instrument, Side, Price, Quantity, Remaining string
	Status                                                string
	TS                                                    time.Time
}

// OrderUpsert makes the row r names hold v: an upsert, not DELETE + INSERT
// (the recovery role has no DELETE on the trade-processor's tables). A
// numeric value the row holds already keeps its stored scale (KeepScale).
// For orders v may carry another version than the row (a rewound current row).
func OrderUpsert(ctx context.Context, q Querier, r OrderRef, v OrderValues) error {
	table, _, _, err := r.from()
	if err != nil {
		return err
	}
	conflict := `(scope, order_id)`
	if r.Table == "order_events" {
		conflict = `(scope, order_id, version)`
	}
	_, err = q.Exec(ctx, `INSERT INTO `+table+` (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts)
VALUES ($1, $2, $3::bigint, $4, $5, $6, $7, $8::numeric, $9::numeric, $10::numeric, $11, $12)
ON CONFLICT `+conflict+` DO UPDATE SET version = EXCLUDED.version, seq = EXCLUDED.seq, account = EXCLUDED.account,
    instrument = EXCLUDED.instrument, side = EXCLUDED.side, status = EXCLUDED.status, ts = EXCLUDED.ts,
    `+KeepScale(r.Table, "price", "quantity", "remaining"),
		r.Scope, r.OrderID, v.Version, v.Seq, v.Account, v.Instrument, v.Side, v.Price, v.Quantity, v.Remaining, v.Status, v.TS)
	return err
}

// The statements reconciliation's detection reads orders and order_events
// with (internal/reconstore's provider), in one read-only REPEATABLE READ
// transaction; the caller scans the rows in the columns' order.
const (
	// OrdersSnapshotSQL and OrderEventsSnapshotSQL read every row of scope
	// $1 in primary-key order.
	OrdersSnapshotSQL = `SELECT order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts
  FROM orders WHERE scope = $1 ORDER BY order_id`
	OrderEventsSnapshotSQL = `SELECT order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts
  FROM order_events WHERE scope = $1 ORDER BY order_id, version`

	// HistoryOrderColumns are the columns of every order history statement.
	HistoryOrderColumns = `order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts`
	// OrderEventsHistorySQL and OrdersHistorySQL declare the cursors
	// recon_order_events and recon_orders over scope $1's rows with a seq,
	// in seq order; the Fetch statements fetch HistoryFetchBatch rows.
	OrderEventsHistorySQL = `DECLARE recon_order_events NO SCROLL CURSOR WITH HOLD FOR SELECT ` + HistoryOrderColumns + `
  FROM order_events WHERE scope = $1 AND seq IS NOT NULL ORDER BY seq, order_id, version`
	OrdersHistorySQL = `DECLARE recon_orders NO SCROLL CURSOR WITH HOLD FOR SELECT ` + HistoryOrderColumns + `
  FROM orders WHERE scope = $1 AND seq IS NOT NULL ORDER BY seq, order_id`
	OrderEventsHistoryFetchSQL = `FETCH FORWARD 4096 FROM recon_order_events`
	OrdersHistoryFetchSQL      = `FETCH FORWARD 4096 FROM recon_orders`
	// OrderEventsLegacySQL and OrdersLegacySQL read at most $2 rows of scope
	// $1 without a seq.
	OrderEventsLegacySQL = `SELECT ` + HistoryOrderColumns + ` FROM order_events WHERE scope = $1 AND seq IS NULL ORDER BY order_id, version LIMIT $2`
	OrdersLegacySQL      = `SELECT ` + HistoryOrderColumns + ` FROM orders WHERE scope = $1 AND seq IS NULL ORDER BY order_id LIMIT $2`
	// CurrentOrdersSQL lists every current row's (order_id, version).
	CurrentOrdersSQL = `SELECT order_id, version FROM orders WHERE scope = $1`
	// OrderEventsByKeySQL reads the versions ($2 ids, $3 versions) of scope
	// $1 re-sequenced past $4; OrdersByIDSQL the current rows $2 with a seq.
	OrderEventsByKeySQL = `SELECT ` + HistoryOrderColumns + ` FROM order_events
 WHERE scope = $1 AND (order_id, version) IN (SELECT * FROM unnest($2::text[], $3::bigint[])) AND seq > $4 ORDER BY order_id, version`
	OrdersByIDSQL = `SELECT ` + HistoryOrderColumns + ` FROM orders WHERE scope = $1 AND order_id = ANY($2) AND seq IS NOT NULL ORDER BY order_id`
)
