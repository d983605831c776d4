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
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// Rows that drift across the history past the bound stop detection with
// snapshot_too_large instead of growing with a hostile scope; under the
// bound the same scope is reported.
func TestDetectHistory_DriftPastThePendingBoundIsRefused(t *testing.T) {
	defer func(n int) { maxPendingRows = n }(maxPendingRows)
	for _, tc := range []struct {
		name  string
		bound int
		ok    bool
	}{
		{"under the bound", 1000, true},
		{"past the bound", 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			maxPendingRows = tc.bound
			s := fixture(60)
			for i := range s.SQL.Trades {
				s.SQL.Trades[i].Seq = NullSeq // 60 legacy rows, held until their events
			}
			r, err := Detect(s)
			if tc.ok {
				if err != nil || r.ByInvariant[TradeProvenance] != 60 {
					t.Fatalf("Detect: %v (report %t)", err, r != nil)
				}
				return
			}
			if r != nil || !errors.Is(err, ErrSnapshotTooLarge) {
				t.Fatalf("Detect = report %t, %v; want snapshot too large", r != nil, err)
			}
			rg := newRig(s)
			if _, err := rg.wf.DryRun(context.Background(), fxScope); CodeOf(err) != ResultSnapshotTooLarge {
				t.Fatalf("dry run: %v", err)
			}
		})
	}
}

// synthHistory is a clean history of cmds commands generated page by page
// (a buy and a sell order, their trade, both orders filled: five events a
// seq), the SQL rows mirroring it, so nothing of it is ever held whole. The
// projection holds no positions: every key reports, a bounded number of
// findings whatever the size.
type synthHistory struct {
	cmds, pageSeqs int
	next           int64 // the last seq paged
	rowsThrough    int64 // the last seq whose rows were returned
	live           []uint64
	sampleEvery    int
	pages          int
}

func (h *synthHistory) events(seq int64) (wire.Trade, [4]wire.Order) {
	k := seq
	instr := fxInstrs[k%2]
	buyer, seller := fxAccount(int(k%8)), fxAccount(int((k*3+1)%8))
	if buyer == seller {
		seller = fxAccount(int((k*3 + 2) % 8))
	}
	price := decimal.New(100+k%17, 0)
	qty := decimal.New(1+k%5, 0)
	ts := fxBaseTS.Add(time.Duration(k) * time.Millisecond)
	ob, os := fmt.Sprintf("ob-%d", k), fmt.Sprintf("os-%d", k)
	o := [4]wire.Order{
		{Seq: seq, OrderID: ob, Version: 1, Account: buyer, Instrument: instr, Side: wire.SideBuy, Price: price, Quantity: qty, Remaining: qty, Status: wire.StatusNew, TS: ts},
		{Seq: seq, OrderID: os, Version: 1, Account: seller, Instrument: instr, Side: wire.SideSell, Price: price, Quantity: qty, Remaining: qty, Status: wire.StatusNew, TS: ts},
		{Seq: seq, OrderID: ob, Version: 2, Account: buyer, Instrument: instr, Side: wire.SideBuy, Price: price, Quantity: qty, Remaining: decimal.Zero, Status: wire.StatusFilled, TS: ts},
		{Seq: seq, OrderID: os, Version: 2, Account: seller, Instrument: instr, Side: wire.SideSell, Price: price, Quantity: qty, Remaining: decimal.Zero, Status: wire.StatusFilled, TS: ts},
	}
	tr := wire.Trade{Seq: seq, TradeID: fmt.Sprintf("t-%d", k), TradeSeq: k, Instrument: instr, Price: price, Quantity: qty,
		BuyOrderID: ob, SellOrderID: os, BuyAccount: buyer, SellAccount: seller, TS: ts}
	return tr, o
}

func tradeRow(t wire.Trade) TradeRow {
	return TradeRow{TradeID: t.TradeID, TradeSeq: t.TradeSeq, Seq: Seq(t.Seq), Instrument: t.Instrument, Price: t.Price, Quantity: t.Quantity,
		BuyOrderID: t.BuyOrderID, SellOrderID: t.SellOrderID, BuyAccount: t.BuyAccount, SellAccount: t.SellAccount, TS: t.TS,
		BookingStatus: BookingBooked, WrittenBy: "recovery"}
}

func orderRow(o wire.Order) OrderRow {
	return OrderRow{OrderID: o.OrderID, Version: o.Version, Seq: Seq(o.Seq), Account: o.Account, Instrument: o.Instrument,
		Side: string(o.Side), Price: o.Price, Quantity: o.Quantity, Remaining: o.Remaining, Status: string(o.Status), TS: o.TS}
}

func (h *synthHistory) Counts(context.Context) (HistoryCounts, error) {
	n := int64(h.cmds)
	return HistoryCounts{Trades: n, Orders: 2 * n, OrderEvents: 4 * n}, nil
}
func (h *synthHistory) Legacy(context.Context) (LegacyRows, error) { return LegacyRows{}, nil }
func (h *synthHistory) Duplicates(context.Context) ([]string, [][]TradeRow, error) {
	return nil, nil, nil
}
func (h *synthHistory) CurrentOrders(_ context.Context, fn func(string, int64)) error {
	for k := int64(1); k <= int64(h.cmds); k++ {
		fn(fmt.Sprintf("ob-%d", k), 2)
		fn(fmt.Sprintf("os-%d", k), 2)
	}
	return nil
}

