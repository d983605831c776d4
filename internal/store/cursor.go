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
	"fmt"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/codes"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/projection-recovery/projection-recovery/internal/chain"
)

// This file holds every statement on projection_catchup_cursor, the scope's
// completeness claim: only a page slice moves verified-through (cursorAdvance),
// under the fenced lease; outcomes, withdrawals and reads go through here too.

// Cursor states (FR-APR05/11).
const (
	StateCatchingUp = "CATCHING_UP"
	StateCurrent    = "CURRENT"
	StateRetrying   = "RETRYING"
	StateBlocked    = "BLOCKED"
)

// Cursor is the scope's completeness claim (FR-APR05): every projection event
// with seq <= VerifiedThroughSeq is in the SQL projection, proven by
// ChainDigest over EventCount events. It is the ONLY completeness claim:
// projection_runs.checkpoint_seq (a maximum observed sequence) never is.
type Cursor struct {
	Scope                   string
	Exists                  bool // false: no row yet; the zero cursor is genesis
	DescriptorHash          string
	ProtocolVersion         int
	VerifiedThroughSeq      int64
	ChainDigest             string
	EventCount              int64
	LastObservedBoundarySeq int64
	State                   string
	BlockedReason           string
	LastVerifiedAt          *time.Time
	CreatedAt, UpdatedAt    time.Time
}

// Genesis is the cursor of a scope never verified (FR-APR07).
func Genesis(scope string) Cursor {
	return Cursor{Scope: scope, ChainDigest: chain.Genesis, State: StateCatchingUp}
}

const cursorColumns = `scope, coalesce(descriptor_hash, ''), coalesce(protocol_version, 0), verified_through_seq, chain_digest,
       event_count, last_observed_boundary_seq, state, coalesce(blocked_reason, ''), last_verified_at, created_at, updated_at`

func scanCursor(row pgx.Row) (Cursor, error) {
	var c Cursor
	err := row.Scan(&c.Scope, &c.DescriptorHash, &c.ProtocolVersion, &c.VerifiedThroughSeq, &c.ChainDigest,
		&c.EventCount, &c.LastObservedBoundarySeq, &c.State, &c.BlockedReason, &c.LastVerifiedAt, &c.CreatedAt, &c.UpdatedAt)
	c.Exists = err == nil
	return c, err
}

// ReadCursor returns the scope's cursor, or the genesis cursor when absent.
func (s *Store) ReadCursor(ctx context.Context, scope string) (Cursor, error) {
	c, err := CursorGet(ctx, s.pool, scope)
	if err != nil {
		return Cursor{}, dbErr("store: read cursor", err)
	}
	return c, nil
}

// CursorGet reads the scope's cursor in q's snapshot; the genesis cursor
// (Exists false) when the scope has none.
func CursorGet(ctx context.Context, q Querier, scope string) (Cursor, error) {
	c, err := scanCursor(q.QueryRow(ctx, `SELECT `+cursorColumns+` FROM projection_catchup_cursor WHERE scope = $1`, scope))
	if errors.Is(err, pgx.ErrNoRows) {
		return Genesis(scope), nil
	}
	if err != nil {
		return Cursor{}, err
	}
	return c, nil
}

