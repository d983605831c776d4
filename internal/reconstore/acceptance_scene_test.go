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

package reconstore

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
	"github.com/projection-recovery/projection-recovery/internal/reference/live"
	"github.com/projection-recovery/projection-recovery/internal/reference/member"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// scene is one scope on real parts, as production runs it:
//
//   - a reference member (command log, matching engine, the catch-up
//     contract served over HTTP) whose live feed drops 30 % of its events;
//   - the trade-processor's lossy live projector (internal/reference/live)
//     writing what arrives into a real PostgreSQL database built with the
//     documented roles (recoverydb), connected as its owner;
//   - the recovery worker applying verified pages as projection_recovery,
//     exactly as the controller's cycle does (AcquireLease, then Fetch +
//     ApplyPage until CURRENT; a refusal recorded on the cursor);
//   - reconciliation (NewRunner) detecting as projection_recovery_readonly
//     and repairing as projection_reconciliation.
//
// newScene leaves the scope verified through V (a first batch of commands,
// recovered to CURRENT) with a second batch written by the live feed only:
// the window (V, B] the next page covers.
type scene struct {
	t      *testing.T
	scope  string
	db     pgtest.DB
	admin  *pgxpool.Pool // the trade-processor: live projector, hand edits, dumps
	rec    *store.Store  // projection_recovery: the recovery worker's pages
	log    *engine.Log
	member *member.Member
	client *source.Client
	events []wire.Event // every event of the member, in consensus order
	v      int64        // the cursor's verified-through seq after the first batch

	wf   *Runner
	reg  *prometheus.Registry
	logs *lines // every line the workflow logged

	dryRuns, applies, rollbacks int // the workflow runs the test made
}

const (
	workerOwner  = "manager-0" // the recovery worker's lease owner
	recoveryPage = 1000        // the controller's default page size
	approver     = "ada"
)

// lines captures log lines (funcr, key/value JSON-ish text).
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, prefix+" "+args)
}

// count is the number of lines that contain every part.
func (l *lines) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, s := range l.all {
		for _, p := range parts {
			if !strings.Contains(s, p) {
				continue next
			}
		}
		n++
	}
	return n
}

// livePublisher is the live feed: every published event is projected at
// once by the lossy live projector.
type livePublisher struct {
	pool  *pgxpool.Pool
	scope string
}

func (p livePublisher) Publish(_ string, data []byte) error {
	return live.ApplyWire(context.Background(), p.pool, p.scope, data)
}

// sceneOpts shape a scene.
type sceneOpts struct {
	openings bool // one proven opening per key first (else every key starts flat)
	first    int  // commands recovered to CURRENT (0: 300)
	second   int  // commands only the live feed wrote (0: 150)
}

