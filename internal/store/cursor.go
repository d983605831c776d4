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

	"github.com/projection-recovery/projection-recovery/internal/chain"
)

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
	c, err := scanCursor(s.pool.QueryRow(ctx, `SELECT `+cursorColumns+` FROM projection_catchup_cursor WHERE scope = $1`, scope))
	if errors.Is(err, pgx.ErrNoRows) {
		return Genesis(scope), nil
	}
	if err != nil {
		return Cursor{}, dbErr("store: read cursor", err)
	}
	return c, nil
}

// Run is the projection run selected for a scope. Recovery reads runs and
// never writes them (FR-APR09).
type Run struct {
	RunID           int64
	Scope           string
	Epoch           int
	Managed         bool
	Selected        bool
	Phase           string
	DescriptorHash  string
	ProtocolVersion int
	FrozenSeq       *int64 // set for DRAINING: caught up only to here
	CheckpointSeq   int64  // max observed seq: informational, NEVER completeness (FR-APR05)

	// Explicit-recovery checkpoint: identity cross-check only, never a starting point (FR-APR07).
	RecoveryCheckpointSeq             *int64
	RecoveryCheckpointDigest          string
	RecoveryCheckpointDescriptorHash  string
	RecoveryCheckpointProtocolVersion int
}

// Run phases.
const (
	PhaseActive   = "ACTIVE"
	PhaseDraining = "DRAINING"
	PhaseSealed   = "SEALED"
)

// Eligible: managed, epoch-v1, selected, ACTIVE or DRAINING (with a frozen seq).
func (r Run) Eligible() error {
	switch {
	case r.RunID == 0:
		return refuse(codes.NotEligible, "scope %q has no selected run", r.Scope)
	case !r.Managed:
		return refuse(codes.NotEligible, "run %d of %q is not managed", r.RunID, r.Scope)
	case r.Epoch != 1:
		return refuse(codes.NotEligible, "run %d of %q is epoch %d, not epoch-v1", r.RunID, r.Scope, r.Epoch)
	case !r.Selected:
		return refuse(codes.NotEligible, "run %d of %q is not selected", r.RunID, r.Scope)
	case r.Phase == PhaseDraining && r.FrozenSeq == nil:
		return refuse(codes.NotEligible, "DRAINING run %d of %q has no frozen seq", r.RunID, r.Scope)
	case r.Phase != PhaseActive && r.Phase != PhaseDraining:
		return refuse(codes.NotEligible, "run %d of %q is %s", r.RunID, r.Scope, r.Phase)
	}
	return nil
}

// SameBarrier: the fields whose change supersedes an in-flight page (FR-APR09):
// scope, selection, phase, descriptor, protocol, frozen seq, and the explicit-
// recovery checkpoint the page was cross-checked against. checkpoint_seq (max
// observed, moved by the live projector) is deliberately not one of them.
func (r Run) SameBarrier(o Run) bool {
	return r.RunID == o.RunID && r.Scope == o.Scope && r.Phase == o.Phase && r.Selected == o.Selected &&
		r.Managed == o.Managed && r.Epoch == o.Epoch && r.DescriptorHash == o.DescriptorHash &&
		r.ProtocolVersion == o.ProtocolVersion && eqPtr(r.FrozenSeq, o.FrozenSeq) &&
		eqPtr(r.RecoveryCheckpointSeq, o.RecoveryCheckpointSeq) && r.RecoveryCheckpointDigest == o.RecoveryCheckpointDigest &&
		r.RecoveryCheckpointDescriptorHash == o.RecoveryCheckpointDescriptorHash &&
		r.RecoveryCheckpointProtocolVersion == o.RecoveryCheckpointProtocolVersion
}

func eqPtr(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

const runColumns = `run_id, scope, epoch, managed, selected, phase, descriptor_hash, protocol_version, frozen_seq, checkpoint_seq,
       recovery_checkpoint_seq, coalesce(recovery_checkpoint_digest, ''), coalesce(recovery_checkpoint_descriptor_hash, ''),
       coalesce(recovery_checkpoint_protocol_version, 0)`

func scanRun(row pgx.Row) (Run, error) {
	var r Run
	err := row.Scan(&r.RunID, &r.Scope, &r.Epoch, &r.Managed, &r.Selected, &r.Phase, &r.DescriptorHash, &r.ProtocolVersion,
		&r.FrozenSeq, &r.CheckpointSeq, &r.RecoveryCheckpointSeq, &r.RecoveryCheckpointDigest,
		&r.RecoveryCheckpointDescriptorHash, &r.RecoveryCheckpointProtocolVersion)
	return r, err
}

// SelectedRun reads the scope's selected run. A scope with no selected run
// answers a NOT_ELIGIBLE refusal (unselected scopes need operator review).
func (s *Store) SelectedRun(ctx context.Context, scope string) (Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM projection_runs WHERE scope = $1 AND selected`, scope))
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{Scope: scope}, refuse(codes.NotEligible, "scope %q has no selected run", scope)
	}
	if err != nil {
		return Run{}, dbErr("store: read selected run", err)
	}
	return r, nil
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
