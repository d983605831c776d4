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
		`TRUNCATE trades`,
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
