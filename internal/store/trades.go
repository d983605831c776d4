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
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/position"
)

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

// The statements a repair runs on one trade (internal/reconstore's
// handlers), in its transaction under the projection write lock and the
// fenced lease (WithScopeWrite).

// TradeColumns are every column of trades, in the order its mirror
// projection_trade_quarantine has them.
const TradeColumns = `scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts, booking_status, written_by`

// TradeRowColumns are the columns ScanTradeRow scans, in its order: every
// column but scope and trade_id.
const TradeRowColumns = `trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts, booking_status, written_by`

// TradeRow is one trade row as a repair reads it.
type TradeRow struct {
	TradeSeq                                         int64
	Seq                                              *int64
	Instrument                                       string
	Price, Quantity                                  decimal.Decimal
	BuyOrderID, SellOrderID, BuyAccount, SellAccount string
	TS                                               time.Time
	BookingStatus, WrittenBy                         string
}

// ScanTradeRow scans TradeRowColumns; nil when the row is absent.
func ScanTradeRow(row pgx.Row) (*TradeRow, error) {
	var t TradeRow
	err := row.Scan(&t.TradeSeq, &t.Seq, &t.Instrument, &t.Price, &t.Quantity, &t.BuyOrderID, &t.SellOrderID,
		&t.BuyAccount, &t.SellAccount, &t.TS, &t.BookingStatus, &t.WrittenBy)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// TradeGet reads trade id of scope (nil: absent).
func TradeGet(ctx context.Context, q Querier, scope, id string) (*TradeRow, error) {
	return ScanTradeRow(q.QueryRow(ctx, `SELECT `+TradeRowColumns+`
  FROM trades WHERE scope = $1 AND trade_id = $2`, scope, id))
}

// TradeDelete deletes trade id of scope.
func TradeDelete(ctx context.Context, q Querier, scope, id string) error {
	_, err := q.Exec(ctx, `DELETE FROM trades WHERE scope = $1 AND trade_id = $2`, scope, id)
	return err
}

// TradeValues are a trade's values as a repair carries them: numbers as
// their decimal text, cast by the statement.
type TradeValues struct {
	TradeSeq                                         string
	Seq                                              *int64
	Instrument, Price, Quantity                      string
	BuyOrderID, SellOrderID, BuyAccount, SellAccount string
	TS                                               time.Time
	BookingStatus, WrittenBy                         string
}

// TradeInsert inserts trade id of scope with values v.
func TradeInsert(ctx context.Context, q Querier, scope, id string, v TradeValues) error {
	_, err := q.Exec(ctx, `INSERT INTO trades (`+TradeColumns+`)
VALUES ($1, $2, $3::bigint, $4, $5, $6::numeric, $7::numeric, $8, $9, $10, $11, $12, $13, $14)`,
		scope, id, v.TradeSeq, v.Seq, v.Instrument, v.Price, v.Quantity, v.BuyOrderID, v.SellOrderID,
		v.BuyAccount, v.SellAccount, v.TS, v.BookingStatus, v.WrittenBy)
	return err
}

// TradeRestoreFromQuarantine inserts trade id of scope back exactly as
// projection_trade_quarantine holds it (nothing when it holds none).
func TradeRestoreFromQuarantine(ctx context.Context, q Querier, scope, id string) error {
	_, err := q.Exec(ctx, `INSERT INTO trades (`+TradeColumns+`) SELECT `+TradeColumns+` FROM projection_trade_quarantine WHERE scope = $1 AND trade_id = $2`, scope, id)
	return err
}

// TradeFillsOfKey reads the key's retained BOOKED trade legs, in
// authoritative order (position.Sort): the selection a page derives from.
func TradeFillsOfKey(ctx context.Context, q Querier, scope, account, instrument string) ([]position.Fill, error) {
	rows, err := q.Query(ctx, `
SELECT seq, trade_seq, 0, quantity, price FROM trades
 WHERE scope = $1 AND buy_account = $2 AND instrument = $3 AND seq IS NOT NULL AND booking_status = 'BOOKED'
UNION ALL
SELECT seq, trade_seq, 1, -quantity, price FROM trades
 WHERE scope = $1 AND sell_account = $2 AND instrument = $3 AND seq IS NOT NULL AND booking_status = 'BOOKED'`, scope, account, instrument)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var fills []position.Fill
	for rows.Next() {
		var f position.Fill
		if err := rows.Scan(&f.Seq, &f.TradeSeq, &f.Leg, &f.Quantity, &f.Price); err != nil {
			return nil, err
		}
		fills = append(fills, f)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	position.Sort(fills)
	return fills, nil
}

// The statements reconciliation's detection reads trades with
// (internal/reconstore's provider), in one read-only REPEATABLE READ
// transaction; the caller scans the rows in the columns' order.
const (
	// TradesSnapshotSQL reads every trade of scope $1 in primary-key order.
	TradesSnapshotSQL = `SELECT trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id,
       buy_account, sell_account, ts, booking_status, written_by
  FROM trades WHERE scope = $1 ORDER BY trade_id`
	// HistoryCountsSQL counts the rows of scope $1 in trades, orders and
	// order_events, in the snapshot the rows are then read in.
	HistoryCountsSQL = `SELECT (SELECT count(*) FROM trades WHERE scope = $1),
       (SELECT count(*) FROM orders WHERE scope = $1),
       (SELECT count(*) FROM order_events WHERE scope = $1)`

	// HistoryTradeColumns are the columns of every trades history statement.
	HistoryTradeColumns = `trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id,
       buy_account, sell_account, ts, booking_status, written_by`
	// TradesHistorySQL declares the cursor recon_trades over scope $1's
	// trades with a seq, in (seq, trade_id) order; TradesHistoryFetchSQL
	// fetches HistoryFetchBatch rows of it.
	TradesHistorySQL = `DECLARE recon_trades NO SCROLL CURSOR WITH HOLD FOR SELECT ` + HistoryTradeColumns + `
  FROM trades WHERE scope = $1 AND seq IS NOT NULL ORDER BY seq, trade_id`
	TradesHistoryFetchSQL = `FETCH FORWARD 4096 FROM recon_trades`
	// TradesLegacySQL reads at most $2 trades of scope $1 without a seq.
	TradesLegacySQL = `SELECT ` + HistoryTradeColumns + ` FROM trades WHERE scope = $1 AND seq IS NULL ORDER BY trade_id LIMIT $2`
	// TradeDuplicateIDsSQL lists at most $2 trade ids held by several rows
	// (the primary key was lost); TradeDuplicateSeqSQL the first row of every
	// id of a trade_seq held by several rows.
	TradeDuplicateIDsSQL = `SELECT trade_id FROM trades WHERE scope = $1 GROUP BY trade_id HAVING count(*) > 1 ORDER BY trade_id LIMIT $2`
	TradeDuplicateSeqSQL = `SELECT DISTINCT ON (trade_id) ` + HistoryTradeColumns + ` FROM trades
 WHERE scope = $1 AND trade_seq IN (SELECT trade_seq FROM trades WHERE scope = $1 GROUP BY trade_seq HAVING count(*) > 1)
 ORDER BY trade_id LIMIT $2`
	// TradesByIDSQL reads the trades $2 of scope $1 re-sequenced past $3.
	TradesByIDSQL = `SELECT ` + HistoryTradeColumns + ` FROM trades WHERE scope = $1 AND trade_id = ANY($2) AND seq > $3 ORDER BY trade_id`
)

// HistoryFetchBatch is the rows one FETCH of a history cursor returns.
const HistoryFetchBatch = 4096

// HistoryCloseSQL closes the history cursors. They are WITH HOLD: a paced
// reader commits their transaction and reads on (reconstore), and a held
// cursor lives until closed or its session ends.
const HistoryCloseSQL = `CLOSE ALL`
