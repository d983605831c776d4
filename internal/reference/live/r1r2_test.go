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

package live_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/codes"

	"github.com/nats-io/nats.go"

	"github.com/projection-recovery/projection-recovery/internal/notify"
	"github.com/projection-recovery/projection-recovery/internal/store"
	. "github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// Three trades on A/ACME (authoritative: +10@100, +10@200, -5@300 → 15@150).
var (
	t1 = Trade(1, 1, "t1", "ACME", "100", "10", "A", "B")
	t2 = Trade(2, 2, "t2", "ACME", "200", "10", "A", "B")
	t3 = Trade(3, 3, "t3", "ACME", "300", "5", "C", "A")
)

func ledger3(t *testing.T) *Ledger { return NewLedger(t, 4, t1, t2, t3) }

// R1: the live feed delivered every trade but out of order (t3, t1, t2), so
// its arrival-order average cost for A is wrong. The page inserts nothing and
// still re-derives A from ALL retained trades in (seq, tradeSeq) order: the
// arrival-order basis is never certified.
func TestR1_ArrivalOrderBasisIsNeverCertified(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Descriptor)
	feed(t, e, t3, t1, t2)
	if got := position(t, e, "A", "ACME"); got != "15@166.666666666667" {
		t.Fatalf("arrival-order position %s (test premise)", got)
	}
	res := catchUp(t, e, ledger3(t), 100)
	if res.InsertedTrades != 0 {
		t.Fatalf("%+v", res)
	}
	if got := position(t, e, "A", "ACME"); got != "15@150" {
		t.Fatalf("certified position %s, want 15@150", got)
	}
	AssertPositions(t, e.s.Pool(), "s", ledger3(t).Decoded)
}

// R1: within one command, trades are ordered by engine trade sequence, not by
// arrival.
func TestR1_SameCommandOrderedByTradeSeq(t *testing.T) {
	t.Parallel()
	a := Trade(2, 7, "a", "ACME", "100", "10", "A", "B")
	b := Trade(2, 8, "b", "ACME", "50", "4", "B", "A")
	c := Trade(2, 9, "c", "ACME", "70", "10", "A", "B")
	src := NewLedger(t, 2, a, b, c)
	e := newEnv(t, Descriptor)
	feed(t, e, c, b, a)
	catchUp(t, e, src, 100)
	AssertPositions(t, e.s.Pool(), "s", src.Decoded)
}

// R1: live trades newer than the page's throughSeq are retained and included
// in the re-derivation (never dropped or rolled back), while the cursor only
// claims the page's window.
func TestR1_NewerLiveTradesAreKept(t *testing.T) {
	t.Parallel()
	t4 := Trade(4, 4, "t4", "ACME", "400", "20", "A", "C")
	t5 := Trade(5, 5, "t5", "ACME", "500", "1", "C", "A")
	src := NewLedger(t, 6, t1, t2, t3, t4, t5)
	e := newEnv(t, Descriptor)
	feed(t, e, t1, t3, t5, t4) // t2 lost, t4/t5 reordered
	res, err := e.s.ApplyPage(ctxb, e.l, e.run, src.Page(0, 2))
	if err != nil {
		t.Fatal(err)
	}
	if res.VerifiedThroughSeq != 2 || res.InsertedTrades != 1 || res.State != store.StateCatchingUp {
		t.Fatalf("%+v", res)
	}
	var n int
	e.s.Pool().QueryRow(ctxb, `SELECT count(*) FROM trades WHERE seq > 2`).Scan(&n)
	if n != 3 {
		t.Fatalf("newer live trades: %d, want 3 kept", n)
	}
	// Every trade is now retained, so every key equals the full replay.
	AssertPositions(t, e.s.Pool(), "s", src.Decoded)
	catchUp(t, e, src, 2)
	AssertPositions(t, e.s.Pool(), "s", src.Decoded)
}

