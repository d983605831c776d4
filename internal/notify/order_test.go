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
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// R2 with several managers: two publishers (one per manager: own pool, own
// NATS connection) drain one database's outbox at the same time. Every
// message of a key must leave in cursor order, whichever manager sends it;
// with one publisher per batch claiming rows FOR UPDATE SKIP LOCKED, the
// second took page N+1's row while the first still sent page N's. Batch size
// 1 makes every row its own claim, so the race is near certain before the fix.
func TestR2_TwoPublishersKeepPerKeyCursorOrder(t *testing.T) {
	ctx := context.Background()
	// Both publishers connect as the operator's role (docs/database-role.md).
	pool := pgtest.Pool(t, recoverydb.New(t).Recovery)
	pool2, err := pgxpool.NewWithConfig(ctx, pool.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer pool2.Close()

	// Pages 1..pages of one scope, each changing key A: ids increase with the
	// cursor, as pages of a scope serialize on the write lock.
	const pages = 400
	keys := []string{"A"}
	for seq := 1; seq <= pages; seq++ {
		for _, k := range keys {
			if _, err := pool.Exec(ctx, `INSERT INTO projection_catchup_outbox (msg_id, scope, account, instrument, quantity, avg_cost, cursor_seq)
VALUES ($1, 's', $2, 'ACME', $3, 1, $4)`, fmt.Sprintf("%s/%d", k, seq), k, seq, seq); err != nil {
				t.Fatal(err)
			}
		}
	}

	ns := testenv.NATSServer(t)
	connect := func() *nats.Conn {
		nc, err := nats.Connect(ns.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	sub, err := connect().SubscribeSync("test.positions.s")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}

	pubs := []*Publisher{New(pool, connect(), "test.positions"), New(pool2, connect(), "test.positions")}
	var wg sync.WaitGroup
	errs := make(chan error, len(pubs))
	for _, p := range pubs {
		p.batch = 1
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each manager flushes until the outbox is drained (by either).
			for {
				if _, err := p.Flush(ctx); err != nil {
					errs <- err
					return
				}
				var unsent int
				if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM projection_catchup_outbox WHERE sent_at IS NULL`).Scan(&unsent); err != nil {
					errs <- err
					return
				}
				if unsent == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	last := map[string]int64{}
	for i := 0; i < pages*len(keys); i++ {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		var n Notification
		if err := json.Unmarshal(m.Data, &n); err != nil {
			t.Fatal(err)
		}
		if n.CursorSeq <= last[n.Account] {
			t.Fatalf("key %s/%s: cursor_seq %d received after %d (message %d)", n.Account, n.Instrument, n.CursorSeq, last[n.Account], i)
		}
		last[n.Account] = n.CursorSeq
	}
	for _, k := range keys {
		if last[k] != pages {
			t.Fatalf("key %s: last cursor_seq %d, want %d", k, last[k], pages)
		}
	}
}
