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

	"github.com/projection-recovery/projection-recovery/internal/codes"

	"github.com/jackc/pgx/v5"
)

// This file holds every statement on projection_catchup_lease, the fence of
// FR-APR08: every recovery or repair write re-reads the row FOR UPDATE in
// its own transaction (lockLease), so a replaced owner can never commit.

// Lease is ownership of a scope's recovery writes (FR-APR08). Fence increases
// on every takeover by a new owner and on every acquire after expiry, so a
// replaced owner's Fence can never match the row again.
type Lease struct {
	Scope     string
	Owner     string
	Fence     int64
	ExpiresAt time.Time
}

// AcquireLease takes or re-takes the scope's lease. A new owner succeeds only if
// the current lease is expired; the same owner re-acquiring an unexpired lease
// keeps its fence. All times are the database clock (clock_timestamp), so
// managers with skewed clocks agree. While an in-flight page holds the row lock
// this statement waits for it (the takeover cannot interleave with the page).
// Returns a LEASE_HELD refusal when another owner holds an unexpired lease.
func (s *Store) AcquireLease(ctx context.Context, scope, owner string, ttl time.Duration) (Lease, error) {
	if scope == "" || owner == "" || ttl <= 0 {
		return Lease{}, errors.New("store: AcquireLease needs scope, owner and a positive ttl")
	}
	l := Lease{Scope: scope}
	err := s.pool.QueryRow(ctx, `
INSERT INTO projection_catchup_lease AS l (scope, owner, fence, expires_at, acquired_at, renewed_at)
VALUES ($1, $2, 1, clock_timestamp() + $3::bigint * interval '1 microsecond', clock_timestamp(), clock_timestamp())
ON CONFLICT (scope) DO UPDATE SET
    fence       = CASE WHEN l.owner <> EXCLUDED.owner OR l.expires_at <= clock_timestamp() THEN l.fence + 1 ELSE l.fence END,
    acquired_at = CASE WHEN l.owner <> EXCLUDED.owner OR l.expires_at <= clock_timestamp() THEN clock_timestamp() ELSE l.acquired_at END,
    owner       = EXCLUDED.owner,
    expires_at  = EXCLUDED.expires_at,
    renewed_at  = clock_timestamp()
WHERE l.owner = EXCLUDED.owner OR l.expires_at <= clock_timestamp()
RETURNING owner, fence, expires_at`, scope, owner, ttl.Microseconds()).Scan(&l.Owner, &l.Fence, &l.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Lease{}, refuse(codes.LeaseHeld, "scope %q is leased by another owner", scope)
	}
	if err != nil {
		return Lease{}, dbErr("store: acquire lease", err)
	}
	return l, nil
}

// RenewLease extends an unexpired lease we still hold (same owner and fence).
// LEASE_LOST when it was taken over, released or has expired: the caller must
// stop writing and acquire again (which increments the fence).
func (s *Store) RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	out := l
	err := s.pool.QueryRow(ctx, `
UPDATE projection_catchup_lease
   SET expires_at = clock_timestamp() + $4::bigint * interval '1 microsecond', renewed_at = clock_timestamp()
 WHERE scope = $1 AND owner = $2 AND fence = $3 AND expires_at > clock_timestamp()
RETURNING expires_at`, l.Scope, l.Owner, l.Fence, ttl.Microseconds()).Scan(&out.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Lease{}, refuse(codes.LeaseLost, "lease on %q (owner %q fence %d) is no longer held", l.Scope, l.Owner, l.Fence)
	}
	if err != nil {
		return Lease{}, dbErr("store: renew lease", err)
	}
	return out, nil
}

// ReleaseLease expires our lease now (the row stays, so the fence keeps
// counting). Releasing a lease we no longer hold is a no-op. renewed_at is
// stamped with the same instant: renewed_at >= expires_at is how a release
// is told apart from a holder that died (reconciliation's lease.fresh).
func (s *Store) ReleaseLease(ctx context.Context, l Lease) error {
	_, err := s.pool.Exec(ctx, `
UPDATE projection_catchup_lease SET (expires_at, renewed_at) = (SELECT c, c FROM clock_timestamp() AS c)
 WHERE scope = $1 AND owner = $2 AND fence = $3 AND expires_at > clock_timestamp()`, l.Scope, l.Owner, l.Fence)
	return dbErr("store: release lease", err)
}

