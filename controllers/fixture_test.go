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
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/reference/member"

	"github.com/jackc/pgx/v5/pgxpool"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
	"github.com/projection-recovery/projection-recovery/internal/reference/live"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// fixture is one scope's real world: a PostgreSQL database with the
// trade-processor's schema and a selected run, a reference member (command
// log, matching engine, contract handler on a real TCP port) and the lossy
// live projector writing what the feed did not drop.
type fixture struct {
	t     testing.TB
	scope string
	dsn   string // the operator's DSN (projection_recovery), put in the Secret
	// readOnlyDSN connects as projection_recovery_readonly, the documented
	// role of a manager with auto-recovery off: an off test sets
	// f.dsn = f.readOnlyDSN before f.recovery to prove SELECT suffices.
	readOnlyDSN string
	// reconDSN connects as projection_reconciliation (approved repairs).
	reconDSN string
	pool     *pgxpool.Pool // the admin's (trade-processor's) pool on the same database
	store    *store.Store  // on pool
	log      *engine.Log
	member   *member.Member
	h        *member.Handler
	url      string

	mu     sync.Mutex
	events []wire.Event // every event the member produced, in consensus order
	srv    *http.Server
	addr   string

	requests atomic.Int64 // contract requests served
	inFlight atomic.Int64 // contract requests being served
	// delay, when set, holds every contract request that long (or until the
	// client gives up): a member that hangs.
	delay atomic.Int64
}

// livePublisher is the live feed: each published event is projected at once
// by the lossy live projector (the member drops a share before publishing).
type livePublisher struct {
	pool  *pgxpool.Pool
	scope string
}

func (p livePublisher) Publish(_ string, data []byte) error {
	return live.ApplyWire(context.Background(), p.pool, p.scope, data)
}

func newFixture(t testing.TB, scope string, commands int, dropRate float64) *fixture {
	t.Helper()
	scope = freshScope(scope)
	ctx := context.Background()
	// The manager under test reaches the database through the Secret as
	// projection_recovery with exactly the grants of docs/database-role.md;
	// the fixture itself (seeding runs, the live projector, assertions) is
	// the trade-processor and connects as the admin.
	db := recoverydb.New(t)
	f := &fixture{t: t, scope: scope, dsn: db.Recovery, readOnlyDSN: db.ReadOnly, reconDSN: db.Reconciliation}
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
	f.member, err = member.NewMember(member.MemberConfig{Log: f.log, Workload: w,
		Publisher: livePublisher{pool: f.pool, scope: scope}, DropRate: dropRate, DropSeed: 11})
	if err != nil {
		t.Fatal(err)
	}
	f.h = member.NewHandler(f.log, member.HandlerOptions{})
	f.addRun(scope)
	f.step(commands)
	f.serve("127.0.0.1:0")
	t.Cleanup(f.stop)
	return f
}

// scopesUsed counts the fixtures of each scope name in this test process.
var scopesUsed sync.Map

// freshScope returns scope the first time and "<scope>-<n>" the n-th time
// (go test -count=N runs a test again in the same process). The scope claim
// is cluster-wide and the envtest API server never deletes a test's
// namespace (there is no namespace controller), so the resource of an
// earlier run would still own the scope and refuse this run's as
// DuplicateScope.
func freshScope(scope string) string {
	n, _ := scopesUsed.LoadOrStore(scope, new(atomic.Int64))
	if i := n.(*atomic.Int64).Add(1); i > 1 {
		return fmt.Sprintf("%s-%d", scope, i)
	}
	return scope
}

// addRun selects an ACTIVE epoch-v1 run of the member's descriptor for
// scope, as the trade-processor would (the operator never writes runs).
func (f *fixture) addRun(scope string) { selectRun(f.t, f.pool, scope, f.h.DescriptorHash()) }

