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

package catchup

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
	"github.com/projection-recovery/projection-recovery/internal/reference/live"
	"github.com/projection-recovery/projection-recovery/internal/reference/member"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// fixture is one scope's real world for the engine's tests: a PostgreSQL
// database with the trade-processor's schema and a selected run, and a
// reference member serving the catch-up contract over HTTP; the live feed
// projects each published event at once (none dropped: the tests fetch).
type fixture struct {
	scope string
	pool  *pgxpool.Pool // the admin's (trade-processor's) pool
	store *store.Store  // on pool
	log   *engine.Log
	url   string

	// h serves the contract; restart replaces it (a member that came back
	// over another log, its replay cache cold).
	h atomic.Pointer[member.Handler]

	mu     sync.Mutex
	events []wire.Event // every event the member produced, in consensus order
	// delay, when set, holds every contract request that long (or until the
	// client gives up): a member that hangs.
	delay atomic.Int64
}

// counters is a Counters that remembers the counts (not safe for
// concurrent use: the tests count from one goroutine).
type counters map[string]int

func (c counters) CarriedUnits(outcome string, n int) { c[outcome] += n }

func newFixture(t testing.TB, scope string, commands int) *fixture {
	t.Helper()
	ctx := context.Background()
	db := recoverydb.New(t)
	f := &fixture{scope: scope}
	var err error
	if f.store, err = store.Open(ctx, db.Admin); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.store.Close)
	f.pool = f.store.Pool()
	desc := engine.TestDescriptor(scope)
	if f.log, err = engine.Create(t.TempDir(), desc, engine.LogOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := engine.NewWorkload(7, engine.WorkloadConfig{Accounts: 4, Instruments: desc.Instruments, Openings: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := member.NewMember(member.MemberConfig{Log: f.log, Workload: w, Publisher: livePublisher{f}})
	if err != nil {
		t.Fatal(err)
	}
	h := member.NewHandler(f.log, member.HandlerOptions{})
	f.h.Store(h)
	if _, err := f.pool.Exec(ctx, `INSERT INTO projection_runs (scope, epoch, managed, selected, phase, descriptor_hash, protocol_version)
VALUES ($1, 1, true, true, 'ACTIVE', $2, 1)`, scope, h.DescriptorHash()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < commands; i++ {
		_, outs, err := m.Step()
		if err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		for _, o := range outs {
			f.events = append(f.events, o.Event)
		}
		f.mu.Unlock()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := time.Duration(f.delay.Load()); d > 0 && r.URL.Path == source.CatchupPath {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		f.h.Load().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// livePublisher is the live feed: each published event is projected at once.
type livePublisher struct{ f *fixture }

func (p livePublisher) Publish(_ string, data []byte) error {
	return live.ApplyWire(context.Background(), p.f.pool, p.f.scope, data)
}

func (f *fixture) allEvents() []wire.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]wire.Event(nil), f.events...)
}

func (f *fixture) boundary() int64 { return f.log.Committed() }

// history is a member's command log traded by the fixture's workload (seed
// 7, four accounts, openings), its clock starting at start: the same start
// as the fixture's member (the workload's default) trades the very same
// commands again, another start the same commands stamped otherwise, i.e.
// another history at the same sequences.
type history struct {
	log *engine.Log
	w   *engine.Workload
}

func newHistory(t testing.TB, scope string, start time.Time) *history {
	t.Helper()
	desc := engine.TestDescriptor(scope)
	l, err := engine.Create(t.TempDir(), desc, engine.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := engine.NewWorkload(7, engine.WorkloadConfig{Accounts: 4, Instruments: desc.Instruments, Openings: true, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	return &history{log: l, w: w}
}

// trade appends and commits commands until the log holds n.
func (h *history) trade(t testing.TB, n int64) {
	t.Helper()
	for h.log.LastSeq() < n {
		if _, err := h.log.Append(h.w.Next()); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.log.Commit(h.log.LastSeq()); err != nil {
		t.Fatal(err)
	}
}

// restart brings the member back over l with a cold replay cache, and
// returns its handler (its Stats count the replays it ran).
func (f *fixture) restart(l *engine.Log) *member.Handler {
	h := member.NewHandler(l, member.HandlerOptions{})
	f.h.Store(h)
	return h
}
