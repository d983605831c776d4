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

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/codes"
)

// This file holds every statement on projection_runs, the trade-processor's
// table of projection runs. Recovery and reconciliation read it and never
// write it (FR-APR09).

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

// RunList reads every run of scope in run_id order, in q's snapshot.
func RunList(ctx context.Context, q Querier, scope string) ([]Run, error) {
	rows, err := q.Query(ctx, `SELECT `+runColumns+` FROM projection_runs WHERE scope = $1 ORDER BY run_id`, scope)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// sameRun re-reads the scope's selected run (forShare: FOR SHARE) and
// refuses SUPERSEDED unless it is run with the same barrier (FR-APR09: runs
// are read, never written). The slice reads it twice: first without a row
// lock, to refuse early; then FOR SHARE as the last read before the cursor
// moves, which holds until COMMIT. Between the two, a change that committed
// is seen by the second read and refuses the slice, and a change not yet
// committed makes it wait and then refuses it, so the run the slice commits
// under is the run it was verified against. The live projector updates the
// run row (its max observed seq) in every write: a FOR SHARE taken first
// would make every live write wait for the whole slice, even on keys the
// slice does not lock.
func sameRun(ctx context.Context, tx pgx.Tx, run Run, forShare bool) error {
	q := `SELECT ` + runColumns + ` FROM projection_runs WHERE scope = $1 AND selected`
	if forShare {
		q = `SELECT ` + runColumns + ` FROM projection_runs WHERE scope = $1 AND selected FOR SHARE`
	}
	now, err := scanRun(tx.QueryRow(ctx, q, run.Scope))
	if errors.Is(err, pgx.ErrNoRows) {
		return refuse(codes.Superseded, "scope %q no longer has a selected run", run.Scope)
	}
	if err != nil {
		return dbErr("store: re-read run", err)
	}
	if !now.SameBarrier(run) {
		return refuse(codes.Superseded, "run changed: was %d/%s/%s, now %d/%s/%s",
			run.RunID, run.Phase, run.DescriptorHash, now.RunID, now.Phase, now.DescriptorHash)
	}
	return nil
}
