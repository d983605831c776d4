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
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/pgtest"
)

// Every other store test runs as projection_recovery with the grants of
// docs/database-role.md and so proves them sufficient. These prove them
// narrow: what the roles must never do, PostgreSQL refuses.

func wantDenied(t *testing.T, err error) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" { // insufficient_privilege
		t.Fatalf("want permission denied (42501), got %v", err)
	}
}

// FR-APR09 at the privilege level: the recovery role can lock the selected
// run (a page's FOR SHARE) but never select, seal, reopen or re-describe a
// run, never delete projection rows and never change the schema.
func TestRole_RecoveryCannotChangeRuns(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	addRun(t, s, "s", PhaseActive, nil)
	seedTrade(t, s, "s", evTrade1, i64(2), "BOOKED")
	if err := pgx.BeginFunc(ctxb, s.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctxb, `SELECT run_id FROM projection_runs WHERE scope = 's' AND selected FOR SHARE`)
		return err
	}); err != nil {
		t.Fatalf("the page's run lock: %v", err)
	}
	for _, stmt := range []string{
		`UPDATE projection_runs SET phase = 'SEALED'`,
		`UPDATE projection_runs SET selected = false`,
		`UPDATE projection_runs SET descriptor_hash = 'other'`,
		`UPDATE projection_runs SET frozen_seq = 1`,
		`UPDATE projection_runs SET checkpoint_seq = 1`,
		`UPDATE projection_runs SET recovery_checkpoint_seq = 1`,
		`INSERT INTO projection_runs (scope, selected, phase, descriptor_hash, protocol_version) VALUES ('t', true, 'ACTIVE', 'd', 1)`,
		`DELETE FROM projection_runs`,
		`DELETE FROM trades`,
		`DELETE FROM positions`,
		`DELETE FROM orders`,
		`DELETE FROM order_events`,
		`TRUNCATE trades`,
		// The quarantine tables are reconciliation's (projection_reconciliation).
		`SELECT * FROM projection_trade_quarantine`,
		`DELETE FROM projection_position_quarantine`,
		`CREATE TABLE projection_catchup_extra (x int)`,
		`DROP TABLE projection_catchup_cursor`,
		`DELETE FROM ` + VersionTable,
	} {
		t.Run(stmt, func(t *testing.T) {
			_, err := s.pool.Exec(ctxb, stmt)
			wantDenied(t, err)
		})
	}
}

// With auto-recovery off the manager connects as the read-only role: every
// read of that path works, EnsureSchema answers without writing, and any
// write is refused by PostgreSQL, not only by the code.
func TestRole_ReadOnlyReadsAndCannotWrite(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t, schemaSetup)
	ro := New(pgtest.Pool(t, db.ReadOnly))
	rw := New(pgtest.Pool(t, db.Recovery))
	admins.Store(rw, pgtest.Pool(t, db.Admin))
	t.Cleanup(func() { admins.Delete(rw) })
	run := addRun(t, rw, "s", PhaseActive, nil)
	catchUp(t, rw, lease(t, rw, "s", "writer"), run, baseLedger(t), 100)

	if c, err := ro.ReadCursor(ctxb, "s"); err != nil || !c.Exists || c.State != StateCurrent {
		t.Fatalf("ReadCursor: %+v %v", c, err)
	}
	if l, err := ro.ReadLease(ctxb, "s"); err != nil || l.Owner != "writer" {
		t.Fatalf("ReadLease: %+v %v", l, err)
	}
	if r, err := ro.SelectedRun(ctxb, "s"); err != nil || r.RunID != run.RunID {
		t.Fatalf("SelectedRun: %+v %v", r, err)
	}
	for _, apply := range []bool{false, true} {
		if err := ro.EnsureSchema(ctxb, apply); err != nil {
			t.Fatalf("EnsureSchema(%v) on a current schema: %v", apply, err)
		}
	}
	before := snapshot(t, rw)
	_, err := ro.AcquireLease(ctxb, "other", "reader", time.Minute)
	wantDenied(t, err)
	for _, stmt := range []string{
		`INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts) VALUES ('s', 'x', 1, 1, 'I', 1, 1, 'b', 's', 'A', 'B', now())`,
		`UPDATE positions SET quantity = 0`,
		`UPDATE projection_catchup_cursor SET verified_through_seq = 0`,
		`DELETE FROM projection_catchup_outbox`,
		`UPDATE projection_catchup_basis SET quantity = 0`,
	} {
		_, err := ro.pool.Exec(ctxb, stmt)
		wantDenied(t, err)
	}
	if after := snapshot(t, rw); after != before {
		t.Fatal("the read-only role changed the projection")
	}
}

// A manager with auto-recovery on whose role may not create tables (the
// documented least-privilege role) meets a schema older than itself: it
// answers SCHEMA_MISSING saying to run `manager migrate` as the owner, not a
// bare permission error, and writes nothing.
func TestRole_EnsureSchemaApplyWithoutCreateRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, older string
	}{
		{"version row missing", `DELETE FROM ` + VersionTable + ` WHERE version_id > 0`}, // as if this binary brought every migration new
		{"no version table", `DROP TABLE ` + VersionTable},                               // a release before versioned migrations
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			mustExec(t, s, tc.older)
			before := strings.Join(presentRelations(t, s), ",")
			var rows string
			if tc.name == "version row missing" {
				rows = versionRows(t, s)
			}
			start := time.Now()
			err := s.EnsureSchema(ctxb, true)
			wantCode(t, err, codes.SchemaMissing)
			for _, want := range []string{"version 0", fmt.Sprintf("requires %d", latestVersion()), "may not create tables", "manager migrate"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q does not say %q", err, want)
				}
			}
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Errorf("the refusal took %v: it must not wait for goose's retries", d)
			}
			if after := strings.Join(presentRelations(t, s), ","); after != before {
				t.Fatalf("relations changed: %s -> %s", before, after)
			}
			if rows != "" && versionRows(t, s) != rows {
				t.Fatalf("version rows changed: %q -> %q", rows, versionRows(t, s))
			}
		})
	}
}

