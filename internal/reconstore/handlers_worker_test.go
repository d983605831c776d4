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
	"errors"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/notify"
	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// deadHolder: the lease's holder died mid-work ten minutes ago (expired by
// the database clock, never renewed since, the cursor stuck CATCHING_UP).
const deadHolder = `UPDATE projection_catchup_lease SET owner = 'dead', expires_at = now() - interval '10 minutes',
    renewed_at = now() - interval '11 minutes' WHERE scope = 's'`
const stuckCursor = `UPDATE projection_catchup_cursor SET state = 'CATCHING_UP', updated_at = now() - interval '12 minutes' WHERE scope = 's'`

func (f fx) lease(t *testing.T) (owner string, fence int64) {
	t.Helper()
	if err := f.admin.QueryRow(ctxb, `SELECT owner, fence FROM projection_catchup_lease WHERE scope = 's'`).Scan(&owner, &fence); err != nil {
		t.Fatal(err)
	}
	return owner, fence
}

// release_lease: the planner's action clears the dead holder's owner, keeps
// the fence and expiry (never deletes the row), is irreversible, and the
// next owner's acquisition then increments the fence (FR-APR08).
func TestHandlers_ReleaseLease(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	f.setup(t, deadHolder, stuckCursor)
	_, fence := f.lease(t)
	a := actionOf(t, f.plan(t), recon.ActionReleaseLease, "scope=s")
	contract{
		exact:  true,
		move:   `UPDATE projection_catchup_lease SET renewed_at = renewed_at + interval '1 second' WHERE scope = 's'`,
		unmove: `UPDATE projection_catchup_lease SET renewed_at = renewed_at - interval '1 second' WHERE scope = 's'`,
		check: func() {
			if o, fc := f.lease(t); o != "" || fc != fence {
				t.Fatalf("released lease: owner %q fence %d, want \"\" and %d", o, fc, fence)
			}
		},
	}.run(t, f, a)
	l, err := f.rec.AcquireLease(ctxb, "s", "next", time.Minute)
	if err != nil || l.Fence != fence+1 {
		t.Fatalf("next owner: fence %d err %v, want fence %d", l.Fence, err, fence+1)
	}
}

// A lease the planner believed expired (its clock, or a snapshot read
// before a renewal) that is unexpired by the DATABASE clock is never
// released: its holder's page may still be running. Refused, nothing written.
func TestHandlers_ReleaseLeaseRefusedWhileUnexpired(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	f.setup(t, `UPDATE projection_catchup_lease SET owner = 'slow', expires_at = now() + interval '30 minutes',
    renewed_at = now() - interval '11 minutes' WHERE scope = 's'`, stuckCursor)
	// The planner's clock runs an hour ahead of the database.
	p := planOf(t, readSnapshot(t, f.admin, "s", f.src, time.Now().Add(time.Hour)))
	f.refuses(t, actionOf(t, p, recon.ActionReleaseLease, "scope=s"), ErrRecordMoved)
}

// trigger_cycle: the planner's action for a stuck cursor calls the
// controller's hook with the scope and writes nothing to SQL; its revert is
// a no-op; a dry run does not call the hook; a hook failure is the apply's.
func TestHandlers_TriggerCycle(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	f.exec(t, stuckCursor)
	a := actionOf(t, f.plan(t), recon.ActionTriggerCycle, "scope=s")
	var asked []string
	var hookErr error
	f.h.TriggerCycle = func(_ context.Context, scope string) error {
		asked = append(asked, scope)
		return hookErr
	}
	hd := f.h.Registry()[a.Kind]
	snap := f.dump(t, true)
	for _, step := range []func(context.Context, recon.Action) error{hd.Apply, hd.Apply, hd.Revert} {
		if err := step(ctxb, a); err != nil {
			t.Fatal(err)
		}
	}
	if len(asked) != 2 || asked[0] != "s" || asked[1] != "s" {
		t.Fatalf("hook calls %v, want [s s] (two applies, the revert asks nothing)", asked)
	}
	if f.dump(t, true) != snap {
		t.Fatal("trigger_cycle wrote to SQL")
	}
	dry := *f.h
	dry.DryRun = true
	if err := dry.Registry()[a.Kind].Apply(ctxb, a); err != nil || len(asked) != 2 {
		t.Fatalf("dry run: err %v, hook calls %v", err, asked)
	}
	hookErr = errors.New("controller unreachable")
	if err := hd.Apply(ctxb, a); !errors.Is(err, hookErr) {
		t.Fatalf("a failing hook: %v", err)
	}
	noHook := *f.h
	noHook.TriggerCycle = nil
	if err := noHook.Registry()[a.Kind].Apply(ctxb, a); err == nil {
		t.Fatal("trigger_cycle without a hook succeeded")
	}
}

