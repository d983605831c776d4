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

package storetest

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// CompareTrades compares the scope's trades table with the source's trade
// events: every source trade stored exactly once (the primary key makes a
// second row under the same id impossible, so a trade stored twice shows as
// two rows with one engine-wide trade sequence), with its consensus seq, engine
// trade sequence, instrument, amounts, orders, accounts and timestamp (to the
// microsecond the column keeps); no row the source does not hold. It returns
// the number of SQL rows and one line per difference.
func CompareTrades(ctx context.Context, pool *pgxpool.Pool, scope string, evs []wire.Event) (rows int, diffs []string, err error) {
	want := map[string]*wire.Trade{}
	for _, e := range evs {
		if e.Trade != nil {
			want[e.Trade.TradeID] = e.Trade
		}
	}
	r, err := pool.Query(ctx, `SELECT trade_id, trade_seq, seq, instrument, price::text, quantity::text, buy_order_id, sell_order_id,
       buy_account, sell_account, ts FROM trades WHERE scope = $1`, scope)
	if err != nil {
		return 0, nil, err
	}
	defer r.Close()
	seen := map[string]bool{}
	byTradeSeq := map[int64]string{}
	for r.Next() {
		var got wire.Trade
		var seq *int64
		var px, qty string
		if err := r.Scan(&got.TradeID, &got.TradeSeq, &seq, &got.Instrument, &px, &qty, &got.BuyOrderID, &got.SellOrderID,
			&got.BuyAccount, &got.SellAccount, &got.TS); err != nil {
			return 0, nil, err
		}
		rows++
		seen[got.TradeID] = true
		if other, dup := byTradeSeq[got.TradeSeq]; dup {
			diffs = append(diffs, fmt.Sprintf("engine trade sequence %d stored twice: %s and %s", got.TradeSeq, other, got.TradeID))
		}
		byTradeSeq[got.TradeSeq] = got.TradeID
		w, ok := want[got.TradeID]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("trade %s in SQL but not in the source", got.TradeID))
			continue
		}
		if seq == nil || *seq != w.Seq || got.TradeSeq != w.TradeSeq || got.Instrument != w.Instrument ||
			!ratEq(px, w.Price) || !ratEq(qty, w.Quantity) || got.BuyOrderID != w.BuyOrderID || got.SellOrderID != w.SellOrderID ||
			got.BuyAccount != w.BuyAccount || got.SellAccount != w.SellAccount || !sameMicro(got.TS, w.TS) {
			diffs = append(diffs, fmt.Sprintf("trade %s: SQL seq=%v tseq=%d %s %s@%s %s/%s %s/%s %s; source %+v",
				got.TradeID, deref(seq), got.TradeSeq, got.Instrument, qty, px, got.BuyOrderID, got.SellOrderID,
				got.BuyAccount, got.SellAccount, got.TS.UTC().Format(time.RFC3339Nano), *w))
		}
	}
	if err := r.Err(); err != nil {
		return 0, nil, err
	}
	for id := range want {
		if !seen[id] {
			diffs = append(diffs, fmt.Sprintf("trade %s in the source but not in SQL", id))
		}
	}
	return rows, diffs, nil
}

// CompareOrders compares the scope's order_events with every order version
// of the source (each exactly once, equal fields) and its orders table with
// each order's newest source version (a stored older version is a rewind).
// It returns the number of order_events rows and one line per difference.
func CompareOrders(ctx context.Context, pool *pgxpool.Pool, scope string, evs []wire.Event) (rows int, diffs []string, err error) {
	type ver struct {
		id string
		v  int64
	}
	versions := map[ver]*wire.Order{}
	newest := map[string]*wire.Order{}
	for _, e := range evs {
		if o := e.Order; o != nil {
			versions[ver{o.OrderID, o.Version}] = o
			if n, ok := newest[o.OrderID]; !ok || o.Version > n.Version {
				newest[o.OrderID] = o
			}
		}
	}
	seen := map[ver]bool{}
	for _, table := range []string{"order_events", "orders"} {
		r, err := pool.Query(ctx, `SELECT order_id, version, seq, account, instrument, side, price::text, quantity::text, remaining::text, status, ts
  FROM `+table+` WHERE scope = $1`, scope)
		if err != nil {
			return 0, nil, err
		}
		n := 0
		for r.Next() {
			var got wire.Order
			var seq *int64
			var px, qty, rem, side, status string
			if err := r.Scan(&got.OrderID, &got.Version, &seq, &got.Account, &got.Instrument, &side, &px, &qty, &rem, &status, &got.TS); err != nil {
				r.Close()
				return 0, nil, err
			}
			n++
			w := versions[ver{got.OrderID, got.Version}]
			if table == "order_events" {
				rows++
				seen[ver{got.OrderID, got.Version}] = true
			} else if nw := newest[got.OrderID]; nw != nil && nw.Version != got.Version {
				diffs = append(diffs, fmt.Sprintf("orders %s holds version %d, the source's newest is %d", got.OrderID, got.Version, nw.Version))
				continue
			}
			if w == nil {
				diffs = append(diffs, fmt.Sprintf("%s %s v%d in SQL but not in the source", table, got.OrderID, got.Version))
				continue
			}
			if seq == nil || *seq != w.Seq || got.Account != w.Account || got.Instrument != w.Instrument || side != string(w.Side) ||
				!ratEq(px, w.Price) || !ratEq(qty, w.Quantity) || !ratEq(rem, w.Remaining) || status != string(w.Status) || !sameMicro(got.TS, w.TS) {
				diffs = append(diffs, fmt.Sprintf("%s %s v%d: SQL seq=%v %s %s %s %s@%s rem %s %s %s; source %+v", table, got.OrderID, got.Version,
					deref(seq), got.Account, got.Instrument, side, qty, px, rem, status, got.TS.UTC().Format(time.RFC3339Nano), *w))
			}
		}
		r.Close()
		if err := r.Err(); err != nil {
			return 0, nil, err
		}
		if table == "orders" && n != len(newest) {
			diffs = append(diffs, fmt.Sprintf("orders holds %d rows, the source has %d orders", n, len(newest)))
		}
	}
	for v := range versions {
		if !seen[v] {
			diffs = append(diffs, fmt.Sprintf("order_events %s v%d in the source but not in SQL", v.id, v.v))
		}
	}
	return rows, diffs, nil
}

// ratEq compares a numeric's text with a decimal as exact rationals.
func ratEq(sql string, d decimal.Decimal) bool {
	r, ok := new(big.Rat).SetString(sql)
	return ok && r.Cmp(d.Rat()) == 0
}

// sameMicro: timestamptz keeps microseconds and the source carries
// nanoseconds; equal means less than a microsecond apart.
func sameMicro(sql, src time.Time) bool {
	d := sql.Sub(src)
	return d > -time.Microsecond && d < time.Microsecond
}

func deref(p *int64) any {
	if p == nil {
		return "NULL"
	}
	return *p
}
