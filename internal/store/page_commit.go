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

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/codes"
)

// commitOutcomeTimeout bounds the re-read that decides the outcome of a COMMIT
// whose connection failed. It runs even when the caller's context is done (a
// shutdown mid-COMMIT is exactly such a case): reporting the truth is worth a
// few seconds of shutdown.
const commitOutcomeTimeout = 10 * time.Second

// commitPoint identifies one committed version of a scope's cursor. Every
// committed page sets last_verified_at to its own clock_timestamp(), so with
// verified-through and digest it tells a page's commit apart from any other,
// even for an idle page (through and digest unchanged).
type commitPoint struct {
	through    int64
	digest     string
	verifiedAt *time.Time
}

func (a commitPoint) same(b commitPoint) bool {
	if a.through != b.through || a.digest != b.digest || (a.verifiedAt == nil) != (b.verifiedAt == nil) {
		return false
	}
	return a.verifiedAt == nil || a.verifiedAt.Equal(*b.verifiedAt)
}

// commitPoints are the cursor before the page (as read FOR UPDATE in its
// transaction) and the cursor the page wrote.
type commitPoints struct{ pre, post commitPoint }

// resolveCommit decides what a page's COMMIT did when the connection failed
// while it was in flight (commitErr is connection-class): the server may have
// committed and lost only the reply, or never received it. It re-reads the
// cursor on a fresh connection:
//
//   - the page's own commit point: the page committed; nil (success);
//   - the pre-page commit point: it did not; DATABASE_UNAVAILABLE, nothing
//     written;
//   - the read fails, or the cursor moved elsewhere meanwhile (another owner
//     after a takeover): COMMIT_OUTCOME_UNKNOWN (transient), never "nothing
//     written", which could be false.
//
// Without this, a page that committed was reported as "nothing written" and
// its after-commit work (notifications kick, status) was skipped, and a page
// that may have committed was claimed not to have.
func (s *Store) resolveCommit(ctx context.Context, res PageResult, pts commitPoints, commitErr error) error {
	timeout := commitOutcomeTimeout
	if s.hooks.outcomeTimeout > 0 {
		timeout = s.hooks.outcomeTimeout
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	page := fmt.Sprintf("page (%d, %d] of %q", res.AfterSeq, res.VerifiedThroughSeq, res.Scope)
	now, err := s.readCommitPoint(rctx, res.Scope)
	switch {
	case err != nil:
		return &codes.Refusal{Code: codes.CommitOutcomeUnknown,
			Detail: page + ": the connection failed during COMMIT and the cursor could not be re-read: outcome unknown until the cursor can be read",
			Err:    errors.Join(commitErr, err)}
	case now.same(pts.post):
		return nil
	case now.same(pts.pre):
		return &codes.Refusal{Code: codes.DatabaseUnavailable,
			Detail: fmt.Sprintf("%s: the connection failed during COMMIT and the cursor is still at seq %d: the page rolled back, nothing written", page, now.through),
			Err:    commitErr}
	default:
		return &codes.Refusal{Code: codes.CommitOutcomeUnknown,
			Detail: fmt.Sprintf("%s: the connection failed during COMMIT and the cursor has since moved to seq %d: outcome unknown until the cursor can be read; the next cycle continues from the cursor", page, now.through),
			Err:    commitErr}
	}
}

// readCommitPoint reads the scope's cursor on a fresh connection (the pool's
// may be as dead as the page's) under the scope's projection write lock,
// taken exclusively. The lock is the invariant that makes the answer final:
// the page's transaction held it (shared, with its key locks), and PostgreSQL releases a transaction's locks only after its
// commit or abort is visible, so once the lock is ours the page's backend has
// finished and the cursor shows its outcome. Without it, a re-read racing a
// backend still executing the COMMIT would see the pre-page cursor and call
// a page that then commits "nothing written". A backend that never finishes
// keeps the lock: the read times out and the outcome stays unknown.
func (s *Store) readCommitPoint(ctx context.Context, scope string) (commitPoint, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return commitPoint{}, fmt.Errorf("store: connect to re-read the cursor: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	var pt commitPoint
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := WriteLock(ctx, tx, scope); err != nil {
			return err
		}
		var err error
		pt, err = cursorCommitPoint(ctx, tx, scope)
		return err
	})
	if err != nil {
		return commitPoint{}, fmt.Errorf("store: re-read the cursor: %w", err)
	}
	return pt, nil
}
