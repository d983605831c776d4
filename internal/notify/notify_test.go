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

package notify_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/projection-recovery/projection-recovery/internal/notify"
	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

func TestMain(m *testing.M) { pgtest.MainLeakChecked(m) }

// R2 at-least-once: committed outbox rows are published in order by Run when
// kicked, each with its Nats-Msg-Id, then marked sent and never re-published.
func TestR2_OutboxPublishedOnKickInOrder(t *testing.T) {
	ctx := context.Background()
	// The publisher runs as the operator's role (docs/database-role.md).
	s := store.New(pgtest.Pool(t, recoverydb.New(t).Recovery))
	ns := testenv.NATSServer(t)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	p := notify.New(s.Pool(), nc, "test.positions")
	sub, err := nc.SubscribeSync(p.Subject("s"))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go p.Run(runCtx, time.Hour, func(err error) { t.Error(err) })
	for i, acct := range []string{"A", "B", "C"} {
		if _, err := s.Pool().Exec(ctx, `INSERT INTO projection_catchup_outbox (msg_id, scope, account, instrument, quantity, avg_cost, cursor_seq)
VALUES ($1, 's', $2, 'ACME', $3, 1.5, 7)`, "id-"+acct, acct, i+1); err != nil {
			t.Fatal(err)
		}
	}
	p.Kick("s")
	for i, acct := range []string{"A", "B", "C"} {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var n notify.Notification
		if err := json.Unmarshal(m.Data, &n); err != nil {
			t.Fatal(err)
		}
		if n.Account != acct || m.Header.Get(nats.MsgIdHdr) != "id-"+acct || n.CursorSeq != 7 || n.AvgCost != "1.5" || n.Quantity != itoa(i+1) {
			t.Fatalf("message %d: %+v %v", i, n, m.Header)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var unsent int
		s.Pool().QueryRow(ctx, `SELECT count(*) FROM projection_catchup_outbox WHERE sent_at IS NULL`).Scan(&unsent)
		if unsent == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows still unsent", unsent)
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Kick("s")
	if m, err := sub.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("re-published %s", m.Data)
	}
}

func itoa(i int) string { return string(rune('0' + i)) }
