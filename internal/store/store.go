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

// Package store is the consumer side of automatic projection recovery
// (FR-APR05..09): the schema, the fenced lease, the completeness cursor and the
// atomic page that makes a scope's SQL projection provably complete through a
// verified consensus sequence.
package store

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/codes"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed sql/base.sql
var baseSQL string

//go:embed sql/ri06-automatic-recovery.sql
var ri06SQL string

// BaseSQL is the trade-processor's base schema (tests and demo only).
func BaseSQL() string { return baseSQL }

// MigrationSQL is ri06-automatic-recovery.sql (NFR-APR01).
func MigrationSQL() string { return ri06SQL }

// Store is a pool on the projection database.
type Store struct {
	pool        *pgxpool.Pool
	hooks       hooks
	afterCommit func(scope string)
}

// hooks let in-package tests interleave deterministically with a page
// transaction (FR-APR08 fence test, database loss mid-page). nil in production.
type hooks struct {
	beforeLeaseLock  func(ctx context.Context, tx pgx.Tx) error
	afterLeaseLocked func(ctx context.Context, tx pgx.Tx) error
	beforeCommit     func(ctx context.Context, tx pgx.Tx) error
	// commit replaces tx.Commit of a page (e.g. to lose the connection
	// while COMMIT is in flight); outcomeTimeout, when set, bounds the
	// re-read that decides a failed commit's outcome (commitOutcomeTimeout).
	commit         func(ctx context.Context, tx pgx.Tx) error
	outcomeTimeout time.Duration
}

// Open connects to dsn and pings.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: parse dsn: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, dbErr("store: open pool", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, dbErr("store: ping", err)
	}
	return &Store{pool: pool}, nil
}

// New wraps an existing pool (the caller keeps ownership; Close closes it).
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Pool exposes the pool (status endpoint, live projector, tests).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// EnsureBaseSchema creates the trade-processor's base tables if missing. In
// production they exist already; tests and the demo call this.
func (s *Store) EnsureBaseSchema(ctx context.Context) error {
	return s.execScript(ctx, "base schema", baseSQL)
}

// Migrate applies ri06-automatic-recovery.sql (additive, rerunnable).
func (s *Store) Migrate(ctx context.Context) error {
	return s.execScript(ctx, "ri06 migration", ri06SQL)
}

// execScript runs a multi-statement script in one transaction. A transaction-
// level advisory lock serialises concurrent migrators (CREATE ... IF NOT EXISTS
// alone races on the catalog when two managers start together).
func (s *Store) execScript(ctx context.Context, what, script string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('projection-recovery:migrate', 0))`); err != nil {
			return err
		}
		// Simple protocol: a script of several statements without parameters.
		_, err := tx.Exec(ctx, script, pgx.QueryExecModeSimpleProtocol)
		return err
	})
	return dbErr("store: "+what, err)
}

// WriteLock takes the scope's projection write lock for the rest of tx: a
// transaction-scoped advisory lock keyed by the scope. The live projector takes
// it for every write and every page takes it first, so live writes and a page
// never interleave (FR-APR06); without it a live trade could land between a
// page's checks and its position re-derivation and be double counted or lost.
func WriteLock(ctx context.Context, tx pgx.Tx, scope string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('projection:' || $1::text, 0))`, scope)
	return dbErr("store: projection write lock", err)
}

// refuse and dbErr are the store's spellings of codes.Newf and codes.Database.
func refuse(c codes.Code, format string, args ...any) *codes.Refusal {
	return codes.Newf(c, format, args...)
}

func dbErr(what string, err error) error { return codes.Database(what, err) }
