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
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	. "github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

// commitAndLoseReply sends COMMIT on the page's connection, waits until the
// server has executed it (the backend is idle, out of its transaction), then
// closes the socket before the reply is read and lets pgx's Commit fail on the
// dead connection: the server committed, the client sees a connection error.
// (Closing right after sending, without the wait, sometimes loses the COMMIT
// itself: then the page rolls back, which is the other outcome.)
func commitAndLoseReply(s *Store) func(ctx context.Context, tx pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		pc := tx.Conn().PgConn()
		fe := pc.Frontend()
		fe.Send(&pgproto3.Query{String: "COMMIT"})
		if err := fe.Flush(); err != nil {
			return err
		}
		deadline := time.Now().Add(10 * time.Second)
		for state := ""; state != "idle"; {
			if time.Now().After(deadline) {
				return errors.New("the backend did not finish COMMIT")
			}
			if err := s.pool.QueryRow(ctx, `SELECT coalesce(state, '') FROM pg_stat_activity WHERE pid = $1`, int(pc.PID())).Scan(&state); err != nil {
				return err
			}
		}
		_ = pc.Conn().Close()
		return tx.Commit(ctx)
	}
}

// terminateThenCommit kills the page's backend (waiting until it is gone),
// then commits: the server rolled the page back, the client sees a
// connection error from COMMIT.
func terminateThenCommit(s *Store) func(ctx context.Context, tx pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		var ok bool
		if err := s.pool.QueryRow(ctx, `SELECT pg_terminate_backend($1, 10000)`, int(tx.Conn().PgConn().PID())).Scan(&ok); err != nil || !ok {
			return errors.Join(errors.New("terminate backend failed"), err)
		}
		return tx.Commit(ctx)
	}
}

// The server committed, the reply was lost: the page is a success, reported
// as such, with its after-commit notification.
func TestCommitOutcome_CommittedDespiteLostReplyIsSuccess(t *testing.T) {
	f := setup(t)
	kicks := 0
	f.s.SetAfterCommit(func(string) { kicks++ })
	f.s.hooks.commit = commitAndLoseReply(f.s)
	res, err := f.s.ApplyPage(ctxb, f.l, f.run, f.page())
	if err != nil {
		t.Fatalf("the server committed the page, but ApplyPage reports %v", err)
	}
	c, err := f.s.ReadCursor(ctxb, "s")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Current() || res.VerifiedThroughSeq != 4 || c.VerifiedThroughSeq != 4 || c.ChainDigest != res.ChainDigest || res.ChainDigest != f.src.DigestThrough(4) {
		t.Fatalf("result %+v, cursor %+v", res, c)
	}
	AssertPositions(t, f.s.pool, "s", f.src.Decoded)
	if kicks != 1 {
		t.Fatalf("after-commit hook ran %d times, want 1", kicks)
	}
}

// An idle page (through == after, same digest) that committed is told apart
// from one that did not by the cursor's last_verified_at, which every
// committed page sets.
func TestCommitOutcome_IdlePageCommittedDespiteLostReply(t *testing.T) {
	f := setup(t)
	catchUp(t, f.s, f.l, f.run, f.src, 100)
	before, _ := f.s.ReadCursor(ctxb, "s")
	f.s.hooks.commit = commitAndLoseReply(f.s)
	if _, err := f.s.ApplyPage(ctxb, f.l, f.run, f.src.Page(4, 100)); err != nil {
		t.Fatalf("the server committed the idle page, but ApplyPage reports %v", err)
	}
	after, _ := f.s.ReadCursor(ctxb, "s")
	if !after.LastVerifiedAt.After(*before.LastVerifiedAt) {
		t.Fatalf("idle page did not commit: %v then %v", before.LastVerifiedAt, after.LastVerifiedAt)
	}

	// And the idle page that did not commit is DATABASE_UNAVAILABLE.
	f.s.hooks.commit = terminateThenCommit(f.s)
	refused(t, f.s, f.l, f.run, f.src.Page(4, 100), codes.DatabaseUnavailable)
}

// The backend died before COMMIT reached it: the cursor is still the pre-page
// cursor, so the page rolled back and DATABASE_UNAVAILABLE ("nothing
// written") is the truth.
func TestCommitOutcome_RolledBackIsNothingWritten(t *testing.T) {
	f := setup(t)
	f.s.hooks.commit = terminateThenCommit(f.s)
	r := refused(t, f.s, f.l, f.run, f.page(), codes.DatabaseUnavailable)
	if !strings.Contains(r.Detail, "nothing written") {
		t.Fatalf("detail %q does not say nothing was written", r.Detail)
	}
	if !r.Code.Transient() {
		t.Fatal("DATABASE_UNAVAILABLE must be transient")
	}
}

// The connection dropped during COMMIT and the cursor cannot be read either
// (here: the write lock the re-read needs is held past its timeout, as it is
// while an old backend still finishes the page). The outcome is unknown and
// the store says so, never "nothing written": in this test the page did
// commit.
func TestRefusal_COMMIT_OUTCOME_UNKNOWN(t *testing.T) {
	f := setup(t)
	f.s.hooks.outcomeTimeout = 300 * time.Millisecond
	holder, err := f.s.pool.Acquire(ctxb)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	locked := make(chan error, 1)
	f.s.hooks.commit = func(ctx context.Context, tx pgx.Tx) error {
		// Queue a session lock on the scope's write lock behind the page, so
		// it is granted the moment the page's transaction ends and blocks
		// the outcome re-read.
		go func() {
			_, err := holder.Exec(context.Background(), `SELECT pg_advisory_lock(hashtextextended('projection:' || $1::text, 0))`, "s")
			locked <- err
		}()
		for waiting := false; !waiting; {
			if err := f.s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' AND NOT granted)`,
				int(holder.Conn().PgConn().PID())).Scan(&waiting); err != nil {
				return err
			}
		}
		return commitAndLoseReply(f.s)(ctx, tx)
	}
	_, err = f.s.ApplyPage(ctxb, f.l, f.run, f.page())
	wantCode(t, err, codes.CommitOutcomeUnknown)
	var r *codes.Refusal
	if !errors.As(err, &r) || !r.Code.Transient() || !strings.Contains(r.Detail, "outcome unknown until the cursor can be read") {
		t.Fatalf("want a transient refusal saying the outcome is unknown, got %v", err)
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctxb, `SELECT pg_advisory_unlock(hashtextextended('projection:' || $1::text, 0))`, "s"); err != nil {
		t.Fatal(err)
	}
	// The page had committed: "nothing written" would have been false.
	c, err := f.s.ReadCursor(ctxb, "s")
	if err != nil || c.VerifiedThroughSeq != 4 {
		t.Fatalf("cursor %+v %v", c, err)
	}
	AssertPositions(t, f.s.pool, "s", f.src.Decoded)
}
