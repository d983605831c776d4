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
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/codes"
)

// insertFlat is a repair body that writes one recognisable position row.
func insertFlat(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `INSERT INTO positions (scope, account, instrument, opening_proven, quantity, avg_cost) VALUES ('s', 'R', 'ACME', true, 0, 0)`)
	return err
}

func repairRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(ctxb, `SELECT count(*) FROM positions WHERE scope = 's' AND account = 'R'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// FR-APR08 for repairs: an owner whose lease was taken over (fence moved) or
// expired cannot commit a repair; nothing is written and the refusal is
// LEASE_LOST. The current owner can.
func TestRepairTx_ReplacedOwnerCannotCommit(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	addRun(t, s, "s", PhaseActive, nil)
	old, err := s.AcquireLease(ctxb, "s", "old", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	// Expired, not yet taken over: refused.
	wantCode(t, s.WithScopeWrite(ctxb, old, insertFlat), codes.LeaseLost)
	cur := lease(t, s, "s", "new")
	if cur.Fence == old.Fence {
		t.Fatalf("takeover kept fence %d", cur.Fence)
	}
	before := snapshot(t, s)
	wantCode(t, s.WithScopeWrite(ctxb, old, insertFlat), codes.LeaseLost)
	wantCode(t, s.DryRunScopeWrite(ctxb, old, insertFlat), codes.LeaseLost)
	if after := snapshot(t, s); after != before || repairRows(t, s) != 0 {
		t.Fatalf("a replaced owner's repair wrote:\nbefore %s\nafter  %s", before, after)
	}
	if err := s.WithScopeWrite(ctxb, cur, insertFlat); err != nil {
		t.Fatalf("current owner: %v", err)
	}
	if repairRows(t, s) != 1 {
		t.Fatal("the current owner's repair was not committed")
	}
}

// A takeover that starts while a repair is in flight waits for it (the lease
// row is locked to COMMIT), so the old owner's repair commits under its own
// fence and the new owner's fence is issued after it: never both at once.
func TestRepairTx_TakeoverWaitsForRepair(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	addRun(t, s, "s", PhaseActive, nil)
	l, err := s.AcquireLease(ctxb, "s", "old", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.WithScopeWrite(ctxb, l, func(ctx context.Context, tx pgx.Tx) error {
			close(inside)
			<-release
			return insertFlat(ctx, tx)
		})
	}()
	<-inside
	time.Sleep(350 * time.Millisecond) // the lease expires while the repair holds its row
	took := make(chan Lease, 1)
	go func() {
		nl, err := s.AcquireLease(ctxb, "s", "new", time.Minute)
		if err != nil {
			t.Error(err)
		}
		took <- nl
	}()
	select {
	case <-took:
		t.Fatal("a takeover completed while a repair held the lease row")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("in-flight repair: %v", err)
	}
	if nl := <-took; nl.Fence != l.Fence+1 {
		t.Fatalf("new fence %d, want %d", nl.Fence, l.Fence+1)
	}
}

// FR-APR06 for repairs: a repair and a page of the same scope never
// interleave: a page started while a repair holds the projection write lock
// waits until the repair commits, and then sees (and verifies) its result.
func TestRepairTx_NeverInterleavesWithPage(t *testing.T) {
	f := setup(t)
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- f.s.WithScopeWrite(ctxb, f.l, func(ctx context.Context, tx pgx.Tx) error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	page := make(chan error, 1)
	go func() {
		_, err := f.s.ApplyPage(ctxb, f.l, f.run, f.src.Page(0, 100))
		page <- err
	}()
	select {
	case err := <-page:
		t.Fatalf("a page ran while a repair held the scope (err %v)", err)
	case <-time.After(400 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-page; err != nil {
		t.Fatalf("page after the repair: %v", err)
	}
}

// The dry run executes the body under the same locks and fence and rolls it
// back: success writes nothing, and the body's own error is returned.
func TestRepairTx_DryRunWritesNothing(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	addRun(t, s, "s", PhaseActive, nil)
	l := lease(t, s, "s", "a")
	before := snapshot(t, s)
	if err := s.DryRunScopeWrite(ctxb, l, insertFlat); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, s); after != before || repairRows(t, s) != 0 {
		t.Fatalf("dry run wrote:\nbefore %s\nafter  %s", before, after)
	}
	boom := errors.New("handler refused")
	err := s.DryRunScopeWrite(ctxb, l, func(ctx context.Context, tx pgx.Tx) error {
		if err := insertFlat(ctx, tx); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) || repairRows(t, s) != 0 {
		t.Fatalf("dry run of a failing body: err %v rows %d", err, repairRows(t, s))
	}
	// A body that fails in SQL (a constraint) is known before approval.
	err = s.DryRunScopeWrite(ctxb, l, func(ctx context.Context, tx pgx.Tx) error {
		if err := insertFlat(ctx, tx); err != nil {
			return err
		}
		return insertFlat(ctx, tx) // duplicate primary key
	})
	if err == nil {
		t.Fatal("dry run hid a primary-key violation")
	}
}
