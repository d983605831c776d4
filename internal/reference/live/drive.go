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

package live

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// Drive runs the live projector on scope at rate events/s while during
// runs, and returns the latency of every write: the feed delivers the i-th
// event of next at start + i/rate, the projector writes whatever queued in
// one ApplyBatch as Run does, and each latency runs from delivery to the
// commit that wrote it, so writes queued behind a wait are charged for it.
// A write that fails goes to onErr. Benchmarks measure with it.
func Drive(pool *pgxpool.Pool, scope string, rate int, next func() wire.Event, onErr func(error), during func(ctx context.Context)) []time.Duration {
	type arrival struct {
		ev  wire.Event
		due time.Time
	}
	ctx, cancel := context.WithCancel(context.Background())
	feed := make(chan arrival, 1<<16)
	go func() {
		defer close(feed)
		start := time.Now()
		for i := 0; ctx.Err() == nil; i++ {
			due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(due)):
			}
			feed <- arrival{next(), due}
		}
	}()
	done := make(chan []time.Duration)
	go func() {
		var lat []time.Duration
		for a := range feed {
			batch := []arrival{a}
		drain:
			for len(batch) < MaxBatch {
				select {
				case a, ok := <-feed:
					if !ok {
						break drain
					}
					batch = append(batch, a)
				default:
					break drain
				}
			}
			evs := make([]wire.Event, len(batch))
			for i, a := range batch {
				evs[i] = a.ev
			}
			if err := ApplyBatch(context.Background(), pool, scope, evs); err != nil {
				onErr(err)
			}
			now := time.Now()
			for _, a := range batch {
				lat = append(lat, now.Sub(a.due))
			}
		}
		done <- lat
	}()
	during(ctx)
	cancel()
	return <-done
}

// Feed makes a live feed for Drive: per trade, both order versions then
// the trade, at seqs after Seq. Its keys are 20 accounts L00..L19 on the
// instrument LIVE, which no workload trades, or, with Accounts and
// Instruments set, those (acct-1..acct-N and the given instruments, a
// workload's own keys). Keep records every event made (for a replay).
type Feed struct {
	Seq         int64
	Accounts    int
	Instruments []string
	Keep        bool

	Events []wire.Event // Keep: every event made
	Trades int
	i      int
}

// Next is the feed's next event.
func (g *Feed) Next() wire.Event {
	ev := g.make()
	if g.Keep {
		g.Events = append(g.Events, ev)
	}
	return ev
}

func (g *Feed) make() wire.Event {
	g.i++
	g.Seq++
	n := g.i / 3
	buy, sell, instr := fmt.Sprintf("L%02d", n%20), fmt.Sprintf("L%02d", (n+7)%20), "LIVE"
	if g.Accounts > 0 && len(g.Instruments) > 0 {
		buy, sell = fmt.Sprintf("acct-%d", 1+n%g.Accounts), fmt.Sprintf("acct-%d", 1+(n+7)%g.Accounts)
		instr = g.Instruments[n%len(g.Instruments)]
	}
	ts := time.Unix(1_800_000_000, int64(g.i)).UTC()
	px, qty := decimal.NewFromInt(100+int64(n%17)), decimal.NewFromInt(1+int64(n%5))
	if g.i%3 != 0 {
		side, acct := wire.SideBuy, buy
		if g.i%3 == 2 {
			side, acct = wire.SideSell, sell
		}
		return wire.Event{Type: wire.TypeOrder, Order: &wire.Order{OrderID: fmt.Sprintf("lo-%d-%d", n, g.i%3), Version: 1, Seq: g.Seq,
			Account: acct, Instrument: instr, Side: side, Price: px, Quantity: qty, Remaining: decimal.Zero, Status: wire.StatusFilled, TS: ts}}
	}
	g.Trades++
	return wire.Event{Type: wire.TypeTrade, Trade: &wire.Trade{TradeID: fmt.Sprintf("lt-%d", n), TradeSeq: int64(n), Seq: g.Seq,
		Instrument: instr, Price: px, Quantity: qty, BuyOrderID: fmt.Sprintf("lo-%d-1", n), SellOrderID: fmt.Sprintf("lo-%d-2", n),
		BuyAccount: buy, SellAccount: sell, TS: ts}}
}
