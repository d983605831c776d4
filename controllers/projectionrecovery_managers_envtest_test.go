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
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/codes"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

func shard(t *testing.T, value string) (map[string]string, labels.Selector) {
	t.Helper()
	sel, err := labels.Parse(shardLabel + "=" + value)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{shardLabel: value}, sel
}

type committedPage struct {
	owner          string
	after, through int64
}

// TestController_TwoManagersNeverCommitAPageTwice: two managers with leader
// election off reconcile the same scope. Write safety comes from the
// PostgreSQL lease fence alone (FR-APR08): every window (afterSeq, throughSeq]
// is committed exactly once, the windows chain from genesis to the boundary
// across the hand-over, and the projection ends exact.
func TestController_TwoManagersNeverCommitAPageTwice(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "dual", 400, 0.3)
	lbl, sel := shard(t, "dual")

	var mu sync.Mutex
	var pages []committedPage
	record := func(r *ProjectionRecoveryReconciler) {
		r.OnPageCommitted = func(owner string, res store.PageResult) {
			mu.Lock()
			defer mu.Unlock()
			pages = append(pages, committedPage{owner, res.AfterSeq, res.VerifiedThroughSeq})
		}
	}
	stopA, recA, err := startManager("dual-a", sel, true, "", record)
	if err != nil {
		t.Fatal(err)
	}
	defer stopA()
	stopB, recB, err := startManager("dual-b", sel, true, "", record)
	if err != nil {
		t.Fatal(err)
	}
	defer stopB()

	obj := f.recovery(ns, "dual", lbl, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.PageSize, s.PagesPerCycle = 24, 1
		s.LeaseDuration = &metav1.Duration{Duration: 5 * time.Second}
		s.CycleTimeout = &metav1.Duration{Duration: 2 * time.Second}
	})

	// Let the first owner commit a few pages, then stop it mid catch-up: its
	// shutdown releases the lease and the other manager takes the scope over.
	var first string
	eventually(t, 60*time.Second, "a few committed pages", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(pages) >= 4 {
			first = pages[0].owner
			return true, nil
		}
		return false, nil
	})
	if first == "dual-a" {
		stopA()
	} else {
		stopB()
	}
	waitState(t, ns, obj.Name, 120*time.Second, "CURRENT", isCurrentAt(f.boundary()))
	// The manager without the lease reports the holder's progress: a lease
	// held by a live manager is not a failure of the scope, and counting it
	// as one would make the status flap between the managers.
	for _, r := range []*ProjectionRecoveryReconciler{recA, recB} {
		for _, code := range []codes.Code{codes.LeaseHeld, codes.LeaseLost, codes.CursorMoved} {
			if n := testutil.ToFloat64(r.Metrics.refusals.WithLabelValues(ns, obj.Name, f.scope, string(code))); n != 0 {
				t.Errorf("%s counted %v %s refusals", r.Owner, n, code)
			}
		}
	}

	mu.Lock()
	defer mu.Unlock()
	sort.Slice(pages, func(i, j int) bool { return pages[i].after < pages[j].after })
	owners := map[string]int{}
	var next int64
	for i, p := range pages {
		owners[p.owner]++
		if p.after != next {
			t.Fatalf("page %d covers (%d, %d] by %s, want it to start at %d: a window was committed twice or skipped\n%v", i, p.after, p.through, p.owner, next, pages)
		}
		next = p.through
	}
	if next != f.boundary() {
		t.Fatalf("committed windows end at %d, boundary is %d", next, f.boundary())
	}
	if len(owners) != 2 {
		t.Fatalf("pages by owner = %v, want both managers to have committed (hand-over)", owners)
	}
	storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())
}

