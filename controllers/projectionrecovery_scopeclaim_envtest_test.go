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
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

// countingSource serves the fixture's member contract on its own port and
// counts the requests that reach it, so a test can tell which resource asked.
func countingSource(t *testing.T, f *fixture) (url string, requests *atomic.Int64) {
	t.Helper()
	requests = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		f.h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, requests
}

func isDuplicateOf(owner string) func(*recoveryv1.ProjectionRecovery) bool {
	return func(o *recoveryv1.ProjectionRecovery) bool {
		c := meta.FindStatusCondition(o.Status.Conditions, recoveryv1.ConditionStalled)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == recoveryv1.ReasonDuplicateScope &&
			strings.Contains(c.Message, owner) && o.Status.ObservedGeneration == o.Generation
	}
}

func deleteAndWait(t *testing.T, obj *recoveryv1.ProjectionRecovery) {
	t.Helper()
	if err := k8sClient.Delete(context.Background(), getRecovery(t, obj.Namespace, obj.Name)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, obj.Name+" to be gone", func() (bool, error) {
		err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), &recoveryv1.ProjectionRecovery{})
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})
}

// TestEnvtest_DuplicateScopeRefused: a second ProjectionRecovery on a scope
// another one already owns is refused (Stalled=True, DuplicateScope, naming
// the owner) and never runs a cycle: no source request, no lease taken, no
// SQL written. Deleting it leaves the owner's lease alone (every resource of
// one manager shares the manager's lease identity, so its finalizer would
// otherwise release the owner's lease). Deleting the owner hands the scope to
// the remaining resource at once, through the watch (its own interval is an
// hour), and it catches up from the owner's cursor.
func TestEnvtest_DuplicateScopeRefused(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	f := newFixture(t, "dup", 80, 0.3)
	hour := func(s *recoveryv1.ProjectionRecoverySpec) {
		s.Interval = &metav1.Duration{Duration: time.Hour}
		s.LeaseDuration = &metav1.Duration{Duration: 10 * time.Minute}
	}
	owner := f.recovery(ns, "dup-a", nil, hour)
	waitState(t, ns, owner.Name, 60*time.Second, "the owner CURRENT", isCurrentAt(f.boundary()))
	leaseBefore, err := f.store.ReadLease(ctx, f.scope)
	if err != nil || leaseBefore.Owner != "suite-manager/"+ns {
		t.Fatalf("lease = %+v (err %v), want held by suite-manager/<namespace>", leaseBefore, err)
	}
	countsBefore := tableCounts(t, f)

	// A second resource on the same scope, with its own source endpoint so
	// that any request it makes is seen.
	dupURL, dupRequests := countingSource(t, f)
	dup := f.recovery(ns, "dup-b", nil, func(s *recoveryv1.ProjectionRecoverySpec) {
		hour(s)
		s.Source.URL = dupURL
	})
	got, _ := waitState(t, ns, dup.Name, 20*time.Second, "dup-b refused as a duplicate of dup-a", isDuplicateOf(ns+"/dup-a"))
	if got.Status.State != "" || got.Status.Lease != nil || got.Status.VerifiedThroughSeq != 0 {
		t.Fatalf("the refused duplicate carries state: %+v", got.Status)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, recoveryv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Ready = %+v, want False for a refused duplicate", c)
	}
	time.Sleep(500 * time.Millisecond) // a cycle, had one started, would have asked by now
	if n := dupRequests.Load(); n != 0 {
		t.Fatalf("the refused duplicate sent %d requests to its source", n)
	}
	if l, _ := f.store.ReadLease(ctx, f.scope); l.Fence != leaseBefore.Fence || !l.ExpiresAt.After(dbNow(t, f.store)) {
		t.Fatalf("lease after the duplicate = %+v, want the owner's fence %d, unexpired", l, leaseBefore.Fence)
	}
	if c := tableCounts(t, f); c != countsBefore {
		t.Fatalf("SQL changed: before %+v, after %+v", countsBefore, c)
	}
	if o := getRecovery(t, ns, owner.Name); o.Status.State != recoveryv1.StateCurrent || o.Status.Reason != "" {
		t.Fatalf("the owner's status changed: %s/%s", o.Status.State, o.Status.Reason)
	}

	// Deleting the duplicate must not release the owner's lease.
	deleteAndWait(t, dup)
	if l, _ := f.store.ReadLease(ctx, f.scope); l.Owner != "suite-manager/"+ns || l.Fence != leaseBefore.Fence || !l.ExpiresAt.After(dbNow(t, f.store)) {
		t.Fatalf("lease after deleting the duplicate = %+v, want still held (fence %d, unexpired)", l, leaseBefore.Fence)
	}

	// Another duplicate; then the owner goes and the duplicate takes over.
	succURL, succRequests := countingSource(t, f)
	succ := f.recovery(ns, "dup-c", nil, func(s *recoveryv1.ProjectionRecoverySpec) {
		hour(s)
		s.Source.URL = succURL
	})
	waitState(t, ns, succ.Name, 20*time.Second, "dup-c refused as a duplicate of dup-a", isDuplicateOf(ns+"/dup-a"))
	if n := succRequests.Load(); n != 0 {
		t.Fatalf("the refused duplicate sent %d requests to its source", n)
	}
	f.step(40)
	deleteAndWait(t, owner)
	got, _ = waitState(t, ns, succ.Name, 30*time.Second, "dup-c CURRENT at the grown boundary after the owner is gone", isCurrentAt(f.boundary()))
	if got.Status.Lease == nil || got.Status.Lease.Fence <= leaseBefore.Fence {
		t.Fatalf("lease after the takeover = %+v, want a new fence above %d (the owner released it)", got.Status.Lease, leaseBefore.Fence)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, recoveryv1.ConditionStalled); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Stalled = %+v after the takeover, want False", c)
	}
	storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())
}

