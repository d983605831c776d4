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
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/pgtest"
)

type countStatements struct{ n atomic.Int64 }

func (c *countStatements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *countStatements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// tracedStore is newStore (the operator's role, the admin for seeding) with
// every statement of the operator's pool counted.
func tracedStore(t *testing.T) (*Store, *countStatements) {
	t.Helper()
	db := pgtest.NewDB(t, schemaSetup)
	cfg, err := pgxpool.ParseConfig(db.Recovery)
	if err != nil {
		t.Fatal(err)
	}
	tr := &countStatements{}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(ctxb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := New(pool)
	admins.Store(s, pgtest.Pool(t, db.Admin))
	t.Cleanup(func() { admins.Delete(s) })
	return s, tr
}

// TestStore_ReadScopeIsReadCursorPlusSelectedRunInOneStatement: ReadScope
// answers exactly what ReadCursor and SelectedRun answer, for every shape of
// scope (no cursor, no run, ACTIVE, DRAINING, SEALED, unselected, a cursor
// after pages), in ONE statement: the idle check of a CURRENT scope re-checks
// its run (FR-APR09) within its statement budget.
func TestStore_ReadScopeIsReadCursorPlusSelectedRunInOneStatement(t *testing.T) {
	s, tr := tracedStore(t)
	frozen := int64(3)
	mustExec(t, s, `INSERT INTO projection_runs (scope, epoch, managed, selected, phase, descriptor_hash, protocol_version)
VALUES ('active', 1, true, true, 'ACTIVE', $1, 1),
       ('active', 1, true, false, 'SEALED', 'an-older-run', 1),
       ('sealed', 1, true, true, 'SEALED', $1, 1),
       ('unselected', 1, true, false, 'ACTIVE', $1, 1)`, testDescriptor)
	mustExec(t, s, `INSERT INTO projection_runs (scope, epoch, managed, selected, phase, descriptor_hash, protocol_version, frozen_seq,
  recovery_checkpoint_seq, recovery_checkpoint_digest, recovery_checkpoint_descriptor_hash, recovery_checkpoint_protocol_version)
VALUES ('draining', 1, true, true, 'DRAINING', $1, 1, $2, 1, 'ckpt-digest', $1, 1)`, testDescriptor, frozen)
	// A cursor after real pages on "active".
	run, err := s.SelectedRun(ctxb, "active")
	if err != nil {
		t.Fatal(err)
	}
	catchUp(t, s, lease(t, s, "active", "a"), run, baseLedger(t), 2)

	cases := []struct {
		scope        string
		wantEligible codes.Code
	}{
		{"active", ""},
		{"draining", ""},
		{"sealed", codes.NotEligible},
		{"unselected", codes.NotEligible},
		{"nothing", codes.NotEligible},
	}
	for _, tc := range cases {
		t.Run(tc.scope, func(t *testing.T) {
			before := tr.n.Load()
			cur, run, err := s.ReadScope(ctxb, tc.scope)
			if err != nil {
				t.Fatal(err)
			}
			if n := tr.n.Load() - before; n != 1 {
				t.Fatalf("ReadScope sent %d statements, want 1", n)
			}
			wantCur, err := s.ReadCursor(ctxb, tc.scope)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cur, wantCur) {
				t.Fatalf("cursor\n got %+v\nwant %+v", cur, wantCur)
			}
			wantRun, rerr := s.SelectedRun(ctxb, tc.scope)
			if !reflect.DeepEqual(run, wantRun) {
				t.Fatalf("run\n got %+v\nwant %+v (err %v)", run, wantRun, rerr)
			}
			if got := codes.Of(run.Eligible()); got != tc.wantEligible {
				t.Fatalf("Eligible() = %q, want %q", got, tc.wantEligible)
			}
		})
	}
	cur, _, _ := s.ReadScope(ctxb, "active")
	if !cur.Exists || cur.VerifiedThroughSeq != 4 || cur.State != StateCurrent {
		t.Fatalf("cursor after the catch-up = %+v", cur)
	}
	if _, run, _ := s.ReadScope(ctxb, "draining"); run.FrozenSeq == nil || *run.FrozenSeq != frozen || run.RecoveryCheckpointDigest != "ckpt-digest" {
		t.Fatalf("DRAINING run = %+v", run)
	}
}

// TestStore_ReadScopeWithoutRecoveryTablesIsSchemaMissing: a database where
// ri06-automatic-recovery.sql was never applied answers SCHEMA_MISSING
// (operator action: run the migration), never INTERNAL.
func TestStore_ReadScopeWithoutRecoveryTablesIsSchemaMissing(t *testing.T) {
	// An empty database holding only the trade-processor's tables.
	s := New(pgtest.Pool(t, pgtest.NewDSN(t)))
	if err := s.EnsureBaseSchema(ctxb); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.ReadScope(ctxb, "s")
	wantCode(t, err, codes.SchemaMissing)
}
