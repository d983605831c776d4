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
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

// drainingFrozenSeq picks a frozen sequence f for a DRAINING run such that
// the command right after f has more events than any command up to f, and
// returns f and the largest command up to it (the page size that holds every
// command <= f but not command f+1).
func drainingFrozenSeq(t *testing.T, f *fixture) (frozen int64, pageSize int32) {
	t.Helper()
	perSeq := map[int64]int{}
	for _, e := range f.allEvents() {
		perSeq[e.Seq()]++
	}
	var largest int
	var at int64
	for s := int64(1); s <= f.boundary(); s++ {
		if perSeq[s] > largest {
			largest, at = perSeq[s], s
		}
	}
	before := 0
	for s := int64(1); s < at; s++ {
		before = max(before, perSeq[s])
	}
	if before == 0 || at < 20 {
		t.Fatalf("the workload has no command larger than every earlier one after seq 20 (largest %d at %d)", largest, at)
	}
	return at - 1, int32(before)
}

// TestEnvtest_DrainingStopsAtFrozenSeq: a DRAINING run is caught up only to
// its frozen sequence (FR-APR09). At f the scope is CURRENT with lag 0 (the
// effective boundary is min(B, f)) on every manager, holder or observer, and
// no request reaches the member any more, even though the next command would
// not fit in a page and the member keeps trading.
func TestEnvtest_DrainingStopsAtFrozenSeq(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "drain", 160, 0.3)
	frozen, pageSize := drainingFrozenSeq(t, f)
	if _, err := f.pool.Exec(context.Background(), `UPDATE projection_runs SET phase = 'DRAINING', frozen_seq = $2 WHERE scope = $1`, f.scope, frozen); err != nil {
		t.Fatal(err)
	}
	lbl, sel := shard(t, "drain")
	var recs []*ProjectionRecoveryReconciler
	for _, owner := range []string{"drain-a", "drain-b"} {
		stop, rec, err := startManager(owner, sel, true, "")
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		recs = append(recs, rec)
	}
	obj := f.recovery(ns, "drain", lbl, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.PageSize, s.PagesPerCycle = pageSize, 100
		s.Interval = &metav1.Duration{Duration: time.Second}
	})
	got, _ := waitState(t, ns, obj.Name, 90*time.Second, "CURRENT at the frozen seq", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.State == recoveryv1.StateCurrent && o.Status.VerifiedThroughSeq == frozen
	})
	if got.Status.Lag != 0 {
		t.Fatalf("lag = %d at the frozen seq %d (boundary %d), want 0", got.Status.Lag, frozen, got.Status.ObservedBoundarySeq)
	}

	f.step(30) // the member keeps trading past f
	requests := f.requests.Load()
	deadline := time.Now().Add(4 * time.Second) // four intervals, on both managers
	for time.Now().Before(deadline) {
		o := getRecovery(t, ns, obj.Name)
		if o.Status.State != recoveryv1.StateCurrent || o.Status.VerifiedThroughSeq != frozen || o.Status.Lag != 0 {
			t.Fatalf("left CURRENT at the frozen seq: state=%s reason=%s verified=%d lag=%d message=%q",
				o.Status.State, o.Status.Reason, o.Status.VerifiedThroughSeq, o.Status.Lag, o.Status.Message)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := f.requests.Load() - requests; n != 0 {
		t.Fatalf("%d requests reached the member after the cursor reached the frozen seq, want none", n)
	}
	for _, rec := range recs {
		e := registryEntry(t, rec.Registry, ns, obj.Name)
		if e.Completeness.State != string(recoveryv1.StateCurrent) || e.Completeness.Lag != 0 {
			t.Fatalf("%s reports %+v, want CURRENT with lag 0", rec.Owner, e.Completeness)
		}
	}
	cur, err := f.store.ReadCursor(context.Background(), f.scope)
	if err != nil || cur.VerifiedThroughSeq != frozen {
		t.Fatalf("SQL cursor = %+v (err %v), want verified through %d", cur, err, frozen)
	}
}

// TestEnvtest_IdleScopeRechecksItsRun: an idle scope notices within its
// interval that its run is no longer eligible (sealed, unselected): BLOCKED
// NOT_ELIGIBLE, with auto-recovery on and in read-only mode (FR-APR09 and
// the spec's scope: sealed/unselected scopes need operator review).
func TestEnvtest_IdleScopeRechecksItsRun(t *testing.T) {
	cases := []struct {
		name         string
		autoRecovery bool
		change       string
		ready        func(f *fixture) func(*recoveryv1.ProjectionRecovery) bool
	}{
		{"sealed", true, `UPDATE projection_runs SET phase = 'SEALED' WHERE scope = $1`,
			func(f *fixture) func(*recoveryv1.ProjectionRecovery) bool { return isCurrentAt(f.boundary()) }},
		{"unselected", false, `UPDATE projection_runs SET selected = false WHERE scope = $1`,
			func(f *fixture) func(*recoveryv1.ProjectionRecovery) bool {
				return func(o *recoveryv1.ProjectionRecovery) bool { return o.Status.ObservedBoundarySeq == f.boundary() }
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			f := newFixture(t, "recheck-"+tc.name, 60, 0.2)
			lbl, sel := shard(t, "recheck-"+tc.name)
			stop, _, err := startManager("recheck-"+tc.name, sel, tc.autoRecovery, "")
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			obj := f.recovery(ns, "recheck", lbl, func(s *recoveryv1.ProjectionRecoverySpec) {
				s.Interval = &metav1.Duration{Duration: time.Second}
			})
			before, _ := waitState(t, ns, obj.Name, 60*time.Second, "the first report", tc.ready(f))
			if _, err := f.pool.Exec(context.Background(), tc.change, f.scope); err != nil {
				t.Fatal(err)
			}
			got, _ := waitState(t, ns, obj.Name, 10*time.Second, "BLOCKED NOT_ELIGIBLE within the idle interval", func(o *recoveryv1.ProjectionRecovery) bool {
				return o.Status.State == recoveryv1.StateBlocked && o.Status.Reason == string(codes.NotEligible)
			})
			if got.Status.VerifiedThroughSeq != before.Status.VerifiedThroughSeq {
				t.Fatalf("verified moved from %d to %d", before.Status.VerifiedThroughSeq, got.Status.VerifiedThroughSeq)
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, recoveryv1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue {
				t.Fatalf("Stalled = %+v, want True", c)
			}
		})
	}
}

// TestEnvtest_SlowMemberReachesCurrent: a member whose non-idle answers take
// longer than the lease duration still lets the scope make progress: the
// fetch has its own timeout and the lease's clock covers only the writes
// (FR-APR08/10). Before, the cycle's deadline was the lease duration and
// included the fetch, so such a scope stayed RETRYING forever.
func TestEnvtest_SlowMemberReachesCurrent(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "slow", 60, 0.3)
	const replay = 6 * time.Second // longer than the 5s lease
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if after, err := strconv.ParseInt(r.URL.Query().Get("afterSeq"), 10, 64); err == nil && after < f.boundary() {
			select {
			case <-time.After(replay):
			case <-r.Context().Done():
				return
			}
		}
		f.h.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(slow)
	defer srv.Close()
	events := int32(len(f.allEvents()))
	obj := f.recovery(ns, "slow", nil, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.Source.URL = srv.URL
		s.PageSize, s.PagesPerCycle = events/2+8, 2 // two pages: the lease must be renewed between them
		s.LeaseDuration = &metav1.Duration{Duration: 5 * time.Second}
		s.CycleTimeout = &metav1.Duration{Duration: 4 * time.Second}
	})
	waitState(t, ns, obj.Name, 90*time.Second, "CURRENT despite a member slower than the lease", isCurrentAt(f.boundary()))
	storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())
}

// TestEnvtest_LagShownAsZeroAfterFirstCycle: a scope that becomes CURRENT in
// its very first cycle has status.lag: 0 on the object (the LAG column shows
// 0, not blank).
func TestEnvtest_LagShownAsZeroAfterFirstCycle(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "lagzero", 30, 0.2)
	obj := f.recovery(ns, "lagzero", nil, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.PageSize, s.PagesPerCycle = 10000, 20
	})
	waitState(t, ns, obj.Name, 60*time.Second, "CURRENT", isCurrentAt(f.boundary()))
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(recoveryv1.GroupVersion.WithKind("ProjectionRecovery"))
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), u); err != nil {
		t.Fatal(err)
	}
	lag, found, err := unstructured.NestedInt64(u.Object, "status", "lag")
	if err != nil || !found || lag != 0 {
		t.Fatalf("status.lag on the object: value %d, present %v (err %v); want present and 0\nstatus: %v", lag, found, err, u.Object["status"])
	}
}