// selectRun inserts the selected ACTIVE epoch-v1 run of descriptorHash for
// scope through pool, as the trade-processor would.
func selectRun(t testing.TB, pool *pgxpool.Pool, scope, descriptorHash string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `INSERT INTO projection_runs (scope, epoch, managed, selected, phase, descriptor_hash, protocol_version)
VALUES ($1, 1, true, true, 'ACTIVE', $2, 1)`, scope, descriptorHash); err != nil {
		t.Fatal(err)
	}
}

// step appends, commits and publishes n more commands.
func (f *fixture) step(n int) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := 0; i < n; i++ {
		_, outs, err := f.member.Step()
		if err != nil {
			f.t.Fatal(err)
		}
		for _, o := range outs {
			f.events = append(f.events, o.Event)
		}
	}
}

func (f *fixture) allEvents() []wire.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]wire.Event(nil), f.events...)
}

func (f *fixture) boundary() int64 { return f.log.Committed() }

// serve starts the contract on addr (":0" picks a port; the same address
// again brings a stopped member back where clients expect it).
func (f *fixture) serve(addr string) {
	f.t.Helper()
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the old socket may linger briefly after stop
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		f.t.Fatalf("member listen %s: %v", addr, err)
	}
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == source.CatchupPath {
			f.requests.Add(1)
			f.inFlight.Add(1)
			defer f.inFlight.Add(-1)
			if d := time.Duration(f.delay.Load()); d > 0 {
				select {
				case <-time.After(d):
				case <-r.Context().Done():
					return
				}
			}
		}
		f.mu.Lock()
		h := f.h
		f.mu.Unlock()
		h.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: counted, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	f.mu.Lock()
	f.srv, f.addr, f.url = srv, ln.Addr().String(), "http://"+ln.Addr().String()
	f.mu.Unlock()
}

// stop takes the member down (connections refused until serve again).
func (f *fixture) stop() {
	f.mu.Lock()
	srv := f.srv
	f.srv = nil
	f.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// recovery returns a ProjectionRecovery for the fixture's scope with a DSN
// Secret created in ns.
func (f *fixture) recovery(ns, name string, labels map[string]string, mutate func(*recoveryv1.ProjectionRecoverySpec)) *recoveryv1.ProjectionRecovery {
	f.t.Helper()
	createSecret(f.t, ns, name+"-db", map[string]string{"dsn": f.dsn})
	obj := &recoveryv1.ProjectionRecovery{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: recoveryv1.ProjectionRecoverySpec{
			Scope:         f.scope,
			Source:        recoveryv1.SourceSpec{URL: f.url},
			Database:      recoveryv1.DatabaseSpec{DSNSecretRef: recoveryv1.SecretKeySelector{Name: name + "-db", Key: "dsn"}},
			PageSize:      64,
			PagesPerCycle: 2,
			Interval:      &metav1.Duration{Duration: 2 * time.Second},
			Backoff:       &recoveryv1.BackoffSpec{Base: metav1.Duration{Duration: 200 * time.Millisecond}, Cap: metav1.Duration{Duration: 2 * time.Second}},
			LeaseDuration: &metav1.Duration{Duration: 10 * time.Second},
			CycleTimeout:  &metav1.Duration{Duration: 5 * time.Second},
		},
	}
	if mutate != nil {
		mutate(&obj.Spec)
	}
	if err := k8sClient.Create(context.Background(), obj); err != nil {
		f.t.Fatalf("create ProjectionRecovery: %v", err)
	}
	return obj
}

// restartOver brings the member back over l, at the same address, its
// replay cache cold: a member that restarted, over its own log or another.
func (f *fixture) restartOver(l *engine.Log) {
	f.t.Helper()
	f.mu.Lock()
	addr := f.addr
	f.mu.Unlock()
	f.stop()
	h := member.NewHandler(l, member.HandlerOptions{})
	f.mu.Lock()
	f.h = h
	f.mu.Unlock()
	f.serve(addr)
}