// R2: keys whose final position differs from the PRE-page value get one
// notification with the final position; it is published only after commit,
// by the outbox publisher, with an idempotency key.
func TestR2_ChangedKeyPublishesFinalPositionAfterCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Descriptor)
	nc := testenv.NATSConn(t)
	pub := notify.New(e.s.Pool(), nc, "")
	sub, err := nc.SubscribeSync(pub.Subject("s"))
	if err != nil {
		t.Fatal(err)
	}
	feed(t, e, t3, t1, t2)
	catchUp(t, e, ledger3(t), 100)
	if got := outbox(t, e); !reflect.DeepEqual(got, []string{"A/ACME=15@150"}) {
		t.Fatalf("outbox %v", got)
	}
	if _, err := sub.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatal("published before the publisher ran (inside the page?)")
	}
	if n, err := pub.Flush(ctxb); err != nil || n != 1 {
		t.Fatalf("flush %d %v", n, err)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var body notify.Notification
	if err := json.Unmarshal(m.Data, &body); err != nil {
		t.Fatal(err)
	}
	if body.Account != "A" || body.Quantity != "15" || m.Header.Get(nats.MsgIdHdr) != body.MsgID || body.MsgID == "" || body.CursorSeq != 4 {
		t.Fatalf("message %+v header %v", body, m.Header)
	}
	if n, _ := pub.Flush(ctxb); n != 0 {
		t.Fatalf("re-published %d", n)
	}
}

// R2: a key whose change comes from trade insertion alone is published: live
// lost t3 (C's only trade, and A's reduction). Comparing against the state
// after insertion instead of the PRE-page value would publish nothing for A.
func TestR2_ChangeFromTradeInsertionAloneIsPublished(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Descriptor)
	feed(t, e, t1, t2)
	res := catchUp(t, e, ledger3(t), 100)
	if res.InsertedTrades != 1 || res.ChangedKeys != 2 {
		t.Fatalf("%+v", res)
	}
	want := []string{"A/ACME=15@150", "C/ACME=5@300"}
	if got := outbox(t, e); !reflect.DeepEqual(got, want) {
		t.Fatalf("outbox %v, want %v (B unchanged)", got, want)
	}
}

// R2: unchanged keys publish nothing (the live feed was complete and in order).
func TestR2_UnchangedKeysPublishNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Descriptor)
	feed(t, e, t1, t2, t3)
	res := catchUp(t, e, ledger3(t), 100)
	if res.ChangedKeys != 0 || len(outbox(t, e)) != 0 {
		t.Fatalf("%+v %v", res, outbox(t, e))
	}
}

// R2: a rolled-back (refused) page publishes nothing.
func TestR2_RollbackPublishesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Descriptor)
	nc := testenv.NATSConn(t)
	pub := notify.New(e.s.Pool(), nc, "")
	sub, _ := nc.SubscribeSync(pub.Subject("s"))
	feed(t, e, t3, t1, Trade(2, 9, "orphan", "ACME", "1", "1", "X", "Y"))
	_, err := e.s.ApplyPage(ctxb, e.l, e.run, ledger3(t).Page(0, 100))
	if codes.Of(err) != codes.OrphanTrade {
		t.Fatalf("want ORPHAN_TRADE, got %v", err)
	}
	if n, err := pub.Flush(ctxb); n != 0 || err != nil {
		t.Fatalf("flush %d %v", n, err)
	}
	if _, err := sub.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatal("a refused page published")
	}
}

// R2: a crash between commit and publish loses nothing: the outbox rows were
// committed with the page; a publisher started later sends them.
func TestR2_CrashBetweenCommitAndPublishLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Descriptor)
	feed(t, e, t1)
	catchUp(t, e, ledger3(t), 100) // committed; "crash": no publisher ever ran
	nc := testenv.NATSConn(t)
	pub := notify.New(e.s.Pool(), nc, "")
	sub, _ := nc.SubscribeSync(pub.Subject("s"))
	n, err := pub.Flush(ctxb)
	if err != nil || n != 3 {
		t.Fatalf("flush %d %v", n, err)
	}
	ids := map[string]bool{}
	for i := 0; i < 3; i++ {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ids[m.Header.Get(nats.MsgIdHdr)] = true
	}
	if len(ids) != 3 {
		t.Fatalf("message ids %v", ids)
	}
}