// TestController_AutoRecoveryOffIsReadOnly: with auto-recovery disabled (the
// default, NFR-APR01) the controller reports completeness from the cursor and
// the member's boundary, and writes nothing to SQL: no cursor, no lease, no
// trade.
func TestController_AutoRecoveryOffIsReadOnly(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "readonly", 100, 0.3)
	lbl, sel := shard(t, "readonly")
	stop, _, err := startManager("readonly", sel, false, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	before := tableCounts(t, f)

	// The manager connects as the documented read-only role
	// (docs/database-role.md): SELECT must be all a read-only manager needs.
	f.dsn = f.readOnlyDSN
	obj := f.recovery(ns, "readonly", lbl, nil)
	got, _ := waitState(t, ns, obj.Name, 30*time.Second, "a read-only report", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.ObservedBoundarySeq == f.boundary()
	})
	if got.Status.Reason != recoveryv1.ReasonAutoRecoveryDisabled || got.Status.VerifiedThroughSeq != 0 || got.Status.Lag != f.boundary() || got.Status.Lease != nil {
		t.Fatalf("status = %+v", got.Status)
	}
	time.Sleep(500 * time.Millisecond)
	if after := tableCounts(t, f); after != before {
		t.Fatalf("SQL changed with auto-recovery off: before %+v, after %+v", before, after)
	}
	if cur, err := f.store.ReadCursor(context.Background(), f.scope); err != nil || cur.Exists {
		t.Fatalf("a cursor was written with auto-recovery off: %+v (err %v)", cur, err)
	}
	if l, err := f.store.ReadLease(context.Background(), f.scope); err != nil || l.Owner != "" {
		t.Fatalf("a lease was taken with auto-recovery off: %+v (err %v)", l, err)
	}
}

type counts struct{ trades, orderEvents, positions, cursor, lease int }

func tableCounts(t *testing.T, f *fixture) counts {
	t.Helper()
	var c counts
	err := f.pool.QueryRow(context.Background(), `SELECT
  (SELECT count(*) FROM trades), (SELECT count(*) FROM order_events), (SELECT count(*) FROM positions),
  (SELECT count(*) FROM projection_catchup_cursor), (SELECT count(*) FROM projection_catchup_lease)`).
		Scan(&c.trades, &c.orderEvents, &c.positions, &c.cursor, &c.lease)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestController_ManagerShutdownReleasesLeases: stopping a manager releases
// every lease it holds (FR-APR10), so another manager need not wait out the
// lease duration.
func TestController_ManagerShutdownReleasesLeases(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "shutdown", 60, 0.2)
	lbl, sel := shard(t, "stopper")
	stop, _, err := startManager("stopper", sel, true, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	obj := f.recovery(ns, "shutdown", lbl, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.LeaseDuration = &metav1.Duration{Duration: 10 * time.Minute}
	})
	waitState(t, ns, obj.Name, 60*time.Second, "CURRENT", isCurrentAt(f.boundary()))
	if l, _ := f.store.ReadLease(context.Background(), f.scope); l.Owner != "stopper/"+ns || !l.ExpiresAt.After(dbNow(t, f.store)) {
		t.Fatalf("lease before shutdown = %+v, want held by stopper", l)
	}
	stop()
	if l, _ := f.store.ReadLease(context.Background(), f.scope); l.ExpiresAt.After(dbNow(t, f.store)) {
		t.Fatalf("lease after shutdown = %+v, want expired", l)
	}
}

// TestController_ShutdownCancelsRunningCycle: a manager stopped while a cycle
// waits on a hanging member cancels that cycle instead of waiting it out, and
// still releases its lease (FR-APR10).
func TestController_ShutdownCancelsRunningCycle(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "hang", 60, 0.2)
	lbl, sel := shard(t, "hang")
	stop, _, err := startManager("hang", sel, true, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	obj := f.recovery(ns, "hang", lbl, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.Interval = &metav1.Duration{Duration: time.Second}
		s.LeaseDuration = &metav1.Duration{Duration: 10 * time.Minute}
		s.CycleTimeout = &metav1.Duration{Duration: 5 * time.Minute}
	})
	waitState(t, ns, obj.Name, 60*time.Second, "CURRENT", isCurrentAt(f.boundary()))

	// The member now hangs for a minute on every request; the next periodic
	// cycle blocks in its fetch.
	f.delay.Store(int64(time.Minute))
	eventually(t, 10*time.Second, "a cycle blocked on the member", func() (bool, error) { return f.inFlight.Load() > 0, nil })

	start := time.Now()
	stop()
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("shutdown took %s: the running cycle was waited out, not cancelled", took)
	}
	if l, _ := f.store.ReadLease(context.Background(), f.scope); l.ExpiresAt.After(dbNow(t, f.store)) {
		t.Fatalf("lease after shutdown = %+v, want released", l)
	}
}