func newScene(t *testing.T, scope string, o sceneOpts) *scene {
	t.Helper()
	if o.first == 0 {
		o.first = 300
	}
	if o.second == 0 {
		o.second = 150
	}
	s := &scene{t: t, scope: scope, db: recoverydb.New(t), logs: &lines{}}
	s.admin = pgtest.Pool(t, s.db.Admin)
	s.rec = store.New(pgtest.Pool(t, s.db.Recovery))
	desc := engine.TestDescriptor(scope)
	var err error
	if s.log, err = engine.Create(t.TempDir(), desc, engine.LogOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.log.Close() })
	wl, err := engine.NewWorkload(7, engine.WorkloadConfig{Accounts: 4, Instruments: desc.Instruments, Openings: o.openings})
	if err != nil {
		t.Fatal(err)
	}
	if s.member, err = member.NewMember(member.MemberConfig{Log: s.log, Workload: wl,
		Publisher: livePublisher{pool: s.admin, scope: scope}, DropRate: 0.3, DropSeed: 11}); err != nil {
		t.Fatal(err)
	}
	h := member.NewHandler(s.log, member.HandlerOptions{})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if s.client, err = source.NewClient(source.ClientConfig{BaseURL: srv.URL, Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	s.exec(`INSERT INTO projection_runs (scope, epoch, managed, selected, phase, descriptor_hash, protocol_version)
VALUES ($1, 1, true, true, 'ACTIVE', $2, 1)`, scope, h.DescriptorHash())

	s.reg = prometheus.NewRegistry()
	logger := funcr.New(s.logs.add, funcr.Options{Verbosity: 1})
	tel, err := NewTelemetry(logger, s.reg)
	if err != nil {
		t.Fatal(err)
	}
	s.wf, err = NewRunner(RunnerConfig{
		Store:      store.New(pgtest.Pool(t, s.db.Reconciliation)),
		ReadPool:   pgtest.Pool(t, s.db.ReadOnly),
		Source:     s.client,
		Permission: recon.PermissionFunc(func(_ context.Context, p string) (bool, error) { return p == approver, nil }),
		Telemetry:  tel,
		StaleAfter: 5 * time.Minute,
		Log:        logger,
	})
	if err != nil {
		t.Fatal(err)
	}

	s.step(o.first)
	if pr, err := s.recover(); err != nil || !pr.Current() {
		t.Fatalf("first batch: recovery ended %v %+v, want CURRENT", err, pr)
	}
	s.v = s.cursor().VerifiedThroughSeq
	s.step(o.second)
	if b := s.log.Committed(); b <= s.v {
		t.Fatalf("the second batch did not move the boundary past %d", s.v)
	}
	return s
}

// step appends, commits and publishes n commands (the live feed drops some).
func (s *scene) step(n int) {
	s.t.Helper()
	for i := 0; i < n; i++ {
		_, outs, err := s.member.Step()
		if err != nil {
			s.t.Fatal(err)
		}
		for _, o := range outs {
			s.events = append(s.events, o.Event)
		}
	}
}

// recover is one recovery cycle as the controller runs it
// (controllers/projectionrecovery_cycle.go): the lease as the worker, then
// verified pages until CURRENT; a refused page is recorded on the cursor
// (RETRYING or BLOCKED with its code) and the cycle ends; the lease is
// released at the end.
func (s *scene) recover() (store.PageResult, error) {
	s.t.Helper()
	run, err := s.rec.SelectedRun(ctxb, s.scope)
	if err != nil {
		return store.PageResult{}, err
	}
	l, err := s.rec.AcquireLease(ctxb, s.scope, workerOwner, time.Minute)
	if err != nil {
		return store.PageResult{}, err
	}
	defer func() {
		if err := s.rec.ReleaseLease(ctxb, l); err != nil {
			s.t.Errorf("release the worker's lease: %v", err)
		}
	}()
	for {
		c, err := s.rec.ReadCursor(ctxb, s.scope)
		if err != nil {
			return store.PageResult{}, err
		}
		p, err := s.client.Fetch(ctxb, c.VerifiedThroughSeq, c.ChainDigest, run.DescriptorHash, recoveryPage)
		if err != nil {
			return store.PageResult{}, err
		}
		if p.Idle {
			return store.PageResult{State: store.StateCurrent, VerifiedThroughSeq: c.VerifiedThroughSeq, BoundarySeq: p.BoundarySeq},
				s.rec.RecordOutcome(ctxb, l, s.scope, store.StateCurrent, "", p.BoundarySeq)
		}
		pr, err := s.rec.ApplyPage(ctxb, l, run, p)
		if err != nil {
			state := store.StateBlocked
			if codes.Of(err).Transient() {
				state = store.StateRetrying
			}
			if rerr := s.rec.RecordOutcome(ctxb, l, s.scope, state, codes.Of(err), p.BoundarySeq); rerr != nil {
				s.t.Errorf("record the refusal: %v", rerr)
			}
			return pr, err
		}
		if pr.Current() {
			return pr, nil
		}
	}
}

func (s *scene) cursor() store.Cursor {
	s.t.Helper()
	c, err := s.rec.ReadCursor(ctxb, s.scope)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

func (s *scene) exec(sql string, args ...any) {
	s.t.Helper()
	if _, err := s.admin.Exec(ctxb, sql, args...); err != nil {
		s.t.Fatalf("%s: %v", sql, err)
	}
}

// one scans the single row of sql (as the admin).
func (s *scene) one(sql string, args []any, dst ...any) {
	s.t.Helper()
	if err := s.admin.QueryRow(ctxb, sql, args...).Scan(dst...); err != nil {
		s.t.Fatalf("%s: %v", sql, err)
	}
}

// projectionTables are every table a page or a repair writes, the
// projection and recovery's own (the lease aside: a repair takes it, which
// moves its fence; see dump).
var projectionTables = []string{"trades", "orders", "order_events", "positions", "projection_catchup_basis",
	"projection_catchup_cursor", "projection_catchup_outbox", "projection_trade_quarantine", "projection_position_quarantine"}

// dump is every row of every projection table as PostgreSQL renders it
// (numeric scale, microseconds), sorted, as one string per table. With
// exact=false positions.updated_at is left out: a position a repair rewrote
// from Before (rederive_position, adopt_source_opening) is stamped anew,
// because Before carries values, not that column.
func (s *scene) dump(exact bool) map[string]string {
	s.t.Helper()
	out := map[string]string{}
	for _, tbl := range projectionTables {
		from := pgx.Identifier{tbl}.Sanitize()
		if tbl == "positions" && !exact {
			from = `(SELECT scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq, quantity, avg_cost FROM positions)`
		}
		var v string
		if err := s.admin.QueryRow(ctxb, `SELECT count(*)::text || ' rows: ' || coalesce(string_agg(x::text, E'\n' ORDER BY x::text), '') FROM `+from+` x`).Scan(&v); err != nil {
			s.t.Fatal(err)
		}
		out[tbl] = v
	}
	return out
}

// withoutNotes is a dump without the repairs' notifications
// (store.NotifyRepairTx): a rollback announces the balance it puts back
// rather than unsaying the apply's announcement, which consumers have.
func withoutNotes(d map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range d {
		out[k] = v
	}
	_, rows, _ := strings.Cut(d["projection_catchup_outbox"], " rows: ")
	var keep []string
	for _, r := range strings.Split(rows, "\n") {
		if r != "" && !strings.Contains(r, ","+store.RepairMsgIDPrefix) {
			keep = append(keep, r)
		}
	}
	out["projection_catchup_outbox"] = itoa(int64(len(keep))) + " rows: " + strings.Join(keep, "\n")
	return out
}

// notes are the repairs' notifications of the scope in outbox order, as
// "account/instrument quantity@avg_cost" (canonical decimals).
func (s *scene) notes() []string {
	s.t.Helper()
	rows, err := s.admin.Query(ctxb, `SELECT account || '/' || instrument || ' ' || trim_scale(quantity)::text || '@' || trim_scale(avg_cost)::text
  FROM projection_catchup_outbox WHERE scope = $1 AND msg_id LIKE 'repair/%' ORDER BY id`, s.scope)
	if err != nil {
		s.t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// sameDump reports the tables whose dumps differ, with their first differing line.
func sameDump(got, want map[string]string) []string {
	var diffs []string
	for _, tbl := range projectionTables {
		if got[tbl] == want[tbl] {
			continue
		}
		g, w := strings.Split(got[tbl], "\n"), strings.Split(want[tbl], "\n")
		line := ""
		for i := 0; i < len(g) || i < len(w); i++ {
			var gl, wl string
			if i < len(g) {
				gl = g[i]
			}
			if i < len(w) {
				wl = w[i]
			}
			if gl != wl {
				line = fmt.Sprintf("got %q, want %q", gl, wl)
				break
			}
		}
		diffs = append(diffs, tbl+": "+line)
	}
	return diffs
}

// withoutCursor is a dump without the cursor row (a refused cycle records
// its state and code there, and nothing else).
func withoutCursor(d map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range d {
		if k != "projection_catchup_cursor" {
			out[k] = v
		}
	}
	out["projection_catchup_cursor"] = ""
	return out
}
