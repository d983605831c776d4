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

// Package storetest builds sources for store and live tests: wire events,
// an in-memory ledger serving pages exactly as the member does, and an
// independent replay of positions (big.Rat arithmetic, sharing no code with
// internal/position) to compare a recovered projection against.
package storetest

import (
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// Descriptor is the descriptor hash of test runs and pages.
const Descriptor = "d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1"

// Dec parses a decimal or panics.
func Dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// T0 is the base timestamp of built events (with nanoseconds).
var T0 = time.Date(2026, 3, 1, 9, 30, 0, 123456789, time.UTC)

// Trade builds a trade event at seq (ts = T0 + seq seconds).
func Trade(seq, tradeSeq int64, id, instr, px, qty, buyer, seller string) wire.Event {
	return wire.Event{Type: wire.TypeTrade, Trade: &wire.Trade{Seq: seq, TradeID: id, TradeSeq: tradeSeq, Instrument: instr,
		Price: Dec(px), Quantity: Dec(qty), BuyOrderID: "b-" + id, SellOrderID: "s-" + id, BuyAccount: buyer, SellAccount: seller,
		TS: T0.Add(time.Duration(seq) * time.Second)}}
}

// Order builds an order version event at seq.
func Order(seq int64, id string, version int64, acct, instr string, side wire.Side, px, qty, rem string, st wire.OrderStatus) wire.Event {
	return wire.Event{Type: wire.TypeOrder, Order: &wire.Order{Seq: seq, OrderID: id, Version: version, Account: acct, Instrument: instr,
		Side: side, Price: Dec(px), Quantity: Dec(qty), Remaining: Dec(rem), Status: st, TS: T0.Add(time.Duration(seq) * time.Second)}}
}

// Opening builds a proven opening event at seq.
func Opening(seq int64, acct, instr, qty, avg string) wire.Event {
	return wire.Event{Type: wire.TypeOpening, Opening: &wire.Opening{Seq: seq, Account: acct, Instrument: instr, Quantity: Dec(qty), AvgCost: Dec(avg)}}
}

// Ledger is a source: events with their exact wire bytes in consensus order
// and the boundary B. Page serves them like the member (FR-APR01..04).
type Ledger struct {
	Events   []source.Event
	Decoded  []wire.Event
	Boundary int64
}

// NewLedger encodes evs (already in consensus order) with boundary B.
func NewLedger(t testing.TB, boundary int64, evs ...wire.Event) *Ledger {
	t.Helper()
	l := &Ledger{Boundary: boundary}
	for _, e := range evs {
		b, err := wire.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		l.Events = append(l.Events, source.Event{Seq: e.Seq(), Wire: b})
		l.Decoded = append(l.Decoded, e)
	}
	return l
}

// DigestThrough is the chain digest through seq.
func (l *Ledger) DigestThrough(seq int64) string {
	d := chain.Genesis
	for _, e := range l.Events {
		if e.Seq > seq {
			break
		}
		d = chain.Next(d, e.Wire)
	}
	return d
}

// Page serves afterSeq with at most max events, whole commands only; T covers
// zero-output commands up to the next included event or B.
func (l *Ledger) Page(after int64, max int) *source.Page {
	p := &source.Page{ProtocolVersion: 1, DescriptorHash: Descriptor, BoundarySeq: l.Boundary, AfterSeq: after,
		DigestAfter: l.DigestThrough(after), Events: []source.Event{}}
	if after == l.Boundary {
		p.Idle, p.ThroughSeq, p.DigestThrough = true, after, p.DigestAfter
		return p
	}
	i := 0
	for i < len(l.Events) && l.Events[i].Seq <= after {
		i++
	}
	p.ThroughSeq = l.Boundary
	d := p.DigestAfter
	for i < len(l.Events) {
		s := l.Events[i].Seq
		j := i
		for j < len(l.Events) && l.Events[j].Seq == s {
			j++
		}
		if len(p.Events)+(j-i) > max {
			p.ThroughSeq = s - 1
			break
		}
		for _, e := range l.Events[i:j] {
			d = chain.Next(d, e.Wire)
		}
		p.Events = append(p.Events, l.Events[i:j]...)
		i = j
	}
	p.DigestThrough = d
	return p
}
