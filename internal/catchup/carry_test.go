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
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

// TestCarriedUsable: a cycle starts from the unit its predecessor carried
// only when the cursor it read is where the unit starts, the run is the one
// the unit was prepared against, and the spec still asks for the same client
// and page size, within maxCarryAge (docs/performance.md, "What the manager
// does for speed").
func TestCarriedUsable(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	digest := chain.Next(chain.Genesis, []byte("x"))
	frozen := int64(90)
	cl, other := &source.Client{}, &source.Client{}
	run := store.Run{RunID: 7, Scope: "s", Selected: true, Managed: true, Phase: store.PhaseActive, DescriptorHash: "d", ProtocolVersion: 1}
	unit := func() *CarriedUnit {
		return &CarriedUnit{ahead: &pageAhead{after: 40, digest: digest}, run: run, client: cl, size: 64, parked: now.Add(-time.Second)}
	}
	cur := store.Cursor{VerifiedThroughSeq: 40, ChainDigest: digest}
	for _, tc := range []struct {
		name   string
		edit   func(u *CarriedUnit, cur *store.Cursor, run *store.Run, cl **source.Client, size *int, now *time.Time)
		usable bool
	}{
		{"the cursor is where the unit starts", func(*CarriedUnit, *store.Cursor, *store.Run, **source.Client, *int, *time.Time) {}, true},
		{"the live projector moved checkpoint_seq (not a barrier)", func(_ *CarriedUnit, _ *store.Cursor, r *store.Run, _ **source.Client, _ *int, _ *time.Time) {
			r.CheckpointSeq = 500
		}, true},
		{"another manager committed past it", func(_ *CarriedUnit, c *store.Cursor, _ *store.Run, _ **source.Client, _ *int, _ *time.Time) {
			c.VerifiedThroughSeq = 55
		}, false},
		{"same seq, another chain (a cursor reset and a new history)", func(_ *CarriedUnit, c *store.Cursor, _ *store.Run, _ **source.Client, _ *int, _ *time.Time) {
			c.ChainDigest = chain.Genesis
		}, false},
		{"the run became DRAINING", func(_ *CarriedUnit, _ *store.Cursor, r *store.Run, _ **source.Client, _ *int, _ *time.Time) {
			r.Phase, r.FrozenSeq = store.PhaseDraining, &frozen
		}, false},
		{"another run was selected", func(_ *CarriedUnit, _ *store.Cursor, r *store.Run, _ **source.Client, _ *int, _ *time.Time) {
			r.RunID = 8
		}, false},
		{"the source changed (another client)", func(_ *CarriedUnit, _ *store.Cursor, _ *store.Run, c **source.Client, _ *int, _ *time.Time) {
			*c = other
		}, false},
		{"the page size changed", func(_ *CarriedUnit, _ *store.Cursor, _ *store.Run, _ **source.Client, s *int, _ *time.Time) {
			*s = 128
		}, false},
		{"parked maxCarryAge ago", func(u *CarriedUnit, _ *store.Cursor, _ *store.Run, _ **source.Client, _ *int, n *time.Time) {
			*n = u.parked.Add(maxCarryAge)
		}, true},
		{"parked longer ago", func(u *CarriedUnit, _ *store.Cursor, _ *store.Run, _ **source.Client, _ *int, n *time.Time) {
			*n = u.parked.Add(maxCarryAge + time.Millisecond)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, c, r, client, size, at := unit(), cur, run, cl, 64, now
			tc.edit(u, &c, &r, &client, &size, &at)
			if got := carriedUsable(u, c, r, client, size, at); got != tc.usable {
				t.Fatalf("carriedUsable = %v, want %v", got, tc.usable)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		if carriedUsable(nil, cur, run, cl, 64, now) {
			t.Fatal("a nil unit is usable")
		}
	})
}

// TestCarryOver: one unit per resource, at most max in all (the oldest is
// evicted), Take removes it, and every unit dropped has its fetch stopped;
// after StopAll nothing is kept.
func TestCarryOver(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	// A unit whose fetch runs until it is cancelled.
	running := func(parked time.Time) *CarriedUnit {
		ctx, cancel := context.WithCancel(context.Background())
		a := &pageAhead{cancel: cancel, done: make(chan struct{})}
		go func() {
			<-ctx.Done()
			close(a.done)
		}()
		return &CarriedUnit{ahead: a, parked: parked}
	}
	stopped := func(u *CarriedUnit) bool {
		select {
		case <-u.ahead.done:
			return true
		default:
			return false
		}
	}
	key := func(n string) string { return "ns/" + n }

	c := NewCarryOver(2)
	a, b, d := running(now), running(now.Add(time.Second)), running(now.Add(2*time.Second))
	if n := c.park(key("a"), a) + c.park(key("b"), b); n != 0 {
		t.Fatalf("%d evicted under the bound", n)
	}
	if n := c.park(key("d"), d); n != 1 || !stopped(a) || stopped(b) || stopped(d) {
		t.Fatalf("over the bound: %d evicted, a stopped %v, b %v, d %v; want the oldest (a) alone", n, stopped(a), stopped(b), stopped(d))
	}
	if c.Take(key("a")) != nil {
		t.Fatal("an evicted unit was taken")
	}
	if got := c.Take(key("b")); got != b || c.Take(key("b")) != nil {
		t.Fatal("Take did not return the unit once")
	}
	b.Discard()
	b.Discard() // a used unit is discarded by its reconcile again: harmless
	c.StopAll()
	if !stopped(d) {
		t.Fatal("StopAll left a fetch running")
	}
	e := running(now)
	if c.park(key("e"), e); !stopped(e) || c.Take(key("e")) != nil {
		t.Fatal("a unit parked after StopAll was kept")
	}

	var none *CarryOver
	f := running(now)
	if none.park(key("f"), f); !stopped(f) || none.Take(key("f")) != nil {
		t.Fatal("a nil CarryOver kept a unit")
	}
	none.StopAll()
}

// TestFromCarried: on a real member and store, the carried unit a cycle
// starts from is the unit a fetch from the cursor gives, and it commits to
// the projection the events replay to; a unit that no longer starts at the
// cursor, or was prepared against another run, is dropped and counted.
func TestFromCarried(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "carried", 60)
	cl, err := source.NewClient(source.ClientConfig{BaseURL: f.url})
	if err != nil {
		t.Fatal(err)
	}
	cur, run, err := f.store.ReadScope(ctx, f.scope)
	if err != nil {
		t.Fatal(err)
	}
	counted := counters{}
	e := &Engine{AutoRecovery: true, Counters: counted, Clock: clock.RealClock{}}
	carried := func() *CarriedUnit {
		return &CarriedUnit{ahead: fetchAhead(ctx, f.store, cl, run, cur.VerifiedThroughSeq, cur.ChainDigest, 16, 1000), run: run, client: cl, size: 16, parked: time.Now()}
	}

	moved := cur
	moved.VerifiedThroughSeq = 3
	draining := run
	frozen := int64(5)
	draining.Phase, draining.FrozenSeq = store.PhaseDraining, &frozen
	for name, tc := range map[string]struct {
		cur store.Cursor
		run store.Run
	}{"the cursor moved": {moved, run}, "the run is draining": {cur, draining}} {
		t.Run(name, func(t *testing.T) {
			u := carried()
			defer u.Discard()
			before := counted[CarriedDropped]
			if page, prep := e.fromCarried(u, tc.cur, tc.run, cl, 16); page != nil || prep != nil {
				t.Fatal("a unit that does not start at the cursor of its run was used")
			}
			if counted[CarriedDropped] != before+1 {
				t.Fatal("the dropped unit was not counted")
			}
		})
	}

	t.Run("from the cursor, it commits what the events replay to", func(t *testing.T) {
		u := carried()
		defer u.Discard()
		page, prep := e.fromCarried(u, cur, run, cl, 16)
		if page == nil || prep == nil || counted[CarriedUsed] != 1 {
			t.Fatalf("the unit was not used: page %v prep %v", page, prep)
		}
		if page.ThroughSeq != f.boundary() || prep.Pages() < 2 {
			t.Fatalf("the unit ends at %d over %d pages, want the boundary %d over several", page.ThroughSeq, prep.Pages(), f.boundary())
		}
		lease, err := f.store.AcquireLease(ctx, f.scope, "carried", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := f.store.ApplyPrepared(ctx, lease, run, prep)
		if err != nil || pr.VerifiedThroughSeq != f.boundary() || !pr.Current() {
			t.Fatalf("applied through %d (current %v): %v", pr.VerifiedThroughSeq, pr.Current(), err)
		}
		storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())
	})
}