// The reconciliation role (docs/database-role.md, "Why reconciliation
// repairs have a role of their own") holds exactly projection_recovery's
// grants plus DELETE on the four projection tables and SELECT, INSERT,
// DELETE on the quarantine tables: it can remove projection rows and move
// them through the quarantine tables, and it still cannot change a run,
// rewrite a quarantined copy, truncate or change the schema.
func TestRole_ReconciliationDeletesButCannotChangeRuns(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t, schemaSetup)
	rec := New(pgtest.Pool(t, db.Reconciliation))
	admin := pgtest.Pool(t, db.Admin)

	// Exactly the runtime role's table privileges plus the documented extras.
	extra := map[string]bool{
		"trades DELETE": true, "orders DELETE": true, "order_events DELETE": true, "positions DELETE": true,
		"projection_trade_quarantine SELECT": true, "projection_trade_quarantine INSERT": true, "projection_trade_quarantine DELETE": true,
		"projection_position_quarantine SELECT": true, "projection_position_quarantine INSERT": true, "projection_position_quarantine DELETE": true,
	}
	tables := []string{"projection_runs", "trades", "orders", "order_events", "positions", "projection_catchup_cursor",
		"projection_catchup_lease", "projection_catchup_basis", "projection_catchup_outbox", "projection_trade_quarantine",
		"projection_position_quarantine", VersionTable}
	for _, tbl := range tables {
		for _, priv := range []string{"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"} {
			var recovery, reconciliation bool
			if err := admin.QueryRow(ctxb, `SELECT has_table_privilege($1, $3, $4), has_table_privilege($2, $3, $4)`,
				pgtest.RecoveryRole, pgtest.ReconciliationRole, tbl, priv).Scan(&recovery, &reconciliation); err != nil {
				t.Fatal(err)
			}
			if want := recovery || extra[tbl+" "+priv]; reconciliation != want {
				t.Errorf("%s on %s: reconciliation has it %v, want %v (recovery %v)", priv, tbl, reconciliation, want, recovery)
			}
		}
	}
	var col bool
	if err := admin.QueryRow(ctxb, `SELECT has_column_privilege($1, 'projection_runs', 'updated_at', 'UPDATE')`, pgtest.ReconciliationRole).Scan(&col); err != nil || !col {
		t.Fatalf("UPDATE (updated_at) on projection_runs (the page's run lock): %v %v", col, err)
	}

	if _, err := admin.Exec(ctxb, `INSERT INTO projection_runs (scope, epoch, managed, selected, phase, descriptor_hash, protocol_version)
VALUES ('s', 1, true, true, 'ACTIVE', $1, 1)`, testDescriptor); err != nil {
		t.Fatal(err)
	}
	seed := []string{
		`INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts) VALUES ('s', 'x', 1, 1, 'I', 1, 1, 'b', 's', 'A', 'B', now())`,
		`INSERT INTO orders (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts) VALUES ('s', 'o', 1, 1, 'A', 'I', 'BUY', 1, 1, 1, 'OPEN', now())`,
		`INSERT INTO order_events (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts) VALUES ('s', 'o', 1, 1, 'A', 'I', 'BUY', 1, 1, 1, 'OPEN', now())`,
		`INSERT INTO positions (scope, account, instrument, opening_proven, quantity, avg_cost) VALUES ('s', 'A', 'I', true, 1, 1)`,
	}
	for _, q := range seed {
		if _, err := admin.Exec(ctxb, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, stmt := range []string{
		`INSERT INTO projection_trade_quarantine (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts, booking_status, written_by)
SELECT scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts, booking_status, written_by FROM trades`,
		`DELETE FROM trades`,
		`DELETE FROM projection_trade_quarantine`,
		`INSERT INTO projection_position_quarantine (scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, quantity, avg_cost, updated_at)
SELECT scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, quantity, avg_cost, updated_at FROM positions`,
		`DELETE FROM positions`,
		`DELETE FROM orders`,
		`DELETE FROM order_events`,
	} {
		if _, err := rec.pool.Exec(ctxb, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	for _, stmt := range []string{
		`UPDATE projection_position_quarantine SET quantity = 0`, // a quarantined copy is evidence: never rewritten
		`UPDATE projection_runs SET phase = 'SEALED'`,
		`UPDATE projection_runs SET selected = false`,
		`UPDATE projection_runs SET frozen_seq = 1`,
		`INSERT INTO projection_runs (scope, selected, phase, descriptor_hash, protocol_version) VALUES ('t', true, 'ACTIVE', 'd', 1)`,
		`DELETE FROM projection_runs`,
		`TRUNCATE trades`,
		`CREATE TABLE projection_catchup_extra (x int)`,
		`DROP TABLE projection_trade_quarantine`,
		`DELETE FROM ` + VersionTable,
	} {
		t.Run(stmt, func(t *testing.T) {
			_, err := rec.pool.Exec(ctxb, stmt)
			wantDenied(t, err)
		})
	}
}
