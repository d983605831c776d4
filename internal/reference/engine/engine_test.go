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
	"bytes"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

var t0 = time.Date(2026, 2, 3, 4, 5, 6, 123456789, time.UTC)

func place(seq int64, id, acct string, side wire.Side, price, qty string) Command {
	return Command{Seq: seq, TS: t0.Add(time.Duration(seq)), Kind: KindPlace, Account: acct, Instrument: "BTC-USD", OrderID: id,
		Side: side, Price: decimal.RequireFromString(price), Quantity: decimal.RequireFromString(qty)}
}

func apply(t *testing.T, e *Engine, c Command) []wire.Event {
	t.Helper()
	outs, err := e.Apply(c)
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]wire.Event, len(outs))
	for i, o := range outs {
		back, err := wire.Decode(o.Wire)
		if err != nil {
			t.Fatalf("engine emitted undecodable wire %s: %v", o.Wire, err)
		}
		if back.Seq() != c.Seq {
			t.Fatalf("event seq %d for command %d", back.Seq(), c.Seq)
		}
		evs[i] = o.Event
	}
	return evs
}

func TestEngine_PriceTimePriority(t *testing.T) {
	e := New(TestDescriptor("s"))
	apply(t, e, place(1, "s1", "a", wire.SideSell, "101", "1"))
	apply(t, e, place(2, "s2", "b", wire.SideSell, "100", "1"))
	apply(t, e, place(3, "s3", "c", wire.SideSell, "100", "1"))         // same price, later: behind s2
	evs := apply(t, e, place(4, "b1", "d", wire.SideBuy, "100", "2.5")) // s1 @101 does not cross
	// NEW, then per fill: trade, maker version, taker version
	if len(evs) != 1+3*2 {
		t.Fatalf("got %d events", len(evs))
	}
	t1, t2 := evs[1].Trade, evs[4].Trade
	if t1.SellOrderID != "s2" || t2.SellOrderID != "s3" {
		t.Fatalf("time priority broken: %s then %s", t1.SellOrderID, t2.SellOrderID)
	}
	if !t1.Price.Equal(decimal.NewFromInt(100)) || t1.TradeSeq != 1 || t2.TradeSeq != 2 || t1.BuyAccount != "d" {
		t.Fatalf("trade fields: %+v", t1)
	}
	last := evs[len(evs)-1].Order
	if last.OrderID != "b1" || last.Version != 3 || last.Status != wire.StatusPartiallyFilled || !last.Remaining.Equal(decimal.RequireFromString("0.5")) {
		t.Fatalf("taker final version: %+v", last)
	}
	// The rest of b1 (0.5 @100) rests; cancel it.
	evs = apply(t, e, Command{Seq: 5, TS: t0, Kind: KindCancel, OrderID: "b1"})
	if len(evs) != 1 || evs[0].Order.Status != wire.StatusCancelled || evs[0].Order.Version != 4 {
		t.Fatalf("cancel: %+v", evs)
	}
	if evs := apply(t, e, Command{Seq: 6, TS: t0, Kind: KindCancel, OrderID: "b1"}); len(evs) != 0 {
		t.Fatal("second cancel must have zero outputs")
	}
	if evs := apply(t, e, Command{Seq: 7, TS: t0, Kind: KindHeartbeat}); len(evs) != 0 {
		t.Fatal("heartbeat must have zero outputs")
	}
	if evs := apply(t, e, place(8, "s1", "x", wire.SideBuy, "1", "1")); len(evs) != 0 {
		t.Fatal("duplicate order id must be rejected with zero outputs")
	}
	if got := e.RestingOrderIDs(); len(got) != 1 || got[0] != "s1" {
		t.Fatalf("resting %v", got)
	}
	if _, err := e.Apply(place(10, "z", "a", wire.SideBuy, "1", "1")); err == nil {
		t.Fatal("out-of-order apply accepted")
	}
}

