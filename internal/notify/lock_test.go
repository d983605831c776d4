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

package notify

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// lockFixture: an outbox of n unsent rows in a database of its own, reached
// as the operator's role, and a NATS server.
func lockFixture(t *testing.T, n int) (*pgxpool.Pool, *server.Server) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t, recoverydb.New(t).Recovery)
	for seq := 1; seq <= n; seq++ {
		if _, err := pool.Exec(ctx, `INSERT INTO projection_catchup_outbox (msg_id, scope, account, instrument, quantity, avg_cost, cursor_seq)
VALUES ($1, 's', 'A', 'ACME', $2, 1, $3)`, fmt.Sprintf("A/%d", seq), seq, seq); err != nil {
			t.Fatal(err)
		}
	}
	return pool, testenv.NATSServer(t)
}

// drainLocksHeld counts the granted advisory locks in the pool's database.
func drainLocksHeld(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `
SELECT count(*) FROM pg_locks
 WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFlush_NoTransactionAcrossNATS (FR-APR06 R2, published after commit):
// while the publisher waits for NATS to
// acknowledge a batch, it holds the drain lock (another publisher cannot
// read the outbox) but no transaction: a transaction held open across the
// network call sat idle in transaction for as long as NATS took.
func TestFlush_NoTransactionAcrossNATS(t *testing.T) {
	pool, ns := lockFixture(t, 3)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	p := New(pool, nc, "test.positions")
	checked := false
	p.beforeFlush = func() {
		checked = true
		var idle int
		if err := pool.QueryRow(context.Background(), `
SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&idle); err != nil {
			t.Error(err)
			return
		}
		if idle != 0 {
			t.Errorf("%d sessions idle in transaction while the publisher waits for NATS", idle)
		}
		if n := drainLocksHeld(t, pool); n != 1 {
			t.Errorf("%d advisory locks held while the publisher waits for NATS, want the drain lock", n)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := p.Flush(ctx)
	if err != nil || n != 3 || !checked {
		t.Fatalf("flushed %d (checked %t): %v", n, checked, err)
	}
	if n := drainLocksHeld(t, pool); n != 0 {
		t.Fatalf("%d advisory locks held after the flush", n)
	}
}

// TestFlush_FailedBatchReleasesTheLock: a batch that fails after taking the
// drain lock (NATS gone) marks nothing and leaves no lock behind, on a
// connection back in the pool or anywhere else: the next publisher drains
// the outbox at once.
func TestFlush_FailedBatchReleasesTheLock(t *testing.T) {
	pool, ns := lockFixture(t, 3)
	closed, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if n, err := New(pool, closed, "test.positions").Flush(ctx); err == nil || n != 0 {
		t.Fatalf("flush over a closed NATS connection: %d sent, err %v", n, err)
	}
	if n := drainLocksHeld(t, pool); n != 0 {
		t.Fatalf("%d advisory locks held after a failed batch", n)
	}
	var unsent int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM projection_catchup_outbox WHERE sent_at IS NULL`).Scan(&unsent); err != nil {
		t.Fatal(err)
	}
	if unsent != 3 {
		t.Fatalf("%d rows unsent after a failed batch, want all 3", unsent)
	}

	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if n, err := New(pool, nc, "test.positions").Flush(ctx); err != nil || n != 3 {
		t.Fatalf("next publisher: flushed %d: %v", n, err)
	}
}

// TestFlush_CancelledLockWaitLeavesNoLock: a publisher whose context ends
// while another holds the drain lock fails, takes nothing with it, and the
// outbox drains as soon as the holder lets go.
func TestFlush_CancelledLockWaitLeavesNoLock(t *testing.T) {
	pool, ns := lockFixture(t, 3)
	ctx := context.Background()
	holder, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, drainLockSQL); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	p := New(pool, nc, "test.positions")
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	n, err := p.Flush(short)
	cancel()
	if err == nil || n != 0 {
		t.Fatalf("flush while another holds the drain lock: %d sent, err %v", n, err)
	}
	if _, err := holder.Exec(ctx, drainUnlockSQL); err != nil {
		t.Fatal(err)
	}
	holder.Release()
	// A wait that pgx abandoned by closing its connection may still be
	// granted the lock by the server, whose backend then finds the client
	// gone and exits: the lock may be held for a moment, never for good.
	deadline := time.Now().Add(5 * time.Second)
	for drainLocksHeld(t, pool) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the drain lock is still held 5 s after a cancelled wait")
		}
		time.Sleep(20 * time.Millisecond)
	}
	long, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if n, err := p.Flush(long); err != nil || n != 3 {
		t.Fatalf("flush after the holder let go: %d sent: %v", n, err)
	}
}
