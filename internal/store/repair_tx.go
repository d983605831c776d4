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

	"github.com/jackc/pgx/v5"
)

// WithScopeWrite runs fn as one repair write of l.Scope, the way a page
// runs: BEGIN; the scope's projection write lock (WriteLock), which the live
// projector and every page take first; the lease row FOR UPDATE with our
// owner and fence, unexpired (FR-APR08), else LEASE_LOST; fn; COMMIT. Any
// error rolls everything back. Without the write lock a live trade could
// land between a handler's compare with Before and its write; without the
// fence a manager that lost the scope could overwrite what the new owner's
// page just verified (docs/design/page-transaction.md).
func (s *Store) WithScopeWrite(ctx context.Context, l Lease, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return s.scopeWrite(ctx, l, fn, false)
}

// DryRunScopeWrite runs fn exactly like WithScopeWrite (same locks, same
// fence, same statements) and then ROLLS BACK, whatever fn did: the
// reconciliation dry run executes the plan's handlers inside a transaction
// that is rolled back, so a plan that would fail (a constraint, a refused
// compare, a lost lease, a missing grant) is known before anyone approves it,
// and nothing is ever written. fn's error is returned as is.
func (s *Store) DryRunScopeWrite(ctx context.Context, l Lease, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return s.scopeWrite(ctx, l, fn, true)
}

func (s *Store) scopeWrite(ctx context.Context, l Lease, fn func(ctx context.Context, tx pgx.Tx) error, dry bool) error {
	if l.Scope == "" || l.Owner == "" {
		return errors.New("store: scope write needs a lease (scope and owner)")
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return dbErr("store: begin repair", err)
	}
	// A failed rollback closes the connection: the server rolls back.
	defer func() { _ = tx.Rollback(ctx) }()
	if err := WriteLock(ctx, tx, l.Scope); err != nil {
		return err
	}
	if err := lockLease(ctx, tx, l); err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if dry {
		return nil // the deferred rollback discards every statement of fn
	}
	if err := tx.Commit(ctx); err != nil {
		return dbErr(fmt.Sprintf("store: commit repair of %q", l.Scope), err)
	}
	return nil
}
