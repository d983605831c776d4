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

package reconstore

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/notify"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// received is one message a subscriber got.
type received struct {
	id string // Nats-Msg-Id
	n  notify.Notification
}

// subscribe collects scope s's notifications.
func subscribe(t *testing.T, nc *nats.Conn) <-chan received {
	t.Helper()
	ch := make(chan received, 16)
	sub, err := nc.Subscribe(notify.DefaultSubjectPrefix+".s", func(m *nats.Msg) {
		var n notify.Notification
		if err := json.Unmarshal(m.Data, &n); err != nil {
			t.Errorf("notification body %q: %v", m.Data, err)
		}
		ch <- received{id: m.Header.Get(nats.MsgIdHdr), n: n}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return ch
}

// next waits for one message; none within ten seconds fails.
func next(t *testing.T, ch <-chan received, what string) received {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("no notification: %s", what)
	}
	return received{}
}

// none: nothing arrives while the outbox is drained once more.
func none(t *testing.T, ch <-chan received, pub *notify.Publisher, what string) {
	t.Helper()
	if _, err := pub.Flush(ctxb); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		t.Fatalf("%s published %+v", what, r)
	case <-time.After(300 * time.Millisecond):
	}
}

// A position repair reaches consumers (FR-APR06 R2 for repairs): the apply
// of an approved action publishes, after its commit, one message for the
// key with the repaired quantity and average cost, and its rollback one
// with the restored values, each under its own msg id; a dry run and a
// transaction that fails at COMMIT publish nothing and leave no row; a
// repair that leaves the balance as it was (only the opening's provenance)
// announces nothing, as a page does not for an unchanged key. The
// publisher drains only on a kick (RunOnKick), so each message shows the
// handler kicked it after the commit.
func TestHandlers_RepairPublishesChangedPositions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, setup, find string
		kind              recon.ActionKind
		acct, instr       string
		// repaired and corrupted are the key's published values after the
		// apply and after its rollback; unchanged: neither is published.
		repaired, corrupted [2]string
		unchanged           bool
	}{
		{"rederive_position", `UPDATE positions SET quantity = 999, avg_cost = 1 WHERE scope = 's' AND account = 'A'`, "account=A",
			recon.ActionRederivePosition, "A", "ACME", [2]string{"", ""}, [2]string{"999", "1"}, false},
		// A dropped row is announced as no position: 0 at 0.
		{"drop_position", phantom, "instrument=BOLT",
			recon.ActionDropPosition, "A", "BOLT", [2]string{"0", "0"}, [2]string{"5", "10"}, false},
		{"adopt_source_opening: provenance only", `UPDATE positions SET opening_proven = false, opening_seq = NULL WHERE scope = 's' AND account = 'A'`, "account=A",
			recon.ActionAdoptSourceOpening, "A", "ACME", [2]string{}, [2]string{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFx(t, ledger, 4)
			good := f.position(t, tc.acct, tc.instr)
			f.exec(t, tc.setup)
			if tc.repaired[0] == "" {
				tc.repaired = [2]string{good["quantity"], good["avg_cost"]}
			}
			nc := testenv.NATSConn(t)
			ch := subscribe(t, nc)
			pub := notify.New(f.st.Pool(), nc, "")
			f.st.SetAfterCommit(pub.Kick)
			ctx, cancel := context.WithCancel(ctxb)
			done := make(chan struct{})
			go func() { defer close(done); pub.RunOnKick(ctx, func(err error) { t.Errorf("publish: %v", err) }) }()
			t.Cleanup(func() { cancel(); <-done })
			// The page notifications of the fixture are not the repair's.
			if _, err := pub.Flush(ctxb); err != nil {
				t.Fatal(err)
			}
			// Delivered asynchronously: drained until none comes for a while.
			for quiet := false; !quiet; {
				select {
				case <-ch:
				case <-time.After(300 * time.Millisecond):
					quiet = true
				}
			}
			a := actionOf(t, f.plan(t), tc.kind, tc.find)
			hd := f.h.Registry()[a.Kind]
			run := withRun(ctxb, "run-1")

			// A dry run's row is rolled back with it, and nothing is kicked.
			dry := *f.h
			dry.DryRun = true
			if err := dry.Registry()[a.Kind].Apply(withRun(ctxb, "rehearsal"), a); err != nil {
				t.Fatalf("dry run: %v", err)
			}
			none(t, ch, pub, "a dry run")

			if tc.unchanged {
				if err := hd.Apply(run, a); err != nil {
					t.Fatal(err)
				}
				if err := hd.Revert(recon.WithRollback(run), a); err != nil {
					t.Fatal(err)
				}
				none(t, ch, pub, "a repair that changed no balance")
				if n := repairRows(t, f); n != 0 {
					t.Fatalf("a repair that changed no balance wrote %d notifications", n)
				}
				return
			}
			// The repair's transaction fails at COMMIT, after its outbox row.
			f.exec(t, `CREATE FUNCTION refuse_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'commit refused'; END $$`)
			f.exec(t, `CREATE CONSTRAINT TRIGGER refuse_commit AFTER INSERT ON projection_catchup_outbox
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_commit()`)
			if err := hd.Apply(run, a); err == nil || !strings.Contains(err.Error(), "commit refused") {
				t.Fatalf("apply failing at COMMIT: %v", err)
			}
			none(t, ch, pub, "a failed commit")
			if n := repairRows(t, f); n != 0 {
				t.Fatalf("a failed commit left %d repair notifications", n)
			}
			f.exec(t, `DROP TRIGGER refuse_commit ON projection_catchup_outbox`)

			if err := hd.Apply(run, a); err != nil {
				t.Fatal(err)
			}
			applied := next(t, ch, "the apply")
			wantNote(t, applied, tc.acct, tc.instr, tc.repaired)
			if err := hd.Apply(run, a); err != nil { // already applied: no write, no message
				t.Fatal(err)
			}
			none(t, ch, pub, "a repeated apply")

			if err := hd.Revert(recon.WithRollback(run), a); err != nil {
				t.Fatal(err)
			}
			reverted := next(t, ch, "the rollback")
			wantNote(t, reverted, tc.acct, tc.instr, tc.corrupted)
			if applied.id == reverted.id {
				t.Fatalf("apply and rollback share msg id %s", applied.id)
			}
			// The kicked drain marks its batch sent after NATS has it; a
			// drain of our own waits for its lock, then finds nothing left.
			if n, err := pub.Flush(ctxb); err != nil || n != 0 {
				t.Fatalf("a drain after the kicks sent %d: %v", n, err)
			}
			var unsent int
			if err := f.admin.QueryRow(ctxb, `SELECT count(*) FROM projection_catchup_outbox WHERE sent_at IS NULL`).Scan(&unsent); err != nil || unsent != 0 {
				t.Fatalf("unsent rows after the kicks: %d %v", unsent, err)
			}
		})
	}
}

// wantNote: a repair's notification of the key with value q@avg, under its
// row's msg id.
func wantNote(t *testing.T, r received, acct, instr string, v [2]string) {
	t.Helper()
	n := r.n
	if !strings.HasPrefix(r.id, store.RepairMsgIDPrefix) || r.id != n.MsgID || n.Scope != "s" || n.Account != acct || n.Instrument != instr ||
		!decimal.RequireFromString(n.Quantity).Equal(decimal.RequireFromString(v[0])) ||
		!decimal.RequireFromString(n.AvgCost).Equal(decimal.RequireFromString(v[1])) {
		t.Fatalf("notification %s %+v, want %s/%s %s@%s under a %s msg id", r.id, n, acct, instr, v[0], v[1], store.RepairMsgIDPrefix)
	}
}

func repairRows(t *testing.T, f fx) int {
	t.Helper()
	var n int
	if err := f.admin.QueryRow(ctxb, `SELECT count(*) FROM projection_catchup_outbox WHERE starts_with(msg_id, $1)`, store.RepairMsgIDPrefix).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
