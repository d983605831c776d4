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

package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

func TestMain(m *testing.M) { pgtest.MainLeakChecked(m) }

const testDescriptor = storetest.Descriptor

var ctxb = context.Background()

// schemaSetup builds a test database the way production gets one
// (pgtest.NewDB): the trade-processor's tables by their owner, recovery's by
// `manager migrate` as the migrator role.
var schemaSetup = pgtest.Setup{
	Base:    func(ctx context.Context, dsn string) error { return withStore(ctx, dsn, (*Store).EnsureBaseSchema) },
	Migrate: func(ctx context.Context, dsn string) error { return withStore(ctx, dsn, (*Store).Migrate) },
}

func withStore(ctx context.Context, dsn string, f func(*Store, context.Context) error) error {
	s, err := Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer s.Close()
	return f(s, ctx)
}

// admins maps each test Store to an admin pool on the same database: the
// trade-processor's side of a test (seeding runs and rows, dropping tables).
var admins sync.Map

// newStore: a fresh database with the base schema and recovery's migrations,
// and a Store connected as projection_recovery with exactly the grants of
// docs/database-role.md, so every store test proves them sufficient.
// mustExec (the seeding helpers) runs as the admin.
func newStore(t testing.TB) *Store {
	t.Helper()
	db := pgtest.NewDB(t, schemaSetup)
	s := New(pgtest.Pool(t, db.Recovery))
	admins.Store(s, pgtest.Pool(t, db.Admin))
	t.Cleanup(func() { admins.Delete(s) })
	return s
}

// adminOf is the admin pool on s's database (newStore stores only).
func adminOf(t testing.TB, s *Store) *pgxpool.Pool {
	t.Helper()
	p, ok := admins.Load(s)
	if !ok {
		t.Fatal("adminOf: not a newStore store")
	}
	return p.(*pgxpool.Pool)
}

// adminDSNOf is the admin DSN of s's database (newStore stores only).
func adminDSNOf(t testing.TB, s *Store) string {
	t.Helper()
	return adminOf(t, s).Config().ConnString()
}