// TestEnvtest_ScopeAcrossNamespaces: the claim is per namespace. A resource
// in another namespace on the same scope, created first, whose Secrets
// point at another (here unreachable) database, cannot stall yours: yours
// goes CURRENT while it retries on its own. One in another namespace that
// does reach the same database meets yours at the fenced lease, which is
// per manager and namespace, as two managers do: both stay CURRENT as the
// member grows, and every position equals the independent replay.
func TestEnvtest_ScopeAcrossNamespaces(t *testing.T) {
	nsA, nsB, nsC := newNamespace(t), newNamespace(t), newNamespace(t)
	f := newFixture(t, "dup-ns", 30, 0.2)
	createSecret(t, nsB, "elsewhere-db", map[string]string{"dsn": "postgres://nobody@127.0.0.1:1/elsewhere?sslmode=disable&connect_timeout=1"})
	squatter := f.recovery(nsB, "squatter", nil, func(s *recoveryv1.ProjectionRecoverySpec) { s.Database.DSNSecretRef.Name = "elsewhere-db" })
	got, _ := waitState(t, nsB, squatter.Name, 30*time.Second, "the squatter retrying on its own database", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.State == recoveryv1.StateRetrying
	})
	// Older by at least a second (creationTimestamp precision).
	time.Sleep(time.Until(got.CreationTimestamp.Add(1100 * time.Millisecond)))
	owner := f.recovery(nsA, "owner", nil, nil)
	got, _ = waitState(t, nsA, owner.Name, 60*time.Second, "yours CURRENT beside an older resource on the scope in another namespace", isCurrentAt(f.boundary()))
	if got.Status.Lease == nil || got.Status.Lease.Owner != "suite-manager/"+nsA {
		t.Fatalf("lease %+v, want held by suite-manager/%s", got.Status.Lease, nsA)
	}

	// Another namespace, the same database: the two meet at the lease, each
	// under its own identity (a page is committed by whichever holds it,
	// never under a shared fence), and both report the scope complete.
	other := f.recovery(nsC, "other", nil, nil)
	waitState(t, nsC, other.Name, 30*time.Second, "the other namespace's resource CURRENT", isCurrentAt(f.boundary()))
	f.step(20)
	if err := k8sClient.Patch(context.Background(), got, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"recovery.projection.io/requested-at":"1"}}}`))); err != nil {
		t.Fatal(err)
	}
	waitState(t, nsA, owner.Name, 30*time.Second, "yours CURRENT at the grown boundary", isCurrentAt(f.boundary()))
	waitState(t, nsC, other.Name, 30*time.Second, "the other CURRENT at the grown boundary", isCurrentAt(f.boundary()))
	if l, err := f.store.ReadLease(context.Background(), f.scope); err != nil || (l.Owner != "suite-manager/"+nsA && l.Owner != "suite-manager/"+nsC) {
		t.Fatalf("lease %+v (err %v), want held under one namespace's identity", l, err)
	}
	storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())
}

// dropRecoveryTables leaves the fixture's database with the trade-processor's
// tables only, as before ri06-automatic-recovery.sql was ever applied.
func dropRecoveryTables(t *testing.T, f *fixture) {
	t.Helper()
	// Every table recovery's migrations create, and the version table: the
	// database as it was before recovery was ever installed.
	if _, err := f.pool.Exec(context.Background(), `DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT tablename FROM pg_tables WHERE schemaname = current_schema()
             AND (tablename LIKE 'projection\_catchup\_%' OR tablename LIKE 'projection\_reconciliation\_%'
                  OR tablename LIKE 'projection\_%\_quarantine' OR tablename = 'projection_recovery_schema_version')
  LOOP
    EXECUTE format('DROP TABLE %I CASCADE', r.tablename);
  END LOOP;