// ReleaseAll expires every lease held by owner or by one of its
// per-namespace identities, owner/<namespace> (shutdown, FR-APR10).
func (s *Store) ReleaseAll(ctx context.Context, owner string) error {
	_, err := s.pool.Exec(ctx, `
UPDATE projection_catchup_lease SET (expires_at, renewed_at) = (SELECT c, c FROM clock_timestamp() AS c)
 WHERE (owner = $1 OR starts_with(owner, $1 || '/')) AND expires_at > clock_timestamp()`, owner)
	return dbErr("store: release all leases", err)
}

// ReadLease returns the scope's lease row as stored (zero Lease when absent).
func (s *Store) ReadLease(ctx context.Context, scope string) (Lease, error) {
	l := Lease{Scope: scope}
	err := s.pool.QueryRow(ctx, `SELECT owner, fence, expires_at FROM projection_catchup_lease WHERE scope = $1`, scope).
		Scan(&l.Owner, &l.Fence, &l.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Lease{Scope: scope}, nil
	}
	return l, dbErr("store: read lease", err)
}

// LeaseRow is the lease row as stored, with its bookkeeping stamps.
type LeaseRow struct {
	Owner                            string
	Fence                            int64
	ExpiresAt, AcquiredAt, RenewedAt time.Time
}

// LeaseGet reads the scope's lease row in q's snapshot (nil: never leased).
func LeaseGet(ctx context.Context, q Querier, scope string) (*LeaseRow, error) {
	var l LeaseRow
	err := q.QueryRow(ctx, `SELECT owner, fence, expires_at, acquired_at, renewed_at
  FROM projection_catchup_lease WHERE scope = $1`, scope).Scan(&l.Owner, &l.Fence, &l.ExpiresAt, &l.AcquiredAt, &l.RenewedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// LeaseGetForUpdate reads the scope's lease row FOR UPDATE (nil: no row) and
// whether it has expired by the database clock. The row lock holds until tx
// ends, so no AcquireLease, renewal or page of the scope commits in between.
func LeaseGetForUpdate(ctx context.Context, tx pgx.Tx, scope string) (_ *LeaseRow, expired bool, _ error) {
	var l LeaseRow
	err := tx.QueryRow(ctx, `SELECT owner, fence, expires_at, acquired_at, renewed_at, expires_at <= clock_timestamp()
  FROM projection_catchup_lease WHERE scope = $1 FOR UPDATE`, scope).Scan(&l.Owner, &l.Fence, &l.ExpiresAt, &l.AcquiredAt, &l.RenewedAt, &expired)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return &l, expired, nil
}

// LeaseClearOwner clears the owner of the scope's lease row while it is still
// owner's at fence. Fence and expiry stay: the next AcquireLease increments
// the fence, so a write of the old fence can never commit (FR-APR08). The row
// is never deleted, which would reset the fence.
func LeaseClearOwner(ctx context.Context, tx pgx.Tx, scope, owner string, fence int64) error {
	_, err := tx.Exec(ctx, `UPDATE projection_catchup_lease SET owner = '' WHERE scope = $1 AND owner = $2 AND fence = $3`, scope, owner, fence)
	return err
}

// lockLease is the fence check of every write transaction (FR-APR08): it
// re-reads the lease row FOR UPDATE and requires our owner and fence and an
// unexpired lease. The row lock is held until the transaction ends, so a
// takeover (AcquireLease updates the same row) waits for our commit, and a
// replaced owner fails here instead of committing.
func lockLease(ctx context.Context, tx pgx.Tx, l Lease) error {
	var owner string
	var fence int64
	var live bool
	err := tx.QueryRow(ctx, `
SELECT owner, fence, expires_at > clock_timestamp()
  FROM projection_catchup_lease WHERE scope = $1 FOR UPDATE`, l.Scope).Scan(&owner, &fence, &live)
	if errors.Is(err, pgx.ErrNoRows) {
		return refuse(codes.LeaseLost, "no lease row for scope %q", l.Scope)
	}
	if err != nil {
		return dbErr("store: lock lease", err)
	}
	if owner != l.Owner || fence != l.Fence {
		return refuse(codes.LeaseLost, "scope %q is now leased by %q fence %d (we are %q fence %d)", l.Scope, owner, fence, l.Owner, l.Fence)
	}
	if !live {
		return refuse(codes.LeaseLost, "lease on %q (owner %q fence %d) expired", l.Scope, l.Owner, l.Fence)
	}
	return nil
}
