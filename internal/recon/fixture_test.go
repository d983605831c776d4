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

package recon

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/position"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// The fixture is a synthetic but coherent world: a source history (openings,
// then commands each emitting two order versions opened, one trade, the two
// orders filled) and the SQL projection a correct catch-up leaves behind
// (cursor at B, positions derived, bases at B). Each scenario mutates one
// thing and asserts the finding, its cause and the plan's answer.

const (
	fxScope      = "venue-a"
	fxDescriptor = "1111111111111111111111111111111111111111111111111111111111111111"
	fxDigest     = "abababababababababababababababababababababababababababababababab"
	fxDigestMid  = "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"
)

var (
	fxNow     = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fxBaseTS  = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fxInstrs  = []string{"BTC-USD", "ETH-USD"}
	fxAccount = func(i int) string { return fmt.Sprintf("acc-%d", i) }
)

func d(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func i64(v int64) *int64 { return &v }

// fixture builds a clean snapshot with cmds trading commands (5 events each)
// and two openings. It is deterministic: two calls build equal, independent
// snapshots (the purity test relies on it).
func fixture(cmds int) *Snapshot {
	const accounts = 8
	s := &Snapshot{Scope: fxScope, Now: fxNow, StaleAfter: 5 * time.Minute}
	src := &s.Source
	seq := int64(0)
	src.Openings = append(src.Openings,
		wire.Opening{Seq: 1, Account: fxAccount(0), Instrument: "BTC-USD", Quantity: d("10"), AvgCost: d("100.5")},
		wire.Opening{Seq: 2, Account: fxAccount(1), Instrument: "ETH-USD", Quantity: d("-4"), AvgCost: d("2000")})
	seq = 2
	for k := 0; k < cmds; k++ {
		seq++
		instr := fxInstrs[k%len(fxInstrs)]
		buyer, seller := fxAccount(k%accounts), fxAccount((k*3+1)%accounts)
		if buyer == seller {
			seller = fxAccount((k*3 + 2) % accounts)
		}
		price := d(fmt.Sprintf("%d.%03d", 100+k%17, (k*37)%1000))
		qty := d(fmt.Sprintf("%d.%d", 1+k%5, k%3))
		t := fxBaseTS.Add(time.Duration(k)*time.Millisecond + 789) // nanoseconds: truncation matters
		ob, os := fmt.Sprintf("ob-%d", k), fmt.Sprintf("os-%d", k)
		src.Orders = append(src.Orders,
			wire.Order{Seq: seq, OrderID: ob, Version: 1, Account: buyer, Instrument: instr, Side: wire.SideBuy, Price: price, Quantity: qty, Remaining: qty, Status: wire.StatusNew, TS: t},
			wire.Order{Seq: seq, OrderID: os, Version: 1, Account: seller, Instrument: instr, Side: wire.SideSell, Price: price, Quantity: qty, Remaining: qty, Status: wire.StatusNew, TS: t})
		src.Trades = append(src.Trades, wire.Trade{Seq: seq, TradeID: fmt.Sprintf("t-%d", k), TradeSeq: int64(k + 1), Instrument: instr,
			Price: price, Quantity: qty, BuyOrderID: ob, SellOrderID: os, BuyAccount: buyer, SellAccount: seller, TS: t})
		src.Orders = append(src.Orders,
			wire.Order{Seq: seq, OrderID: ob, Version: 2, Account: buyer, Instrument: instr, Side: wire.SideBuy, Price: price, Quantity: qty, Remaining: decimal.Zero, Status: wire.StatusFilled, TS: t},
			wire.Order{Seq: seq, OrderID: os, Version: 2, Account: seller, Instrument: instr, Side: wire.SideSell, Price: price, Quantity: qty, Remaining: decimal.Zero, Status: wire.StatusFilled, TS: t})
	}
	src.Complete, src.DescriptorHash, src.ProtocolVersion = true, fxDescriptor, 1
	src.Boundary, src.Digest = seq, fxDigest
	src.EventCount = int64(len(src.Openings) + len(src.Orders) + len(src.Trades))
	s.SQL = mirror(s, seq)
	s.Scopes = []ScopeCursor{
		{Scope: fxScope, State: StateCurrent, VerifiedThroughSeq: seq, UpdatedAt: fxNow.Add(-time.Minute)},
		{Scope: "venue-b", State: StateCurrent, VerifiedThroughSeq: 7, UpdatedAt: fxNow.Add(-30 * time.Second)},
	}
	return s
}

// mirror is the SQL side a correct catch-up through v leaves (ts truncated
// to the microsecond, positions derived in authoritative order, bases at v).
func mirror(s *Snapshot, v int64) SQLSide {
	var q SQLSide
	src := &s.Source
	for _, t := range src.Trades {
		q.Trades = append(q.Trades, TradeRow{TradeID: t.TradeID, TradeSeq: t.TradeSeq, Seq: Seq(t.Seq), Instrument: t.Instrument,
			Price: t.Price, Quantity: t.Quantity, BuyOrderID: t.BuyOrderID, SellOrderID: t.SellOrderID, BuyAccount: t.BuyAccount,
			SellAccount: t.SellAccount, TS: tsSQL(t.TS), BookingStatus: "BOOKED", WrittenBy: "live"})
	}
	cur := map[string]int{}
	for _, o := range src.Orders {
		row := OrderRow{OrderID: o.OrderID, Version: o.Version, Seq: Seq(o.Seq), Account: o.Account, Instrument: o.Instrument,
			Side: string(o.Side), Price: o.Price, Quantity: o.Quantity, Remaining: o.Remaining, Status: string(o.Status), TS: tsSQL(o.TS)}
		q.OrderEvents = append(q.OrderEvents, row)
		if i, ok := cur[o.OrderID]; ok {
			q.Orders[i] = row
		} else {
			cur[o.OrderID] = len(q.Orders)
			q.Orders = append(q.Orders, row)
		}
	}
	type key struct{ a, i string }
	states := map[key]position.State{}
	openings := map[key]*wire.Opening{}
	var order []key
	touch := func(k key) {
		if _, ok := states[k]; !ok {
			states[k] = position.State{Quantity: decimal.Zero, AvgCost: decimal.Zero}
			order = append(order, k)
		}
	}
	for i := range src.Openings {
		o := &src.Openings[i]
		k := key{o.Account, o.Instrument}
		touch(k)
		states[k] = position.State{Quantity: o.Quantity, AvgCost: o.AvgCost}
		openings[k] = o
	}
	for _, t := range src.Trades { // already in (seq, tradeSeq) order
		b, sl := key{t.BuyAccount, t.Instrument}, key{t.SellAccount, t.Instrument}
		touch(b)
		states[b] = position.Apply(states[b], t.Quantity, t.Price)
		touch(sl)
		states[sl] = position.Apply(states[sl], t.Quantity.Neg(), t.Price)
	}
	for _, k := range order {
		st := states[k]
		p := PositionRow{Account: k.a, Instrument: k.i, OpeningQuantity: decimal.Zero, OpeningAvgCost: decimal.Zero, OpeningProven: true,
			Quantity: st.Quantity, AvgCost: st.AvgCost, UpdatedAt: fxNow.Add(-time.Hour)}
		if o := openings[k]; o != nil {
			p.OpeningQuantity, p.OpeningAvgCost, p.OpeningSeq = o.Quantity, o.AvgCost, i64(o.Seq)
		}
		q.Positions = append(q.Positions, p)
		q.Basis = append(q.Basis, BasisRow{Account: k.a, Instrument: k.i, BasisSeq: v, Quantity: st.Quantity, AvgCost: st.AvgCost})
	}
	q.Cursor = &CursorRow{DescriptorHash: fxDescriptor, ProtocolVersion: 1, VerifiedThroughSeq: v, ChainDigest: fxDigest,
		EventCount: src.EventCount, LastObservedBoundarySeq: v, State: StateCurrent, UpdatedAt: fxNow.Add(-time.Minute)}
	q.Lease = &LeaseRow{Owner: "manager-0", Fence: 3, ExpiresAt: fxNow.Add(30 * time.Second), AcquiredAt: fxNow.Add(-time.Hour), RenewedAt: fxNow.Add(-5 * time.Second)}
	q.Runs = []ProjectionRun{{RunID: 1, Epoch: 1, Managed: true, Selected: true, Phase: PhaseActive, DescriptorHash: fxDescriptor, ProtocolVersion: 1, CheckpointSeq: v}}
	sent := fxNow.Add(-10 * time.Second)
	q.Outbox = []OutboxRow{{ID: 1, MsgID: "venue-a/acc-0/BTC-USD/" + fmt.Sprint(v), Account: fxAccount(0), Instrument: "BTC-USD",
		Quantity: d("1"), AvgCost: d("1"), CursorSeq: v, CreatedAt: fxNow.Add(-20 * time.Second), SentAt: &sent}}
	return q
}

// helpers over the fixture

func mustDetect(t testing.TB, s *Snapshot) *Report {
	t.Helper()
	r, err := Detect(s)
	if err != nil {
		t.Fatalf("Detect: %v", err)
	}
	return r
}

func mustPlan(t testing.TB, r *Report, s *Snapshot) *Plan {
	t.Helper()
	p, err := PlanRepairs(r, s)
	if err != nil {
		t.Fatalf("PlanRepairs: %v", err)
	}
	return p
}

func (s *Snapshot) trade(id string) *TradeRow {
	for i := range s.SQL.Trades {
		if s.SQL.Trades[i].TradeID == id {
			return &s.SQL.Trades[i]
		}
	}
	panic("no trade " + id)
}

func (s *Snapshot) srcTrade(id string) *wire.Trade {
	for i := range s.Source.Trades {
		if s.Source.Trades[i].TradeID == id {
			return &s.Source.Trades[i]
		}
	}
	panic("no source trade " + id)
}

func (s *Snapshot) pos(account, instr string) *PositionRow {
	for i := range s.SQL.Positions {
		if p := &s.SQL.Positions[i]; p.Account == account && p.Instrument == instr {
			return p
		}
	}
	panic("no position " + account + "/" + instr)
}

func (s *Snapshot) basisOf(account, instr string) *BasisRow {
	for i := range s.SQL.Basis {
		if b := &s.SQL.Basis[i]; b.Account == account && b.Instrument == instr {
			return b
		}
	}
	panic("no basis " + account + "/" + instr)
}

func (s *Snapshot) removeTrade(id string) {
	out := s.SQL.Trades[:0]
	for _, r := range s.SQL.Trades {
		if r.TradeID != id {
			out = append(out, r)
		}
	}
	s.SQL.Trades = out
}

func posKeyOf(account, instr string) string { return posKey{account, instr}.record().Key() }

// summary renders findings as "invariant@record=cause" lines for diffs.
func summary(r *Report) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, fmt.Sprintf("%s=%s", f.ID, f.RootCause.Code))
	}
	return out
}

func joinLines(l []string) string { return "\n  " + strings.Join(l, "\n  ") }

// eventsThrough counts the snapshot's source events with seq <= v (all
// three types).
func eventsThrough(s *Snapshot, v int64) int64 {
	var n int64
	for i := range s.Source.Trades {
		if s.Source.Trades[i].Seq <= v {
			n++
		}
	}
	for i := range s.Source.Orders {
		if s.Source.Orders[i].Seq <= v {
			n++
		}
	}
	for i := range s.Source.Openings {
		if s.Source.Openings[i].Seq <= v {
			n++
		}
	}
	return n
}
