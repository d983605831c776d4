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
	"sync/atomic"

	"github.com/projection-recovery/projection-recovery/internal/codes"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed sql/base.sql
var baseSQL string

// BaseSQL is the trade-processor's base schema (tests and demo only).
func BaseSQL() string { return baseSQL }

// Store is a pool on the projection database.
type Store struct {
	pool        *pgxpool.Pool
	hooks       hooks
	afterCommit func(scope string)
	slices      sliceSizer
	// schemaNewerLogged: EnsureSchema logs a schema newer than this binary
	// once per Store, not on every call.
	schemaNewerLogged atomic.Bool
}

// Querier runs one statement: a pgx.Tx, a connection or the pool. The
// exported functions named after a table (LeaseGet, CursorGet, BasisUpsert...)
// take one, so a caller runs the table's statements in its own transaction
// while the statements themselves stay in the table's file of this package.
// They return the driver's error unwrapped: the caller adds its context.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var (
	_ Querier = pgx.Tx(nil)
	_ Querier = (*pgxpool.Pool)(nil)
	_ Querier = (*pgxpool.Conn)(nil)
)

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

// EnsureBaseSchema creates the trade-processor's base tables if missing: a
// test and demo fixture, never a migration (the tables belong to the
// trade-processor, which exists before recovery and owns them; recovery's own
// tables come from Migrate). The script runs in one transaction under a
// transaction-level advisory lock, because CREATE ... IF NOT EXISTS alone
// races on the catalog when two processes create the fixture together.
func (s *Store) EnsureBaseSchema(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('projection-recovery:base-schema', 0))`); err != nil {
			return err
		}
		// Simple protocol: a script of several statements without parameters.
		_, err := tx.Exec(ctx, baseSQL, pgx.QueryExecModeSimpleProtocol)
		return err
	})
	return dbErr("store: base schema", err)
}

// WriteLock takes the scope's projection write lock for the rest of tx,
// EXCLUSIVELY: a transaction-scoped advisory lock keyed by the scope. It
// excludes every writer of the scope, whichever protocol it follows (a
// writer holding the lock shared, as KeyLocks takes it, holds it until it
// commits). Repairs take it so, and so may a writer that does not name its
// keys; without any projection write lock a live trade could land between a
// page's checks and its position re-derivation and be double counted or
// lost (FR-APR06).
func WriteLock(ctx context.Context, tx pgx.Tx, scope string) error {
	_, err := tx.Exec(ctx, WriteLockSQL, scope)
	return dbErr("store: projection write lock", err)
}

// WriteLockSQL is WriteLock's statement ($1 is the scope), for a writer that
// pipelines it with its writes; it must be the first statement of the
// transaction that touches the scope's projection.
const WriteLockSQL = `SELECT pg_advisory_xact_lock(` + writeLockKeySQL + `)`

// KeyLocks takes the projection write lock of scope per key, for the rest of
// tx (docs/live-writes.md): the scope's lock SHARED, then an
// exclusive lock per position key (account, instrument) the transaction
// writes or decides on, in ascending lock id. A write slice takes it for the
// keys of its events (trade legs, order versions, openings), and the live
// projector for the keys of the events it writes: the two exclude each other
// on the keys they share and run side by side on the others. Every holder
// takes the scope's lock before any key, and keys in one global order, so
// no two of them wait for each other in a cycle; WriteLock (exclusive)
// still waits for every holder, and they for it.
func KeyLocks(ctx context.Context, tx pgx.Tx, scope string, accounts, instruments []string) error {
	_, err := keyLocks(ctx, tx, scope, accounts, instruments)
	return err
}

// keyLocks is KeyLocks returning the key locks' ids (for lockWaitedSQL).
func keyLocks(ctx context.Context, tx pgx.Tx, scope string, accounts, instruments []string) ([]int64, error) {
	b := &pgx.Batch{}
	b.Queue(ScopeSharedLockSQL, scope)
	b.Queue(KeyLocksSQL, scope, accounts, instruments)
	br := tx.SendBatch(ctx, b)
	var ids []int64
	_, err := br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&ids)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, dbErr("store: projection write lock of the keys", err)
	}
	return ids, nil
}

// ScopeSharedLockSQL takes scope $1's projection write lock shared: the first
// half of KeyLocks, before any key lock.
const ScopeSharedLockSQL = `SELECT pg_advisory_xact_lock_shared(` + writeLockKeySQL + `)`

// KeyLocksSQL takes the key locks of scope $1 for the keys ($2 accounts, $3
// instruments, pairwise) in ascending lock id and returns the ids. The
// sorted subquery is not flattened into the one calling the lock function
// (it has an ORDER BY, and that one a volatile function), so the locks are
// taken in its order. A writer in another language takes them with this
// statement as it is.
const KeyLocksSQL = `SELECT coalesce(array_agg(id), '{}') FROM (
  SELECT id, pg_advisory_xact_lock(id) FROM (
    SELECT DISTINCT ` + keyLockIDSQL + ` AS id FROM unnest($2::text[], $3::text[]) AS k(account, instrument) ORDER BY id) ids) locked`

// writeLockKeySQL is the projection write lock's advisory key of scope $1.
const writeLockKeySQL = `hashtextextended('projection:' || $1::text, 0)`

// keyLockIDSQL is the advisory key of position key (k.account,
// k.instrument) of scope $1; names are length-prefixed so that a separator
// inside one cannot make two keys one. Two keys whose ids collide share a
// lock: more waiting, never less exclusion.
const keyLockIDSQL = `hashtextextended('projection-key:' || length($1::text) || ':' || $1::text || '/' ||
    length(k.account) || ':' || k.account || '/' || k.instrument, 0)`

// lockWaitedSQL is true when some transaction waits for scope $1's
// projection write lock or for one of the key locks $2 (held by the
// caller's transaction): pg_locks shows an advisory lock on a bigint key as
// classid = its high 32 bits, objid = its low 32 bits, objsubid 1
// (PostgreSQL's SET_LOCKTAG_ADVISORY).
const lockWaitedSQL = `EXISTS (SELECT 1 FROM pg_locks l
 WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objsubid = 1
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND ((l.classid::int8 << 32) | l.objid::int8) = ANY (array_append($2::int8[], ` + writeLockKeySQL + `)))`

// refuse and dbErr are the store's spellings of codes.Newf and codes.Database.
func refuse(c codes.Code, format string, args ...any) *codes.Refusal {
	return codes.Newf(c, format, args...)
}

func dbErr(what string, err error) error { return codes.Database(what, err) }
