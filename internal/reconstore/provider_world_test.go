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
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
	"github.com/projection-recovery/projection-recovery/internal/reference/member"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envMemberDir); dir != "" {
		os.Exit(serveMemberProcess(dir)) // the re-executed binary is a member, not a test run
	}
	if spec := os.Getenv(envLive); spec != "" {
		os.Exit(serveLiveProcess(spec)) // the re-executed binary is the live projector
	}
	pgtest.MainLeakChecked(m)
}

var ctxb = context.Background()

// world is one scope on real parts: a reference member (command log,
// matching engine, the contract served over HTTP) and a real PostgreSQL
// database with the documented roles, whose projection the store caught up
// from genesis through the member's boundary, page by page, exactly as the
// manager does.
type world struct {
	t      testing.TB
	scope  string
	db     pgtest.DB
	admin  *pgxpool.Pool // the trade-processor's (owner's) pool: seeding and breaking rows
	log    *engine.Log
	srv    *httptest.Server
	client *source.Client
	events []source.Event // every event of the member, in order (keep = true only)
}

// worldOpts shape a world.
type worldOpts struct {
	catchUp    bool // bring the projection to CURRENT through store.ApplyPage
	keep       bool // keep every source event (small worlds only)
	noOpenings bool // a workload without proven openings
	accounts   int  // 0: 6
	// memberProcess serves the log from a child process (the test binary
	// re-executed, see startMemberProcess) instead of this one, so this
	// process's heap holds reconciliation's memory only, as in production
	// where the member is another process. w.log and w.srv are then nil.
	memberProcess bool
}

// newWorld builds a log of commands (proven openings first unless
// noOpenings), serves it, selects an ACTIVE run and, when catchUp, brings the
// projection to CURRENT through store.ApplyPage as projection_recovery.
func newWorld(t testing.TB, scope string, commands int, o worldOpts) *world {
	t.Helper()
	w := &world{t: t, scope: scope, db: recoverydb.New(t)}
	w.admin = pgtest.Pool(t, w.db.Admin)
	desc := engine.TestDescriptor(scope)
	if o.accounts == 0 {
		o.accounts = 6
	}
	var err error
	logDir := t.TempDir()
	if commands > 0 {
		w.log, err = engine.BuildLog(logDir, desc, 42, engine.WorkloadConfig{Accounts: o.accounts, Instruments: desc.Instruments, Openings: !o.noOpenings}, commands, 0)
	} else {
		w.log, err = engine.Create(logDir, desc, engine.LogOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	url := ""
	if o.memberProcess {
		if err := w.log.Close(); err != nil {
			t.Fatal(err)
		}
		w.log, url = nil, startMemberProcess(t, logDir)
	} else {
		l := w.log
		t.Cleanup(func() { _ = l.Close() })
		w.srv = httptest.NewServer(member.NewHandler(w.log, member.HandlerOptions{}))
		t.Cleanup(w.srv.Close)
		url = w.srv.URL
	}
	if w.client, err = source.NewClient(source.ClientConfig{BaseURL: url, Timeout: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	w.exec(`INSERT INTO projection_runs (scope, epoch, managed, selected, phase, descriptor_hash, protocol_version)
VALUES ($1, 1, true, true, 'ACTIVE', $2, 1)`, scope, desc.Hash())
	if o.catchUp {
		w.catchUp(o.keep)
	}
	return w
}

// catchUp applies verified pages from the cursor to the boundary.
func (w *world) catchUp(keep bool) {
	w.t.Helper()
	st := store.New(pgtest.Pool(w.t, w.db.Recovery))
	run, err := st.SelectedRun(ctxb, w.scope)
	if err != nil {
		w.t.Fatal(err)
	}
	l, err := st.AcquireLease(ctxb, w.scope, "catch-up", time.Hour)
	if err != nil {
		w.t.Fatal(err)
	}
	for {
		c, err := st.ReadCursor(ctxb, w.scope)
		if err != nil {
			w.t.Fatal(err)
		}
		p, err := w.client.Fetch(ctxb, c.VerifiedThroughSeq, c.ChainDigest, run.DescriptorHash, source.MaxPageEvents)
		if err != nil {
			w.t.Fatal(err)
		}
		if keep {
			w.events = append(w.events, p.Events...)
		}
		res, err := st.ApplyPage(ctxb, l, run, p)
		if err != nil {
			w.t.Fatalf("page after %d: %v", c.VerifiedThroughSeq, err)
		}
		if res.Current() {
			break
		}
	}
	if err := st.ReleaseLease(ctxb, l); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) exec(sql string, args ...any) {
	w.t.Helper()
	if _, err := w.admin.Exec(ctxb, sql, args...); err != nil {
		w.t.Fatalf("%s: %v", sql, err)
	}
}

// provider reads as projection_recovery_readonly (SELECT only).
func (w *world) provider(pageEvents int) *Provider {
	return &Provider{Pool: pgtest.Pool(w.t, w.db.ReadOnly), Source: w.client, PageEvents: pageEvents,
		Clock: time.Now, StaleAfter: 5 * time.Minute}
}

// digestThrough folds the kept events independently of the provider.
func (w *world) digestThrough(seq int64) (string, int64) {
	d, n := chain.Genesis, int64(0)
	for _, e := range w.events {
		if e.Seq > seq {
			break
		}
		d, n = chain.Next(d, e.Wire), n+1
	}
	return d, n
}

// dump is every table of the database as text, to prove "nothing written".
func (w *world) dump() string {
	w.t.Helper()
	rows, err := w.admin.Query(ctxb, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`)
	if err != nil {
		w.t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		w.t.Fatal(err)
	}
	out := ""
	for _, n := range names {
		var v string
		q := `SELECT count(*)::text || ':' || coalesce(string_agg(t::text, '|' ORDER BY t::text), '') FROM ` + pgx.Identifier{n}.Sanitize() + ` t`
		if err := w.admin.QueryRow(ctxb, q).Scan(&v); err != nil {
			w.t.Fatal(err)
		}
		out += n + "=" + v + "\n"
	}
	return out
}

// findings lists a report's findings as "invariant cause" for messages.
func findings(r *recon.Report) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, string(f.Invariant)+" "+string(f.RootCause.Code)+" "+f.Record.Key())
	}
	return out
}