// overdue: the outbox row of A is ten minutes old and unsent while the
// publisher drains others (B's was sent just now), so the planner
// republishes it (a publisher that drains nothing is refused instead).
const overdue = `UPDATE projection_catchup_outbox SET created_at = now() - interval '10 minutes' WHERE account = 'A'`
const drained = `UPDATE projection_catchup_outbox SET sent_at = now() WHERE account = 'B'`

// republish: the planner's action publishes the row with its own msg id and
// stamps sent_at; re-applying publishes nothing more; a row whose identity
// changed is refused; a failed publish stamps nothing; irreversible.
func TestHandlers_Republish(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	f.setup(t, overdue, drained)
	a := actionOf(t, f.plan(t), recon.ActionRepublish, a0MsgID(t, f))
	var sent []notify.Notification
	var pubErr error
	f.h.Publish = func(_ context.Context, o notify.Notification) error {
		if pubErr != nil {
			return pubErr
		}
		sent = append(sent, o)
		return nil
	}
	pubErr = errors.New("nats down")
	f.refuses(t, a, pubErr) // a failed publish stamps nothing
	pubErr = nil
	contract{
		exact:  true,
		move:   `UPDATE projection_catchup_outbox SET msg_id = msg_id || '-moved' WHERE account = 'A'`,
		unmove: `UPDATE projection_catchup_outbox SET msg_id = left(msg_id, -6) WHERE account = 'A'`,
		check: func() {
			var unsent int
			if err := f.admin.QueryRow(ctxb, `SELECT count(*) FROM projection_catchup_outbox WHERE sent_at IS NULL`).Scan(&unsent); err != nil || unsent != 0 {
				t.Fatalf("unsent rows after republish: %d %v", unsent, err)
			}
		},
	}.run(t, f, a)
	if len(sent) != 1 || sent[0].MsgID != a.Before["msg_id"] {
		t.Fatalf("published %+v, want exactly the row with msg id %s", sent, a.Before["msg_id"])
	}
}

func a0MsgID(t *testing.T, f fx) string {
	t.Helper()
	var id string
	if err := f.admin.QueryRow(ctxb, `SELECT msg_id FROM projection_catchup_outbox WHERE account = 'A'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// collapse: an unsent copy of A's notification (same key and cursor seq,
// another msg id) is deleted while the kept row (the oldest) stays; a copy
// sent meanwhile or a kept row that is gone refuses; irreversible.
func TestHandlers_Collapse(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	f.exec(t, `INSERT INTO projection_catchup_outbox (msg_id, scope, account, instrument, quantity, avg_cost, cursor_seq, created_at)
SELECT msg_id || '-copy', scope, account, instrument, quantity, avg_cost, cursor_seq, created_at FROM projection_catchup_outbox WHERE account = 'A'`)
	a := actionOf(t, f.plan(t), recon.ActionCollapse, "-copy")
	keptID := a.After["collapse_into_id"]

	// The kept row is gone: the copy is the only one left and stays.
	f.exec(t, `CREATE TEMP TABLE kept AS SELECT * FROM projection_catchup_outbox WHERE id = $1::bigint`, keptID)
	f.exec(t, `DELETE FROM projection_catchup_outbox WHERE id = $1::bigint`, keptID)
	f.refuses(t, a, ErrRecordMoved)
	f.exec(t, `INSERT INTO projection_catchup_outbox OVERRIDING SYSTEM VALUE SELECT * FROM kept`)

	contract{
		exact:  true,
		move:   `UPDATE projection_catchup_outbox SET sent_at = now() WHERE msg_id LIKE '%-copy'`,
		unmove: `UPDATE projection_catchup_outbox SET sent_at = NULL WHERE msg_id LIKE '%-copy'`,
		check: func() {
			var copies, kept int
			if err := f.admin.QueryRow(ctxb, `SELECT count(*) FILTER (WHERE msg_id LIKE '%-copy'), count(*) FILTER (WHERE id = $1::bigint)
  FROM projection_catchup_outbox`, keptID).Scan(&copies, &kept); err != nil || copies != 0 || kept != 1 {
				t.Fatalf("after collapse: copies %d kept %d (%v)", copies, kept, err)
			}
		},
	}.run(t, f, a)
}