// CursorList reads every scope's cursor in scope order, in q's snapshot.
func CursorList(ctx context.Context, q Querier) ([]Cursor, error) {
	rows, err := q.Query(ctx, `SELECT `+cursorColumns+` FROM projection_catchup_cursor ORDER BY scope`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Cursor
	for rows.Next() {
		c, err := scanCursor(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// CursorCatchingUp names a scope whose cursor is CATCHING_UP and was moved
// (a page, an outcome) within the last `within`, "" when none: a catch-up
// under way in this database, by any manager. A stale CATCHING_UP cursor
// (a scope nobody recovers now) is not one. The first in scope order: the
// same answer while the same scopes catch up (a status naming it does not
// change with every page).
func CursorCatchingUp(ctx context.Context, q Querier, within time.Duration) (string, error) {
	var scope string
	err := q.QueryRow(ctx, `
SELECT scope FROM projection_catchup_cursor
 WHERE state = 'CATCHING_UP' AND updated_at > clock_timestamp() - make_interval(secs => $1)
 ORDER BY scope LIMIT 1`, within.Seconds()).Scan(&scope)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return scope, err
}

// CursorVerifiedThrough reads the scope's verified-through seq (0 without a
// cursor).
func CursorVerifiedThrough(ctx context.Context, q Querier, scope string) (int64, error) {
	var v int64
	err := q.QueryRow(ctx, `SELECT verified_through_seq FROM projection_catchup_cursor WHERE scope = $1`, scope).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// cursorForUpdate is a page slice's read of the cursor (ApplyPage step 5):
// FOR UPDATE, so no other slice, outcome or withdrawal of the scope commits
// until this slice ends; the genesis cursor when absent.
func cursorForUpdate(ctx context.Context, tx pgx.Tx, scope string) (Cursor, error) {
	c, err := scanCursor(tx.QueryRow(ctx, `SELECT `+cursorColumns+` FROM projection_catchup_cursor WHERE scope = $1 FOR UPDATE`, scope))
	if errors.Is(err, pgx.ErrNoRows) {
		return Genesis(scope), nil
	}
	return c, err
}

// cursorStep is what a committing slice writes on the cursor.
type cursorStep struct {
	descriptorHash  string
	protocolVersion int
	through         int64
	digest          string
	eventCount      int64
	boundary        int64
	state           string
}

// cursorAdvance moves the cursor from cur to to by compare-and-set on cur's
// verified-through, digest and boundary (ApplyPage step 8): pgx.ErrNoRows
// when anything moved it since cur was read. It returns the new
// last_verified_at, which with verified-through and digest is the commit
// point resolveCommit recognises (an idle page keeps both and moves only
// this timestamp), and whether a transaction waits for the projection write
// lock or one of the key locks lockIDs (lockWaitedSQL): the slice sizer keeps
// slices short only while someone waits.
func cursorAdvance(ctx context.Context, tx pgx.Tx, scope string, cur Cursor, to cursorStep, lockIDs []int64) (verifiedAt *time.Time, lockWaited bool, err error) {
	if !cur.Exists {
		err = tx.QueryRow(ctx, `
INSERT INTO projection_catchup_cursor (scope, descriptor_hash, protocol_version, verified_through_seq, chain_digest,
    event_count, last_observed_boundary_seq, state, blocked_reason, last_verified_at)
VALUES ($1, $3, $4, $5, $6, $7, $8, $9, NULL, clock_timestamp())
ON CONFLICT (scope) DO NOTHING
RETURNING last_verified_at, `+lockWaitedSQL, scope, lockIDs, to.descriptorHash, to.protocolVersion, to.through, to.digest,
			to.eventCount, to.boundary, to.state).Scan(&verifiedAt, &lockWaited)
	} else {
		err = tx.QueryRow(ctx, `
UPDATE projection_catchup_cursor
   SET descriptor_hash = $3, protocol_version = $4, verified_through_seq = $5, chain_digest = $6, event_count = $7,
       last_observed_boundary_seq = greatest(last_observed_boundary_seq, $8), state = $9, blocked_reason = NULL,
       last_verified_at = clock_timestamp(), updated_at = clock_timestamp()
 WHERE scope = $1 AND verified_through_seq = $10 AND chain_digest = $11 AND last_observed_boundary_seq = $12
RETURNING last_verified_at, `+lockWaitedSQL,
			scope, lockIDs, to.descriptorHash, to.protocolVersion, to.through, to.digest, to.eventCount,
			to.boundary, to.state, cur.VerifiedThroughSeq, cur.ChainDigest, cur.LastObservedBoundarySeq).Scan(&verifiedAt, &lockWaited)
	}
	return verifiedAt, lockWaited, err
}

// cursorCommitPoint reads the scope's commit point (resolveCommit); the
// genesis cursor's when the scope has none.
func cursorCommitPoint(ctx context.Context, tx pgx.Tx, scope string) (commitPoint, error) {
	var pt commitPoint
	err := tx.QueryRow(ctx, `SELECT verified_through_seq, chain_digest, last_verified_at FROM projection_catchup_cursor WHERE scope = $1`,
		scope).Scan(&pt.through, &pt.digest, &pt.verifiedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		g := Genesis(scope) // the pre-page point of a page that would have created the cursor
		return commitPoint{through: g.VerifiedThroughSeq, digest: g.ChainDigest}, nil
	}
	return pt, err
}

// cursorVerifiedForUpdate reads the scope's verified-through FOR UPDATE (0
// without a cursor): WithdrawTx's read.
func cursorVerifiedForUpdate(ctx context.Context, tx pgx.Tx, scope string) (int64, error) {
	var verified int64
	err := tx.QueryRow(ctx, `SELECT verified_through_seq FROM projection_catchup_cursor WHERE scope = $1 FOR UPDATE`, scope).Scan(&verified)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return verified, err
}

// cursorWithdraw puts the scope's cursor back to genesis (verified-through
// 0, the genesis digest, no events, CATCHING_UP); descriptor and protocol,
// the scope's identity, stay.
func cursorWithdraw(ctx context.Context, tx pgx.Tx, scope string) error {
	_, err := tx.Exec(ctx, `
UPDATE projection_catchup_cursor
   SET verified_through_seq = 0, chain_digest = $2, event_count = 0,
       state = 'CATCHING_UP', blocked_reason = NULL, updated_at = clock_timestamp()
 WHERE scope = $1`, scope, chain.Genesis)
	return err
}

// RecordOutcome records a cycle's outcome on the cursor under the fence
// (FR-APR08): state is RETRYING, BLOCKED or CURRENT (or CATCHING_UP), reason a
// codes.Code ("" clears it), boundary the last source boundary observed (0 keeps the
// stored one; it never moves backwards). It never touches verified-through or
// the digest: only a page proves completeness.
func (s *Store) RecordOutcome(ctx context.Context, l Lease, scope, state string, reason codes.Code, boundary int64) error {
	switch state {
	case StateCatchingUp, StateCurrent, StateRetrying, StateBlocked:
	default:
		return fmt.Errorf("store: RecordOutcome: unknown state %q", state)
	}
	if l.Scope != scope {
		return fmt.Errorf("store: RecordOutcome: lease is for %q, not %q", l.Scope, scope)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockLease(ctx, tx, l); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
INSERT INTO projection_catchup_cursor AS c (scope, state, blocked_reason, last_observed_boundary_seq)
VALUES ($1, $2, nullif($3, ''), $4)
ON CONFLICT (scope) DO UPDATE SET
    state = EXCLUDED.state,
    blocked_reason = EXCLUDED.blocked_reason,
    last_observed_boundary_seq = greatest(c.last_observed_boundary_seq, EXCLUDED.last_observed_boundary_seq),
    updated_at = clock_timestamp()`, scope, state, string(reason), boundary)
		return err
	})
	return dbErr("store: record outcome", err)
}

// scopeQuery reads a scope's cursor and its selected run in ONE statement:
// the start of every cycle, including the idle check of a CURRENT scope, so
// the run barrier (FR-APR09) is re-checked at every interval without a second
// round trip. The driving row is the scope itself, so a scope without a cursor
// (genesis) or without a selected run still answers one row; the unique index
// projection_runs_selected guarantees at most one selected run.
const scopeQuery = `
SELECT c.scope IS NOT NULL,
       coalesce(c.descriptor_hash, ''), coalesce(c.protocol_version, 0), c.verified_through_seq, c.chain_digest,
       c.event_count, c.last_observed_boundary_seq, c.state, coalesce(c.blocked_reason, ''), c.last_verified_at,
       c.created_at, c.updated_at,
       r.run_id, r.epoch, r.managed, r.selected, r.phase, r.descriptor_hash, r.protocol_version, r.frozen_seq,
       r.checkpoint_seq, r.recovery_checkpoint_seq, coalesce(r.recovery_checkpoint_digest, ''),
       coalesce(r.recovery_checkpoint_descriptor_hash, ''), coalesce(r.recovery_checkpoint_protocol_version, 0)
  FROM (SELECT $1::text AS scope) s
  LEFT JOIN projection_catchup_cursor c ON c.scope = s.scope
  LEFT JOIN projection_runs r ON r.scope = s.scope AND r.selected`

// ReadScope returns the scope's cursor (the genesis cursor when absent) and
// its selected run (a Run with RunID 0 when none is selected: Run.Eligible
// refuses it with NOT_ELIGIBLE). It reads both in one statement.
//
// A database without recovery's tables answers a SCHEMA_MISSING refusal, not
// an INTERNAL error: nothing is wrong with the projection, the migration has
// not been applied (NFR-APR01).
func (s *Store) ReadScope(ctx context.Context, scope string) (Cursor, Run, error) {
	// The cursor's and the run's NOT NULL columns are NULL when the LEFT
	// JOIN found no row: scan them through pointers.
	var c struct {
		exists                         bool
		descriptor, blockedReason      string
		protocol                       int
		verified, eventCount, boundary *int64
		digest, state                  *string
		lastVerified                   *time.Time
		createdAt, updatedAt           *time.Time
	}
	var r struct {
		runID, checkpoint, frozen, ckptSeq *int64
		epoch, protocol                    *int32
		managed, selected                  *bool
		phase, descriptor                  *string
		ckptDigest, ckptDescriptor         string
		ckptProtocol                       int
	}
	err := s.pool.QueryRow(ctx, scopeQuery, scope).Scan(
		&c.exists, &c.descriptor, &c.protocol, &c.verified, &c.digest,
		&c.eventCount, &c.boundary, &c.state, &c.blockedReason, &c.lastVerified,
		&c.createdAt, &c.updatedAt,
		&r.runID, &r.epoch, &r.managed, &r.selected, &r.phase, &r.descriptor, &r.protocol, &r.frozen,
		&r.checkpoint, &r.ckptSeq, &r.ckptDigest, &r.ckptDescriptor, &r.ckptProtocol)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
			return Cursor{}, Run{}, &codes.Refusal{Code: codes.SchemaMissing,
				Detail: "the projection database lacks recovery's tables (ri06-automatic-recovery.sql is not applied)", Err: err}
		}
		return Cursor{}, Run{}, dbErr("store: read scope", err)
	}

	cur := Genesis(scope)
	if c.exists {
		cur = Cursor{Scope: scope, Exists: true, DescriptorHash: c.descriptor, ProtocolVersion: c.protocol,
			VerifiedThroughSeq: *c.verified, ChainDigest: *c.digest, EventCount: *c.eventCount,
			LastObservedBoundarySeq: *c.boundary, State: *c.state, BlockedReason: c.blockedReason,
			LastVerifiedAt: c.lastVerified, CreatedAt: *c.createdAt, UpdatedAt: *c.updatedAt}
	}
	run := Run{Scope: scope}
	if r.runID != nil {
		run = Run{RunID: *r.runID, Scope: scope, Epoch: int(*r.epoch), Managed: *r.managed, Selected: *r.selected,
			Phase: *r.phase, DescriptorHash: *r.descriptor, ProtocolVersion: int(*r.protocol), FrozenSeq: r.frozen,
			CheckpointSeq: *r.checkpoint, RecoveryCheckpointSeq: r.ckptSeq, RecoveryCheckpointDigest: r.ckptDigest,
			RecoveryCheckpointDescriptorHash: r.ckptDescriptor, RecoveryCheckpointProtocolVersion: r.ckptProtocol}
	}
	return cur, run, nil
}