func (h *synthHistory) NextPage(context.Context) (*SourcePage, error) {
	if h.next >= int64(h.cmds) {
		return nil, nil
	}
	h.pages++
	if h.sampleEvery > 0 && h.pages%h.sampleEvery == 0 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		h.live = append(h.live, m.HeapAlloc)
	}
	p := &SourcePage{}
	for i := 0; i < h.pageSeqs && h.next < int64(h.cmds); i++ {
		h.next++
		t, o := h.events(h.next)
		p.Trades = append(p.Trades, t)
		p.Orders = append(p.Orders, o[:]...)
	}
	p.Through = h.next
	return p, nil
}

func (h *synthHistory) RowsThrough(_ context.Context, through int64) (HistoryRows, error) {
	var out HistoryRows
	for ; h.rowsThrough < through && h.rowsThrough < int64(h.cmds); h.rowsThrough++ {
		t, o := h.events(h.rowsThrough + 1)
		out.Trades = append(out.Trades, tradeRow(t))
		for _, v := range o {
			out.OrderEvents = append(out.OrderEvents, orderRow(v))
		}
		out.Orders = append(out.Orders, orderRow(o[2]), orderRow(o[3]))
	}
	return out, nil
}

func (h *synthHistory) TradesByID(context.Context, []string) ([]TradeRow, error) { return nil, nil }
func (h *synthHistory) OrderEventsByKey(context.Context, []string, []int64) ([]OrderRow, error) {
	return nil, nil
}
func (h *synthHistory) OrdersByID(context.Context, []string) ([]OrderRow, error) { return nil, nil }
func (h *synthHistory) End() SourceSide {
	n := int64(h.cmds)
	return SourceSide{Complete: true, DescriptorHash: fxDescriptor, ProtocolVersion: 1, Boundary: n, Digest: fxDigest, EventCount: 5 * n}
}

// Detection's live heap does not grow with the history: ten times the
// events leave the heap mid-stream where it was, but for the order index
// (16 bytes an order). The live heap is read after a forced collection
// every few pages, so the figure is what detection holds, not the
// collector's pacing. Materialised, the larger history alone would be
// ~150 MB.
func TestDetectHistory_HeapDoesNotGrowWithHistory(t *testing.T) {
	peak := func(cmds int) (uint64, *Report) {
		h := &synthHistory{cmds: cmds, pageSeqs: 500, sampleEvery: 10}
		s := &Snapshot{Scope: fxScope, Now: fxNow, StaleAfter: 5 * time.Minute,
			SQL: SQLSide{Cursor: &CursorRow{State: StateCurrent, VerifiedThroughSeq: int64(cmds), EventCount: 5 * int64(cmds),
				ChainDigest: fxDigest, DescriptorHash: fxDescriptor, ProtocolVersion: 1, UpdatedAt: fxNow}}}
		r, err := DetectHistory(context.Background(), s, h)
		if err != nil {
			t.Fatal(err)
		}
		var max uint64
		for _, v := range h.live {
			max = maxOf(max, v)
		}
		return max, r
	}
	small, rs := peak(5_000)
	large, rl := peak(50_000)
	if len(rs.Findings) != len(rl.Findings) || rl.Unlisted != 0 {
		t.Fatalf("findings %d and %d: the synthetic scope should report the same keys whatever its size", len(rs.Findings), len(rl.Findings))
	}
	index := uint64(2*50_000) * 16
	t.Logf("live heap mid-stream: %d KiB at 25,000 events, %d KiB at 250,000 (order index %d KiB)", small>>10, large>>10, index>>10)
	if large > small+2*index+4<<20 {
		t.Fatalf("live heap grew from %d KiB to %d KiB with ten times the history: more than the order index (%d KiB)", small>>10, large>>10, index>>10)
	}
}

func maxOf(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// The order index answers each order's current version, no row for an
// order it was not given, and "ambiguous" for a slot two rows share (the
// primary key lost, or two ids of one hash): those are checked from their
// rows.
func TestOrderIndex_VersionsMissingAndAmbiguous(t *testing.T) {
	var x orderIndex
	x.reserve(4)
	for _, r := range []struct {
		id string
		v  int64
	}{{"o-1", 3}, {"o-2", 1}, {"o-3", 7}, {"o-2", 2}} {
		x.add(r.id, r.v)
	}
	x.build()
	for _, tc := range []struct {
		id             string
		v              int64
		has, ambiguous bool
	}{{"o-1", 3, true, false}, {"o-3", 7, true, false}, {"o-2", 0, true, true}, {"o-9", 0, false, false}} {
		v, has, amb := x.version(tc.id)
		if v != tc.v || has != tc.has || amb != tc.ambiguous {
			t.Errorf("version(%s) = %d, %v, %v; want %d, %v, %v", tc.id, v, has, amb, tc.v, tc.has, tc.ambiguous)
		}
	}
	if len(x.hashes) != 3 || cap(x.hashes) != 4 {
		t.Errorf("index of %d slots (capacity %d): want 3 in the reserved 4", len(x.hashes), cap(x.hashes))
	}
}
