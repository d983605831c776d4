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
