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

// This file holds the statements of internal/store on trades, the
// trade-processor's table of booked trades: a page reads the retained rows of
// its window and probes the rest (page_trades_check.go), reads the retained
// legs of its keys (derive, readLegs), refuses rows without a seq
// (checkLegacy) and COPYs the trades the live feed lost.

// copyTradesSQL inserts a slice's missing trades, its columns in the order
// encodeMissingTrades writes them.
const copyTradesSQL = `COPY trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id,
    buy_account, sell_account, ts, booking_status, written_by) FROM STDIN (FORMAT binary)`

// windowTradesSQL reads every retained trade positioned in the window, in
// authoritative order, for checkTrades to compare in Go. A plain range scan
// of trades_scope_seq: nothing for the planner to turn into a join.
const windowTradesSQL = `
SELECT trade_id, seq, trade_seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts, booking_status
  FROM trades WHERE scope = $1 AND seq > $2 AND seq <= $3
 ORDER BY seq, trade_seq`

// probeTradesSQL reads the retained rows of the page trades the window did
// not show, one primary-key probe each (LATERAL: never a scan of the scope,
// whatever the statistics say; LIMIT 1, see pkProbe).
const probeTradesSQL = `
SELECT t.trade_id, t.seq, t.trade_seq, t.instrument, t.price, t.quantity, t.buy_order_id, t.sell_order_id, t.buy_account,
       t.sell_account, t.ts, t.booking_status
  FROM unnest($2::text[]) AS i(id)
  CROSS JOIN LATERAL (SELECT * FROM trades t WHERE t.scope = $1 AND t.trade_id = i.id ` + pkProbe + `) t`

// pkProbe: every LATERAL probe of a whole primary key (trades by trade_id,
// orders by order_id, order_events by order_id and version) ends in LIMIT 1.
// The key is unique, so the limit changes no result; it makes the planner
// probe with a plain index scan even when statistics lag a bulk catch-up
// (docs/design/page-transaction.md, "Planner and driver guards").
const pkProbe = "LIMIT 1"

// legacyRowsSQL reports whether trades, order_events and orders of the scope
// hold rows without a consensus seq (checkLegacy): one statement over the
// three history tables.
const legacyRowsSQL = `
SELECT EXISTS (SELECT 1 FROM trades WHERE scope = $1 AND seq IS NULL),
       EXISTS (SELECT 1 FROM order_events WHERE scope = $1 AND seq IS NULL),
       EXISTS (SELECT 1 FROM orders WHERE scope = $1 AND seq IS NULL)`

// retainedLegsSQL reads the retained BOOKED legs of the keys ($2 accounts,
// $3 instruments) after each key's basis (readLegs). LATERAL forces one
// index range probe per key (trades_buy_key / trades_sell_key).
const retainedLegsSQL = `
SELECT k.account, k.instrument, t.seq, t.trade_seq, t.leg, t.quantity, t.price
  FROM unnest($2::text[], $3::text[]) AS k(account, instrument)
  LEFT JOIN projection_catchup_basis b ON b.scope = $1 AND b.account = k.account AND b.instrument = k.instrument
  CROSS JOIN LATERAL (
      SELECT seq, trade_seq, 0 AS leg, quantity, price FROM trades
       WHERE scope = $1 AND buy_account = k.account AND instrument = k.instrument
         AND seq > coalesce(b.basis_seq, 0) AND booking_status = 'BOOKED'
      UNION ALL
      SELECT seq, trade_seq, 1 AS leg, -quantity, price FROM trades
       WHERE scope = $1 AND sell_account = k.account AND instrument = k.instrument
         AND seq > coalesce(b.basis_seq, 0) AND booking_status = 'BOOKED') t`
