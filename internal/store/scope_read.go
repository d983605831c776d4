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
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/projection-recovery/projection-recovery/internal/codes"
)

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
