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

package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/projection-recovery/projection-recovery/internal/notify"
	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
)

// The reconciliation controller's hooks: without NATS there is no Publish
// hook and the status says why (the planner refuses republish with it);
// with the suite's nats-server the status is connected and Publish sends
// the notification as the outbox publisher would (notify.Message).
func TestConnections_ReconciliationPublishHooks(t *testing.T) {
	off := &Connections{}
	if off.Republish() != nil {
		t.Fatal("a manager without NATS has a Publish hook")
	}
	if s := off.PublisherStatus(); s == nil || s.Missing != noNATS || s.Connected {
		t.Fatalf("status without NATS: %+v", s)
	}

	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", suiteNATSPort))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	got := make(chan *nats.Msg, 1)
	if _, err := nc.ChanSubscribe(notify.DefaultSubjectPrefix+".hooks", got); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	on := &Connections{NATS: nc}
	if s := on.PublisherStatus(); s == nil || s.Missing != "" || !s.Connected {
		t.Fatalf("status with NATS: %+v", s)
	}
	n := notify.Notification{MsgID: "position/5:hooks/1:A/1:X/3/1.50@2", Scope: "hooks", Account: "A", Instrument: "X", Quantity: "1.50", AvgCost: "2", CursorSeq: 3}
	if err := on.Republish()(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	want, err := notify.Message("", n)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if string(m.Data) != string(want.Data) || m.Header.Get(nats.MsgIdHdr) != n.MsgID || m.Subject != want.Subject {
			t.Fatalf("republished %s %s %q, want %s %s %q", m.Subject, m.Header.Get(nats.MsgIdHdr), m.Data, want.Subject, n.MsgID, want.Data)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing republished")
	}
}

// The reconciliation controller's pools (auto-recovery off: no polling
// publisher) drain the outbox when a repair's commit kicks them
// (store.AfterCommit), and never on their own: a repaired balance reaches
// NATS at once, and such a manager marks nothing sent unless it committed.
func TestConnections_KickOnlyDrainWithoutAutoRecovery(t *testing.T) {
	ctx := context.Background()
	db := recoverydb.New(t)
	admin := pgtest.Pool(t, db.Admin)
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", suiteNATSPort))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	got := make(chan *nats.Msg, 4)
	if _, err := nc.ChanSubscribe(notify.DefaultSubjectPrefix+".kick", got); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `INSERT INTO projection_catchup_outbox (msg_id, scope, account, instrument, quantity, avg_cost, cursor_seq)
VALUES ('repair/kick', 'kick', 'A', 'X', 1, 2, 3)`); err != nil {
		t.Fatal(err)
	}
	c := &Connections{NATS: nc, NotifyInterval: 50 * time.Millisecond}
	defer c.Close()
	st, err := c.Store(ctx, "ns/fix", db.Reconciliation)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		t.Fatalf("drained without a kick: %s", m.Data)
	case <-time.After(500 * time.Millisecond):
	}
	st.AfterCommit("kick")
	select {
	case m := <-got:
		if m.Header.Get(nats.MsgIdHdr) != "repair/kick" {
			t.Fatalf("drained %s", m.Header.Get(nats.MsgIdHdr))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the kick drained nothing")
	}
	eventually(t, 10*time.Second, "the row stamped sent", func() (bool, error) {
		var sent bool
		err := admin.QueryRow(ctx, `SELECT sent_at IS NOT NULL FROM projection_catchup_outbox WHERE msg_id = 'repair/kick'`).Scan(&sent)
		return sent, err
	})
}
