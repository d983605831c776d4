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
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/reference/live"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

func TestMain(m *testing.M) { pgtest.MainLeakChecked(m) }

var ctxb = context.Background()

type env struct {
	s   *store.Store // the operator: connected as projection_recovery (docs/database-role.md)
	run store.Run
	l   store.Lease
	// trade is the trade-processor's connection (the admin): the live
	// projector writes projection_runs.checkpoint_seq, which the operator's
	// role may not.
	trade *pgxpool.Pool
}

// newEnv: a fresh database with schema, a selected ACTIVE run and a lease.
func newEnv(t testing.TB, descriptor string) env {
	t.Helper()
	db := recoverydb.New(t)
	s := store.New(pgtest.Pool(t, db.Recovery))
	trade := pgtest.Pool(t, db.Admin)
	if _, err := trade.Exec(ctxb, `INSERT INTO projection_runs (scope, selected, phase, descriptor_hash, protocol_version)
VALUES ('s', true, 'ACTIVE', $1, 1)`, descriptor); err != nil {
		t.Fatal(err)
	}
	run, err := s.SelectedRun(ctxb, "s")
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.AcquireLease(ctxb, "s", "worker", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return env{s: s, run: run, l: l, trade: trade}
}

// feed applies events through the live projector in the given (arrival) order.
func feed(t testing.TB, e env, evs ...wire.Event) {
	t.Helper()
	for _, ev := range evs {
		if err := live.Apply(ctxb, e.trade, "s", ev); err != nil {
			t.Fatal(err)
		}
	}
}

// catchUp applies ledger pages until CURRENT.
func catchUp(t testing.TB, e env, src *storetest.Ledger, max int) store.PageResult {
	t.Helper()
	for {
		c, err := e.s.ReadCursor(ctxb, "s")
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.s.ApplyPage(ctxb, e.l, e.run, src.Page(c.VerifiedThroughSeq, max))
		if err != nil {
			t.Fatalf("page after %d: %v", c.VerifiedThroughSeq, err)
		}
		if res.Current() {
			return res
		}
		if res.VerifiedThroughSeq == c.VerifiedThroughSeq {
			t.Fatalf("no progress at %d", c.VerifiedThroughSeq)
		}
	}
}

func position(t testing.TB, e env, acct, instr string) string {
	t.Helper()
	var v string
	if err := e.s.Pool().QueryRow(ctxb, `SELECT trim_scale(quantity)::text || '@' || trim_scale(avg_cost)::text FROM positions WHERE scope='s' AND account=$1 AND instrument=$2`,
		acct, instr).Scan(&v); err != nil {
		return "none"
	}
	return v
}

// outbox lists unsent notifications as account/instrument=qty@avg.
func outbox(t testing.TB, e env) []string {
	t.Helper()
	rows, err := e.s.Pool().Query(ctxb, `SELECT account || '/' || instrument || '=' || trim_scale(quantity)::text || '@' || trim_scale(avg_cost)::text
  FROM projection_catchup_outbox ORDER BY account, instrument, id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		rows.Scan(&v)
		out = append(out, v)
	}
	return out
}