END $$`); err != nil {
		t.Fatal(err)
	}
}

// recoveryTables lists which of recovery's tables exist.
func recoveryTables(t *testing.T, f *fixture) []string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT table_name::text FROM information_schema.tables
WHERE table_schema = current_schema() AND table_name LIKE 'projection\_catchup\_%' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// baseCounts counts the trade-processor's rows (recovery's tables may be absent).
func baseCounts(t *testing.T, f *fixture) [3]int {
	t.Helper()
	var c [3]int
	if err := f.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM trades), (SELECT count(*) FROM order_events), (SELECT count(*) FROM positions)`).
		Scan(&c[0], &c[1], &c[2]); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEnvtest_SchemaMissingWithAutoRecoveryOff: a read-only manager (NFR-APR01)
// facing a database without recovery's tables reports SCHEMA_MISSING, asks
// the member nothing and creates nothing: no table, no row.
func TestEnvtest_SchemaMissingWithAutoRecoveryOff(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "noschema-off", 40, 0.3)
	dropRecoveryTables(t, f)
	before := baseCounts(t, f)
	lbl, sel := shard(t, "noschema-off")
	stop, _, err := startManager("noschema-off", sel, false, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	obj := f.recovery(ns, "noschema-off", lbl, nil)
	got, _ := waitState(t, ns, obj.Name, 30*time.Second, "status.reason SCHEMA_MISSING", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.Reason == string(codes.SchemaMissing) && o.Status.ObservedGeneration == o.Generation
	})
	if !strings.Contains(got.Status.Message, "migrate") {
		t.Fatalf("message %q does not say how to fix it", got.Status.Message)
	}
	time.Sleep(500 * time.Millisecond)
	if tables := recoveryTables(t, f); len(tables) != 0 {
		t.Fatalf("a read-only manager created %v", tables)
	}
	if after := baseCounts(t, f); after != before {
		t.Fatalf("SQL changed with auto-recovery off: before %v, after %v", before, after)
	}
	if n := f.requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the member before the schema was there", n)
	}
}

// TestEnvtest_SchemaAppliedWithAutoRecoveryOn: with auto-recovery on, the
// manager applies ri06-automatic-recovery.sql to a database that lacks it
// (once per pool) and the scope catches up to CURRENT.
func TestEnvtest_SchemaAppliedWithAutoRecoveryOn(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "noschema-on", 60, 0.3)
	dropRecoveryTables(t, f)
	// Applying the schema needs CREATE on it (docs/database-role.md, "What
	// the manager does at startup"): the disposable auto-recovery-local setup
	// gives the runtime role that right; without it the manager would report
	// SCHEMA_MISSING ("run manager migrate as the schema owner").
	if _, err := f.pool.Exec(context.Background(), `DO $$ BEGIN EXECUTE format('GRANT CREATE ON SCHEMA %I TO projection_recovery', current_schema()); END $$`); err != nil {
		t.Fatal(err)
	}
	obj := f.recovery(ns, "noschema-on", nil, nil)
	waitState(t, ns, obj.Name, 60*time.Second, "CURRENT after the schema was applied", isCurrentAt(f.boundary()))
	want := []string{"projection_catchup_basis", "projection_catchup_cursor", "projection_catchup_lease", "projection_catchup_outbox"}
	if got := recoveryTables(t, f); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("recovery tables = %v, want %v", got, want)
	}
	storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())
}
