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

package live_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/reference/enginetest"
	"github.com/projection-recovery/projection-recovery/internal/reference/live"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// liveBeyond writes new trades (seqs past the source boundary, as a live
// feed running during recovery produces) on the source's own keys, one at a
// time and in seq order, so their arrival order is their authoritative
// order and the independent replay of source + these trades is the truth.
type liveBeyond struct {
	mu     sync.Mutex
	e      env
	seq    int64
	rng    *rand.Rand
	wrote  []wire.Event
	during []int // for each write, the slices the page had committed when it committed
	slices *int
}

func (g *liveBeyond) write(t *testing.T) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	n := len(g.wrote)
	buy, sell := fmt.Sprintf("acct-%d", 1+g.rng.IntN(4)), fmt.Sprintf("acct-%d", 1+g.rng.IntN(4))
	ev := wire.Event{Type: wire.TypeTrade, Trade: &wire.Trade{TradeID: fmt.Sprintf("live-%d", n), TradeSeq: 1_000_000 + int64(n), Seq: g.seq,
		Instrument: []string{"ACME", "BOLT", "CRUX"}[g.rng.IntN(3)], Price: decimal.NewFromInt(90 + g.rng.Int64N(20)),
		Quantity: decimal.NewFromInt(1 + g.rng.Int64N(5)), BuyOrderID: "lb", SellOrderID: "ls", BuyAccount: buy, SellAccount: sell,
		TS: time.Unix(1_900_000_000, int64(n)).UTC()}}
	if err := live.Apply(ctxb, g.e.trade, "s", ev); err != nil {
		t.Error(err)
		return
	}
	g.wrote = append(g.wrote, ev)
	g.during = append(g.during, *g.slices)
}

// TestLiveWritesMidPageAreNeitherLostNorOverwritten (docs/live-writes.md,
// "Write slices"): a page commits in write slices and the projection write
// lock is free between them, so live writes land in the middle of a page:
// between two slices (late deliveries of events a later slice covers,
// redeliveries of events an earlier slice applied, new trades on the keys the
// page is re-deriving), and concurrently, queued on the lock while a slice
// holds it. None is lost or overwritten: the page's later slices keep them
// (R1), and every position ends as the independent replay of the source plus
// the live trades gives; every trade row is stored once, as its event says.
func TestLiveWritesMidPageAreNeitherLostNorOverwritten(t *testing.T) {
	t.Parallel()
	src := enginetest.Ledger(t, 14, 400, 4)
	e := newEnv(t, storetest.Descriptor)
	e.s.SetSliceEvents(25)

	// The lossy live feed delivered about half of the source before recovery
	// starts; the rest is held back, to arrive mid-page.
	rng := rand.New(rand.NewPCG(14, 14))
	var late []wire.Event
	for _, ev := range src.Decoded {
		if rng.IntN(2) == 0 {
			feed(t, e, ev)
		} else {
			late = append(late, ev)
		}
	}

	slices := 0
	g := &liveBeyond{e: e, seq: src.Boundary, rng: rand.New(rand.NewPCG(41, 41)), slices: &slices}
	redelivered, lateDelivered := 0, 0
	e.s.SetAfterCommit(func(string) {
		slices++
		// Between slices: two late deliveries (some in windows still ahead,
		// some in windows already verified: redeliveries of what the page
		// inserted), a redelivery of an event live had, and a new trade.
		for k := 0; k < 2 && len(late) > 0; k++ {
			i := rng.IntN(len(late))
			feed(t, e, late[i])
			late = append(late[:i], late[i+1:]...)
			lateDelivered++
		}
		feed(t, e, src.Decoded[rng.IntN(len(src.Decoded))])
		redelivered++
		g.write(t)
	})

	// Concurrently: new trades every few milliseconds, each waiting for the
	// lock whenever a slice holds it.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(1+rand.IntN(3)) * time.Millisecond):
				g.write(t)
			}
		}
	}()
	res := catchUp(t, e, src, 10_000) // one page: every write below lands inside it
	close(stop)
	wg.Wait()
	for _, ev := range late { // whatever the feed still held arrives after the page
		feed(t, e, ev)
	}

	if res.VerifiedThroughSeq != src.Boundary || res.Slices < 10 {
		t.Fatalf("page %+v: want CURRENT at %d in many slices", res, src.Boundary)
	}
	mid := 0
	for _, n := range g.during {
		if n > 0 && n < slices {
			mid++
		}
	}
	if mid < res.Slices/2 {
		t.Fatalf("only %d of %d live writes committed between the page's first and last slice (%d slices)", mid, len(g.wrote), slices)
	}
	truth := append(append([]wire.Event(nil), src.Decoded...), g.wrote...)
	storetest.AssertPositions(t, e.s.Pool(), "s", truth)
	rows, diffs, err := storetest.CompareTrades(ctxb, e.s.Pool(), "s", truth)
	if err != nil || len(diffs) > 0 {
		t.Fatalf("trades: %v %v", err, diffs)
	}
	t.Logf("%d slices; %d live writes mid-page (%d between slices, %d late deliveries, %d redeliveries); %d trade rows as their events say",
		res.Slices, mid, slices, lateDelivered, redelivered, rows)
}