func TestEngine_Openings(t *testing.T) {
	e := New(TestDescriptor("s"))
	op := Command{Seq: 1, TS: t0, Kind: KindOpening, Account: "a", Instrument: "ETH-USD", Quantity: decimal.NewFromInt(-3), AvgCost: decimal.RequireFromString("10.5")}
	evs := apply(t, e, op)
	if len(evs) != 1 || evs[0].Type != wire.TypeOpening || !evs[0].Opening.Quantity.Equal(decimal.NewFromInt(-3)) {
		t.Fatalf("opening: %+v", evs)
	}
	op.Seq = 2
	if evs := apply(t, e, op); len(evs) != 0 {
		t.Fatal("second opening of one key must have zero outputs")
	}
}

// Determinism: the live engine (applied as commands are appended) and a strict
// replay from disk produce byte-identical outputs, and so do two replays.
func TestEngine_LiveEqualsReplay(t *testing.T) {
	dir := t.TempDir()
	desc := TestDescriptor("scope-a")
	l, err := Create(dir, desc, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWorkload(7, WorkloadConfig{Instruments: desc.Instruments, Openings: true})
	if err != nil {
		t.Fatal(err)
	}
	live := New(desc)
	var liveWires [][]byte
	for i := 0; i < 400; i++ {
		if i == 150 || i == 300 {
			if err := l.NewTerm(); err != nil {
				t.Fatal(err)
			}
		}
		c, err := l.Append(w.Next())
		if err != nil {
			t.Fatal(err)
		}
		outs, err := live.Apply(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			liveWires = append(liveWires, o.Wire)
		}
	}
	if err := l.Commit(400); err != nil {
		t.Fatal(err)
	}
	r1, err := ReplayAll(dir, 400)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := ReplayAll(dir, 400)
	if err != nil {
		t.Fatal(err)
	}
	ev1, ev2 := r1.Events(0, 400), r2.Events(0, 400)
	if len(ev1) != len(liveWires) || len(ev2) != len(ev1) || len(ev1) < 400 {
		t.Fatalf("event counts live %d replay %d %d", len(liveWires), len(ev1), len(ev2))
	}
	var trades, zero int
	for i := range ev1 {
		if !bytes.Equal(ev1[i].Wire, liveWires[i]) || !bytes.Equal(ev1[i].Wire, ev2[i].Wire) {
			t.Fatalf("event %d differs:\nlive   %s\nreplay %s", i, liveWires[i], ev1[i].Wire)
		}
		if bytes.Contains(ev1[i].Wire, []byte(`"type":"trade"`)) {
			trades++
		}
	}
	for s := int64(1); s <= 400; s++ {
		if len(r1.Events(s-1, s)) == 0 {
			zero++
		}
	}
	if trades == 0 || zero == 0 {
		t.Fatalf("workload too tame: %d trades, %d zero-output commands", trades, zero)
	}
	if r1.Digest(400) != r2.Digest(400) {
		t.Fatal("digests differ between replays")
	}
}

// The descriptor hash is stable across processes and implementations: its
// canonical bytes and hash are pinned here.
func TestDescriptor_HashGolden(t *testing.T) {
	d := Descriptor{EngineID: "reference-engine-v1", Scope: "s", Instruments: []string{"ETH-USD", "BTC-USD", "ETH-USD"}}
	if got, want := string(d.Canonical()), `{"protocolVersion":1,"engineId":"reference-engine-v1","scope":"s","instruments":["BTC-USD","ETH-USD"]}`; got != want {
		t.Fatalf("canonical %s", got)
	}
	if h := d.Hash(); len(h) != 64 || h != TestDescriptor("s").Hash() {
		t.Fatalf("hash %s vs %s", h, TestDescriptor("s").Hash())
	}
	if TestDescriptor("s").Hash() == TestDescriptor("t").Hash() {
		t.Fatal("scope not in descriptor hash")
	}
}

func decimalFromString(s string) decimal.Decimal { return decimal.RequireFromString(s) }
