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

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// This file encodes a slice's COPY streams (copybin.go's binary format):
// the rows checkTrades and checkOrders found missing, the current order
// rows, and the derived positions of page_positions.

// writeStreams are a slice's COPY streams of what checkTrades and
// checkOrders found missing (trades, order versions, current order rows) and
// the orders whose current row is to move forward. encodeWrites builds them
// in a goroutine while derive reads and folds the slice's keys, so the
// applying goroutine does not encode under the lock (docs/performance.md,
// "What left the slice's path"). The goroutine only reads what checkTrades
// and checkOrders left, which nothing changes after them: no race.
type writeStreams struct {
	done        chan struct{}
	trades      *copyBuf
	orderEvents *copyBuf
	orders      *copyBuf // current rows of the orders without one
	ids         []string // orders whose current row holds an older version
	versions    []int64  // the version each moves to
}

// encodeWrites starts encoding the slice's write streams; release must
// follow, whatever happens to the slice.
func (w *pageTx) encodeWrites() *writeStreams {
	ws := &writeStreams{done: make(chan struct{})}
	go func() {
		defer close(ws.done)
		ws.trades = w.encodeMissingTrades()
		ws.orderEvents = w.encodeOrderEvents()
		ws.orders, ws.ids, ws.versions = w.encodeOrders()
	}()
	return ws
}

// wait returns once the streams are encoded.
func (ws *writeStreams) wait() { <-ws.done }

// release waits for the encoding and gives its buffers back. Waiting first
// is what keeps a buffer from being reused while the goroutine still fills it.
func (ws *writeStreams) release() {
	ws.wait()
	for _, c := range []*copyBuf{ws.trades, ws.orderEvents, ws.orders} {
		if c != nil {
			putCopyBuf(c)
		}
	}
}

// encodeOrders sorts the slice's orders for writeOrders: for each order id,
// the latest version the slice holds gets a current row by COPY when the
// order has none, moves the row forward by upsert when it holds an older
// version, and is left alone otherwise.
func (w *pageTx) encodeOrders() (*copyBuf, []string, []int64) {
	latest := make(map[string]*wire.Order, len(w.p.orders))
	for _, o := range w.p.orders {
		if l := latest[o.OrderID]; l == nil || o.Version > l.Version {
			latest[o.OrderID] = o
		}
	}
	fresh := getCopyBuf(12)
	var ids []string
	var versions []int64
	for _, o := range w.p.orders { // in seq order: the rows go in as they came
		if latest[o.OrderID] != o {
			continue
		}
		v, ok := w.orderRows[o.OrderID]
		switch {
		case !ok:
			fresh.row()
			fresh.order(w.scope, o)
		case v < o.Version:
			ids, versions = append(ids, o.OrderID), append(versions, o.Version)
		}
	}
	return fresh, ids, versions
}

// encodeMissingTrades encodes the slice's trades that checkTrades did not
// find retained, as recovery's own BOOKED rows.
func (w *pageTx) encodeMissingTrades() *copyBuf {
	c := getCopyBuf(14)
	for _, t := range w.p.trades {
		if w.existing[t.TradeID] {
			continue
		}
		c.row()
		c.text(w.scope)
		c.trade(t)
		c.text("BOOKED")
		c.text("recovery")
	}
	return c
}

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