// mustExec runs sql as the admin (the trade-processor or a legacy writer,
// never the operator).
func mustExec(t testing.TB, s *Store, sql string, args ...any) {
	t.Helper()
	if _, err := adminOf(t, s).Exec(ctxb, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// addRun inserts the selected, managed, epoch-v1 run of scope.
func addRun(t testing.TB, s *Store, scope, phase string, frozen *int64) Run {
	t.Helper()
	mustExec(t, s, `INSERT INTO projection_runs (scope, epoch, managed, selected, phase, descriptor_hash, protocol_version, frozen_seq)
VALUES ($1, 1, true, true, $2, $3, 1, $4)`, scope, phase, testDescriptor, frozen)
	r, err := s.SelectedRun(ctxb, scope)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func lease(t testing.TB, s *Store, scope, owner string) Lease {
	t.Helper()
	l, err := s.AcquireLease(ctxb, scope, owner, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// catchUp applies pages until the cursor reaches the boundary.
func catchUp(t testing.TB, s *Store, l Lease, run Run, src *storetest.Ledger, max int) PageResult {
	t.Helper()
	var res PageResult
	for i := 0; ; i++ {
		c, err := s.ReadCursor(ctxb, run.Scope)
		if err != nil {
			t.Fatal(err)
		}
		res, err = s.ApplyPage(ctxb, l, run, src.Page(c.VerifiedThroughSeq, max))
		if err != nil {
			t.Fatalf("page after %d: %v", c.VerifiedThroughSeq, err)
		}
		if res.Current() {
			return res
		}
		if res.VerifiedThroughSeq == c.VerifiedThroughSeq || i > 1_000_000 {
			t.Fatalf("no progress at %d", c.VerifiedThroughSeq)
		}
	}
}

func wantCode(t testing.TB, err error, code codes.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("want refusal %s, got success", code)
	}
	if got := codes.Of(err); got != code {
		t.Fatalf("want %s, got %s (%v)", code, got, err)
	}
}

// snapshot is a dump of every projection table, to prove "nothing written".
func snapshot(t testing.TB, s *Store) string {
	t.Helper()
	var out string
	for _, q := range []string{
		`SELECT coalesce(string_agg(t::text, '|' ORDER BY trade_id), '') FROM trades t`,
		`SELECT coalesce(string_agg(o::text, '|' ORDER BY order_id), '') FROM orders o`,
		`SELECT coalesce(string_agg(e::text, '|' ORDER BY order_id, version), '') FROM order_events e`,
		`SELECT coalesce(string_agg(p::text, '|' ORDER BY account, instrument), '') FROM (SELECT scope, account, instrument, quantity, avg_cost, opening_quantity, opening_seq FROM positions) p`,
		`SELECT coalesce(string_agg(c::text, '|'), '') FROM (SELECT scope, verified_through_seq, chain_digest, event_count, state FROM projection_catchup_cursor) c`,
		`SELECT coalesce(string_agg(b::text, '|' ORDER BY account, instrument), '') FROM projection_catchup_basis b`,
		`SELECT coalesce(string_agg(o::text, '|' ORDER BY msg_id), '') FROM (SELECT msg_id, quantity, avg_cost FROM projection_catchup_outbox) o`,
		`SELECT coalesce(string_agg(r::text, '|' ORDER BY run_id), '') FROM (SELECT run_id, phase, selected, checkpoint_seq, frozen_seq FROM projection_runs) r`,
	} {
		var v string
		if err := s.pool.QueryRow(ctxb, q).Scan(&v); err != nil {
			t.Fatal(err)
		}
		out += v + "\n"
	}
	return out
}

func positionOf(t testing.TB, s *Store, scope, acct, instr string) (decimal.Decimal, decimal.Decimal) {
	t.Helper()
	var q, a decimal.Decimal
	if err := s.pool.QueryRow(ctxb, `SELECT quantity, avg_cost FROM positions WHERE scope=$1 AND account=$2 AND instrument=$3`,
		scope, acct, instr).Scan(&q, &a); err != nil {
		t.Fatalf("position %s/%s: %v", acct, instr, err)
	}
	return q, a
}

func outbox(t testing.TB, s *Store) []string {
	t.Helper()
	rows, err := s.pool.Query(ctxb, `SELECT account || '/' || instrument || '=' || quantity::text || '@' || avg_cost::text FROM projection_catchup_outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// seedTrade writes a trade row directly (as a live projector or a legacy
// system would have): seq nil = no provenance.
func seedTrade(t testing.TB, s *Store, scope string, e wire.Event, seq *int64, status string) {
	t.Helper()
	tr := e.Trade
	mustExec(t, s, `INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id,
    buy_account, sell_account, ts, booking_status) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13)`,
		scope, tr.TradeID, tr.TradeSeq, seq, tr.Instrument, tr.Price, tr.Quantity, tr.BuyOrderID, tr.SellOrderID,
		tr.BuyAccount, tr.SellAccount, tr.TS, status)
}

// seedOrder writes an order version to order_events and orders.
func seedOrder(t testing.TB, s *Store, scope string, e wire.Event, seq *int64) {
	t.Helper()
	o := e.Order
	for _, table := range []string{"order_events", "orders"} {
		mustExec(t, s, `INSERT INTO `+table+` (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts)
VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)`, scope, o.OrderID, o.Version, seq, o.Account, o.Instrument, string(o.Side),
			o.Price, o.Quantity, o.Remaining, string(o.Status), o.TS)
	}
}

// seedPosition writes a position row.
func seedPosition(t testing.TB, s *Store, scope, acct, instr, qty, avg string, proven bool, openQty string) {
	t.Helper()
	mustExec(t, s, `INSERT INTO positions (scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, quantity, avg_cost)
VALUES ($1,$2,$3,$4,0,$5,$6,$7)`, scope, acct, instr, dec(openQty), proven, dec(qty), dec(avg))
}

func i64(v int64) *int64 { return &v }

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// refused applies page and requires the refusal code and an unchanged database.
func refused(t testing.TB, s *Store, l Lease, run Run, page *source.Page, code codes.Code) *codes.Refusal {
	t.Helper()
	before := snapshot(t, s)
	_, err := s.ApplyPage(ctxb, l, run, page)
	wantCode(t, err, code)
	if after := snapshot(t, s); after != before {
		t.Fatalf("refused page (%s) wrote:\nbefore %s\nafter  %s", code, before, after)
	}
	var r *codes.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("%s is not a *Refusal: %T", code, err)
	}
	return r
}
