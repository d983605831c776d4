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

package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

// TestCarriedUsable: a cycle starts from the unit its predecessor carried
// only when the cursor it read is where the unit starts, the run is the one
// the unit was prepared against, and the spec still asks for the same
// client and page size, within maxCarryAge (issue 12, goal 2).
func TestCarriedUsable(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	digest := chain.Next(chain.Genesis, []byte("x"))
	frozen := int64(90)
	cl, other := &source.Client{}, &source.Client{}
	run := store.Run{RunID: 7, Scope: "s", Selected: true, Managed: true, Phase: store.PhaseActive, DescriptorHash: "d", ProtocolVersion: 1}
	unit := func() *carriedUnit {
		return &carriedUnit{ahead: &pageAhead{after: 40, digest: digest}, run: run, client: cl, size: 64, parked: now.Add(-time.Second)}
	}
	cur := store.Cursor{VerifiedThroughSeq: 40, ChainDigest: digest}
	for _, tc := range []struct {
		name   string
		edit   func(u *carriedUnit, cur *store.Cursor, run *store.Run, cl **source.Client, size *int, now *time.Time)
		usable bool
	}{
		{"the cursor is where the unit starts", func(*carriedUnit, *store.Cursor, *store.Run, **source.Client, *int, *time.Time) {}, true},
		{"the live projector moved checkpoint_seq (not a barrier)", func(_ *carriedUnit, _ *store.Cursor, r *store.Run, _ **source.Client, _ *int, _ *time.Time) {
			r.CheckpointSeq = 500
		}, true},
		{"another manager committed past it", func(_ *carriedUnit, c *store.Cursor, _ *store.Run, _ **source.Client, _ *int, _ *time.Time) {
			c.VerifiedThroughSeq = 55
		}, false},
		{"same seq, another chain (a cursor reset and a new history)", func(_ *carriedUnit, c *store.Cursor, _ *store.Run, _ **source.Client, _ *int, _ *time.Time) {
			c.ChainDigest = chain.Genesis
		}, false},
		{"the run became DRAINING", func(_ *carriedUnit, _ *store.Cursor, r *store.Run, _ **source.Client, _ *int, _ *time.Time) {
			r.Phase, r.FrozenSeq = store.PhaseDraining, &frozen
		}, false},
		{"another run was selected", func(_ *carriedUnit, _ *store.Cursor, r *store.Run, _ **source.Client, _ *int, _ *time.Time) {
			r.RunID = 8
		}, false},
		{"the source changed (another client)", func(_ *carriedUnit, _ *store.Cursor, _ *store.Run, c **source.Client, _ *int, _ *time.Time) {
			*c = other
		}, false},
		{"the page size changed", func(_ *carriedUnit, _ *store.Cursor, _ *store.Run, _ **source.Client, s *int, _ *time.Time) {
			*s = 128
		}, false},
		{"parked maxCarryAge ago", func(u *carriedUnit, _ *store.Cursor, _ *store.Run, _ **source.Client, _ *int, n *time.Time) {
			*n = u.parked.Add(maxCarryAge)
		}, true},
		{"parked longer ago", func(u *carriedUnit, _ *store.Cursor, _ *store.Run, _ **source.Client, _ *int, n *time.Time) {
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
// evicted), take removes it, and every unit dropped has its fetch stopped;
// after stopAll nothing is kept.
func TestCarryOver(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	// A unit whose fetch runs until it is cancelled.
	running := func(parked time.Time) *carriedUnit {
		ctx, cancel := context.WithCancel(context.Background())
		a := &pageAhead{cancel: cancel, done: make(chan struct{})}
		go func() {
			<-ctx.Done()
			close(a.done)
		}()
		return &carriedUnit{ahead: a, parked: parked}
	}
	stopped := func(u *carriedUnit) bool {
		select {
		case <-u.ahead.done:
			return true
		default:
			return false
		}
	}
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }

	c := newCarryOver(2)
	a, b, d := running(now), running(now.Add(time.Second)), running(now.Add(2*time.Second))
	if n := c.park(key("a"), a) + c.park(key("b"), b); n != 0 {
		t.Fatalf("%d evicted under the bound", n)
	}
	if n := c.park(key("d"), d); n != 1 || !stopped(a) || stopped(b) || stopped(d) {
		t.Fatalf("over the bound: %d evicted, a stopped %v, b %v, d %v; want the oldest (a) alone", n, stopped(a), stopped(b), stopped(d))
	}
	if c.take(key("a")) != nil {
		t.Fatal("an evicted unit was taken")
	}
	if got := c.take(key("b")); got != b || c.take(key("b")) != nil {
		t.Fatal("take did not return the unit once")
	}
	b.discard()
	b.discard() // a used unit is discarded by its reconcile again: harmless
	c.stopAll()
	if !stopped(d) {
		t.Fatal("stopAll left a fetch running")
	}
	e := running(now)
	if c.park(key("e"), e); !stopped(e) || c.take(key("e")) != nil {
		t.Fatal("a unit parked after stopAll was kept")
	}

	var none *carryOver
	f := running(now)
	if none.park(key("f"), f); !stopped(f) || none.take(key("f")) != nil {
		t.Fatal("a nil carryOver kept a unit")
	}
	none.stopAll()
}

// TestCarriedOutcomesExportedAtZero: a manager that has carried nothing yet
// already exports every outcome at 0, so a rate() or an alert on dropped
// units reads "none" from the start instead of "no data".
func TestCarriedOutcomesExportedAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	newMetrics(reg)
	const want = `
# HELP projection_recovery_carried_units_total Units of pages a catching-up cycle fetched for the scope's next cycle while its last unit committed, by outcome: used, dropped (the cursor, run or spec had moved) or evicted (more catching-up scopes than workers).
# TYPE projection_recovery_carried_units_total counter
projection_recovery_carried_units_total{outcome="dropped"} 0
projection_recovery_carried_units_total{outcome="evicted"} 0
projection_recovery_carried_units_total{outcome="used"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "projection_recovery_carried_units_total"); err != nil {
		t.Fatal(err)
	}
}

// TestFromCarried: on a real member and store, the carried unit a cycle
// starts from is the unit a fetch from the cursor gives, and it commits to
// the projection the events replay to; a unit that no longer starts at the
// cursor, or was prepared against another run, is dropped and counted.
func TestFromCarried(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "carried", 60, 0)
	cl, err := source.NewClient(source.ClientConfig{BaseURL: f.url})
	if err != nil {
		t.Fatal(err)
	}
	cur, run, err := f.store.ReadScope(ctx, f.scope)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r := &ProjectionRecoveryReconciler{AutoRecovery: true, Metrics: NewMetrics(reg), Clock: clock.RealClock{}}
	carried := func() *carriedUnit {
		return &carriedUnit{ahead: fetchAhead(ctx, f.store, cl, run, cur.VerifiedThroughSeq, cur.ChainDigest, 16, 1000), run: run, client: cl, size: 16, parked: time.Now()}
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
			defer u.discard()
			before := r.Metrics.Carried(carriedDropped)
			if page, prep := r.fromCarried(u, tc.cur, tc.run, cl, 16); page != nil || prep != nil {
				t.Fatal("a unit that does not start at the cursor of its run was used")
			}
			if r.Metrics.Carried(carriedDropped) != before+1 {
				t.Fatal("the dropped unit was not counted")
			}
		})
	}

	t.Run("from the cursor, it commits what the events replay to", func(t *testing.T) {
		u := carried()
		defer u.discard()
		page, prep := r.fromCarried(u, cur, run, cl, 16)
		if page == nil || prep == nil || r.Metrics.Carried(carriedUsed) != 1 {
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

// TestEnvtest_CyclesStartFromTheUnitsTheirPredecessorsCarried: a catch-up
// over many cycles starts each one after the first from the unit the one
// before fetched while its last unit committed, fetches every page once, and
// ends in the projection the events replay to.
func TestEnvtest_CyclesStartFromTheUnitsTheirPredecessorsCarried(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "carry", 500, 0.3)
	lbl, sel := shard(t, "carry")
	metrics := NewMetrics(prometheus.NewRegistry())
	stop, rec, err := startManager("carry-manager", sel, true, "", func(r *ProjectionRecoveryReconciler) { r.Metrics = metrics })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	obj := f.recovery(ns, "carry", lbl, func(s *recoveryv1.ProjectionRecoverySpec) { s.PageSize, s.PagesPerCycle = 20, 2 })
	waitState(t, ns, obj.Name, 120*time.Second, "CURRENT", isCurrentAt(f.boundary()))
	stop()
	storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())

	used, dropped := metrics.Carried(carriedUsed), metrics.Carried(carriedDropped)
	pages := testutil.ToFloat64(rec.Metrics.pages.WithLabelValues(ns, obj.Name, f.scope))
	t.Logf("%.0f pages, %.0f carried units used, %.0f dropped, %d member requests", pages, used, dropped, f.requests.Load())
	if pages < 20 {
		t.Fatalf("only %.0f pages: too short a catch-up to carry anything", pages)
	}
	// Every cycle but the first and the last starts from a carried unit (the
	// last may fetch idle); none is dropped when nothing else writes.
	if min := pages/2 - 2; used < min || dropped != 0 {
		t.Fatalf("%.0f carried units used (want ≥ %.0f), %.0f dropped", used, min, dropped)
	}
	// Pages are fetched once: the requests are the pages, plus the idle
	// probes and the few fetches that ended at the boundary.
	if req := float64(f.requests.Load()); req > pages+10 {
		t.Fatalf("%.0f member requests for %.0f pages: pages were fetched twice", req, pages)
	}
}
