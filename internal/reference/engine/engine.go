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

package engine

import (
	"fmt"
	"sort"

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// Output is one event as produced: the decoded event and its exact wire bytes.
type Output struct {
	Event wire.Event
	Wire  []byte
}

type order struct {
	id, account, instrument string
	side                    wire.Side
	price, qty, remaining   decimal.Decimal
	version                 int64
	seq                     int64 // placement seq: time priority
}

// book keeps resting orders of one instrument, best first:
// bids by price descending, asks by price ascending, ties by placement seq.
type book struct{ bids, asks []*order }

// Engine is the deterministic matching engine. Not safe for concurrent use.
type Engine struct {
	instruments map[string]bool
	books       map[string]*book
	resting     map[string]*order // open orders by id
	seenIDs     map[string]bool   // every order id ever placed (ids are never reused)
	opened      map[[2]string]bool
	tradeSeq    int64
	lastSeq     int64
}

// New returns an engine for the descriptor's instruments at sequence 0.
func New(d Descriptor) *Engine {
	e := &Engine{
		instruments: map[string]bool{},
		books:       map[string]*book{},
		resting:     map[string]*order{},
		seenIDs:     map[string]bool{},
		opened:      map[[2]string]bool{},
	}
	for _, in := range d.Instruments {
		e.instruments[in] = true
		e.books[in] = &book{}
	}
	return e
}

// LastSeq is the sequence of the last applied command.
func (e *Engine) LastSeq() int64 { return e.lastSeq }

// TradeSeq is the engine-wide trade sequence of the last trade.
func (e *Engine) TradeSeq() int64 { return e.tradeSeq }

// Apply executes the command with sequence LastSeq()+1 and returns its
// outputs in emission order. Applying out of order is an error: a skipped
// command would silently change every later output.
func (e *Engine) Apply(c Command) ([]Output, error) {
	if c.Seq != e.lastSeq+1 {
		return nil, fmt.Errorf("engine: apply seq %d, expected %d", c.Seq, e.lastSeq+1)
	}
	var evs []wire.Event
	switch c.Kind {
	case KindOpening:
		evs = e.opening(c)
	case KindPlace:
		evs = e.place(c)
	case KindCancel:
		evs = e.cancel(c)
	case KindHeartbeat:
	default:
		return nil, fmt.Errorf("engine: command %d: unknown kind %q", c.Seq, c.Kind)
	}
	out := make([]Output, len(evs))
	for i, ev := range evs {
		b, err := wire.Encode(ev)
		if err != nil {
			return nil, fmt.Errorf("engine: command %d event %d: %w", c.Seq, i, err)
		}
		out[i] = Output{Event: ev, Wire: b}
	}
	e.lastSeq = c.Seq
	return out, nil
}

func (e *Engine) opening(c Command) []wire.Event {
	key := [2]string{c.Account, c.Instrument}
	if !e.instruments[c.Instrument] || e.opened[key] {
		return nil // one proven opening per key; a second one would be ambiguous
	}
	e.opened[key] = true
	return []wire.Event{{Type: wire.TypeOpening, Opening: &wire.Opening{
		Seq: c.Seq, Account: c.Account, Instrument: c.Instrument, Quantity: c.Quantity, AvgCost: c.AvgCost,
	}}}
}

func (e *Engine) version(c Command, o *order, status wire.OrderStatus) wire.Event {
	return wire.Event{Type: wire.TypeOrder, Order: &wire.Order{
		Seq: c.Seq, OrderID: o.id, Version: o.version, Account: o.account, Instrument: o.instrument,
		Side: o.side, Price: o.price, Quantity: o.qty, Remaining: o.remaining, Status: status, TS: c.TS,
	}}
}

func fillStatus(o *order) wire.OrderStatus {
	if o.remaining.Sign() == 0 {
		return wire.StatusFilled
	}
	return wire.StatusPartiallyFilled
}

func (e *Engine) place(c Command) []wire.Event {
	bk := e.books[c.Instrument]
	if bk == nil || e.seenIDs[c.OrderID] || c.Price.Sign() <= 0 || c.Quantity.Sign() <= 0 {
		return nil // rejected: deterministic, no outputs
	}
	e.seenIDs[c.OrderID] = true
	t := &order{id: c.OrderID, account: c.Account, instrument: c.Instrument, side: c.Side,
		price: c.Price, qty: c.Quantity, remaining: c.Quantity, version: 1, seq: c.Seq}
	evs := []wire.Event{e.version(c, t, wire.StatusNew)}
	opp := &bk.asks
	crosses := func(m *order) bool { return m.price.Cmp(t.price) <= 0 }
	if t.side == wire.SideSell {
		opp = &bk.bids
		crosses = func(m *order) bool { return m.price.Cmp(t.price) >= 0 }
	}
	for t.remaining.Sign() > 0 && len(*opp) > 0 && crosses((*opp)[0]) {
		m := (*opp)[0]
		fill := decimal.Min(t.remaining, m.remaining)
		e.tradeSeq++
		tr := &wire.Trade{Seq: c.Seq, TradeID: fmt.Sprintf("T%d", e.tradeSeq), TradeSeq: e.tradeSeq, Instrument: c.Instrument,
			Price: m.price, Quantity: fill, TS: c.TS}
		buy, sell := t, m
		if t.side == wire.SideSell {
			buy, sell = m, t
		}
		tr.BuyOrderID, tr.BuyAccount, tr.SellOrderID, tr.SellAccount = buy.id, buy.account, sell.id, sell.account
		m.remaining = m.remaining.Sub(fill)
		m.version++
		t.remaining = t.remaining.Sub(fill)
		t.version++
		evs = append(evs, wire.Event{Type: wire.TypeTrade, Trade: tr}, e.version(c, m, fillStatus(m)), e.version(c, t, fillStatus(t)))
		if m.remaining.Sign() == 0 {
			*opp = (*opp)[1:]
			delete(e.resting, m.id)
		}
	}
	if t.remaining.Sign() > 0 {
		e.rest(bk, t)
	}
	return evs
}

func (e *Engine) rest(bk *book, o *order) {
	side := &bk.bids
	better := func(a, b *order) bool { // a strictly ahead of b
		if c := a.price.Cmp(b.price); c != 0 {
			return c > 0
		}
		return a.seq < b.seq
	}
	if o.side == wire.SideSell {
		side = &bk.asks
		better = func(a, b *order) bool {
			if c := a.price.Cmp(b.price); c != 0 {
				return c < 0
			}
			return a.seq < b.seq
		}
	}
	s := *side
	i := sort.Search(len(s), func(i int) bool { return better(o, s[i]) })
	s = append(s, nil)
	copy(s[i+1:], s[i:])
	s[i] = o
	*side = s
	e.resting[o.id] = o
}

func (e *Engine) cancel(c Command) []wire.Event {
	o := e.resting[c.OrderID]
	if o == nil {
		return nil // unknown, filled or already cancelled: zero outputs
	}
	bk := e.books[o.instrument]
	side := &bk.bids
	if o.side == wire.SideSell {
		side = &bk.asks
	}
	for i, r := range *side {
		if r == o {
			*side = append((*side)[:i:i], (*side)[i+1:]...)
			break
		}
	}
	delete(e.resting, o.id)
	o.version++
	return []wire.Event{e.version(c, o, wire.StatusCancelled)}
}

// RestingOrderIDs lists open order ids in deterministic (sorted) order.
func (e *Engine) RestingOrderIDs() []string {
	ids := make([]string, 0, len(e.resting))
	for id := range e.resting {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
