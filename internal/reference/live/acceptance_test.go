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
	"context"
	"math/rand/v2"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/reference/member"

	"github.com/nats-io/nats.go"

	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
	"github.com/projection-recovery/projection-recovery/internal/reference/live"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// reorderer swaps some adjacent messages on their way to NATS, so the live
// projector sees a lossy AND reordered feed.
type reorderer struct {
	mu      sync.Mutex
	nc      *nats.Conn
	rng     *rand.Rand
	pending []byte
	subj    string
}

func (r *reorderer) Publish(subj string, data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.subj = subj
	if r.pending != nil {
		if err := r.nc.Publish(subj, data); err != nil {
			return err
		}
		p := r.pending
		r.pending = nil
		return r.nc.Publish(subj, p)
	}
	if r.rng.Float64() < 0.1 {
		r.pending = append([]byte(nil), data...)
		return nil
	}
	return r.nc.Publish(subj, data)
}

func (r *reorderer) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending != nil {
		r.nc.Publish(r.subj, r.pending)
		r.pending = nil
	}
	r.nc.Flush()
}

// Acceptance: a real in-process member (engine log, workload) publishes its
// live feed to NATS with 15% of the events dropped and some reordered; the
// live projector consumes it; recovery pulls pages from the member's HTTP
// source contract through the verifying client while trading and the live feed
// go on. Once CURRENT, every key equals an independent replay of the member's
// output in authoritative order (storetest.Replay: big.Rat, no shared code),
// and every trade and order version is present.
func TestAcceptance_LossyLiveProjectionRecoversToIndependentReplay(t *testing.T) {
	nc := testenv.NATSConn(t)
	desc := engine.Descriptor{EngineID: "member-1", Scope: "s", Instruments: []string{"ACME", "BOLT", "CRUX"}}
	lg, err := engine.Create(t.TempDir(), desc, engine.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := engine.NewWorkload(11, engine.WorkloadConfig{Accounts: 6, Instruments: desc.Instruments, Openings: true})
	if err != nil {
		t.Fatal(err)
	}
	pub := &reorderer{nc: nc, rng: rand.New(rand.NewPCG(1, 2))}
	m, err := member.NewMember(member.MemberConfig{Log: lg, Workload: w, Publisher: pub, DropRate: 0.15, DropSeed: 5})
	if err != nil {
		t.Fatal(err)
	}
	h := member.NewHandler(lg, member.HandlerOptions{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	client, err := source.NewClient(source.ClientConfig{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}

	e := newEnv(t, h.DescriptorHash())
	ctx, cancel := context.WithCancel(ctxb)
	defer cancel()
	liveDone := make(chan error, 1)
	go func() {
		liveDone <- live.Run(ctx, nc, member.DefaultSubject("s"), e.trade, "s", func(err error) { t.Errorf("live: %v", err) })
	}()
	time.Sleep(100 * time.Millisecond) // subscription established

	var all []wire.Event
	step := func(n int) {
		for i := 0; i < n; i++ {
			_, outs, err := m.Step()
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range outs {
				all = append(all, o.Event)
			}
		}
		pub.flush()
		waitLive(t, e, m.Stats().Published)
	}
	page := func() store.PageResult {
		c, err := e.s.ReadCursor(ctxb, "s")
		if err != nil {
			t.Fatal(err)
		}
		p, err := client.Fetch(ctxb, c.VerifiedThroughSeq, c.ChainDigest, e.run.DescriptorHash, 150)
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.s.ApplyPage(ctxb, e.l, e.run, p)
		if err != nil {
			t.Fatalf("page after %d: %v", c.VerifiedThroughSeq, err)
		}
		return res
	}

	step(800)
	if m.Stats().Dropped == 0 {
		t.Fatal("premise: the live feed must have lost events")
	}
	for i := 0; i < 3; i++ {
		page()
	}
	// Trading and the lossy live feed continue concurrently with recovery:
	// live writes and pages serialise on the projection write lock.
	var more []wire.Event
	traded := make(chan struct{})
	go func() {
		defer close(traded)
		for i := 0; i < 400; i++ {
			_, outs, err := m.Step()
			if err != nil {
				t.Error(err)
				return
			}
			for _, o := range outs {
				more = append(more, o.Event)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	pages := 0
	for done := false; !done; {
		select {
		case <-traded:
			done = true
		default:
			page()
			pages++
		}
	}
	all = append(all, more...)
	step(0)
	for res := page(); !res.Current(); res = page() {
	}
	t.Logf("%d pages applied while trading continued", pages)
	c, _ := e.s.ReadCursor(ctxb, "s")
	if c.VerifiedThroughSeq != lg.Committed() || c.State != store.StateCurrent {
		t.Fatalf("cursor %+v, member committed %d", c, lg.Committed())
	}
	storetest.AssertPositions(t, e.s.Pool(), "s", all)
	var trades, orders, wantTrades, wantOrders int
	e.s.Pool().QueryRow(ctxb, `SELECT (SELECT count(*) FROM trades), (SELECT count(*) FROM order_events)`).Scan(&trades, &orders)
	for _, ev := range all {
		if ev.Trade != nil {
			wantTrades++
		}
		if ev.Order != nil {
			wantOrders++
		}
	}
	if trades != wantTrades || orders != wantOrders {
		t.Fatalf("trades %d/%d, order versions %d/%d", trades, wantTrades, orders, wantOrders)
	}
	t.Logf("events %d, dropped by the feed %d, cursor %d, digest %s", len(all), m.Stats().Dropped, c.VerifiedThroughSeq, c.ChainDigest)
	cancel()
	<-liveDone
}

// waitLive waits until the live projector has written one row for each of the
// published events (each event adds exactly one trade, order version or opening).
func waitLive(t *testing.T, e env, published int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int64
		if err := e.s.Pool().QueryRow(ctxb, `SELECT (SELECT count(*) FROM trades WHERE written_by = 'live') +
  (SELECT count(*) FROM order_events) + (SELECT count(*) FROM positions WHERE opening_seq IS NOT NULL)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n >= published {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("live projector wrote %d of %d events", n, published)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
