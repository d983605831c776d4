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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var ctxb = context.Background()

type fx struct {
	admin *pgxpool.Pool
	st    *store.Store // connected as projection_recovery
	run   store.Run
	l     store.Lease
	h     *Handlers
}

// newFx: a database as production has it, a selected run, the handlers
// connected as the recovery role (proving its grants), and the ledger's
// pages applied through the cursor.
func newFx(t *testing.T, evs []wire.Event, through int64) fx {
	t.Helper()
	db := recoverydb.New(t)
	f := fx{admin: pgtest.Pool(t, db.Admin), st: store.New(pgtest.Pool(t, db.Recovery))}
	if _, err := f.admin.Exec(ctxb, `INSERT INTO projection_runs (scope, epoch, managed, selected, phase, descriptor_hash, protocol_version)
VALUES ('s', 1, true, true, 'ACTIVE', $1, 1)`, storetest.Descriptor); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.run, err = f.st.SelectedRun(ctxb, "s"); err != nil {
		t.Fatal(err)
	}
	if f.l, err = f.st.AcquireLease(ctxb, "s", "recon", time.Minute); err != nil {
		t.Fatal(err)
	}
	f.h = &Handlers{Store: f.st, Lease: func(context.Context, string) (store.Lease, error) { return f.l, nil }}
	f.page(t, storetest.NewLedger(t, through, prefix(evs, through)...), 0)
	return f
}

func prefix(evs []wire.Event, through int64) []wire.Event {
	var out []wire.Event
	for _, e := range evs {
		if e.Seq() <= through {
			out = append(out, e)
		}
	}
	return out
}

func (f fx) page(t *testing.T, src *storetest.Ledger, after int64) {
	t.Helper()
	if _, err := f.st.ApplyPage(ctxb, f.l, f.run, src.Page(after, 1000)); err != nil {
		t.Fatalf("page after %d: %v", after, err)
	}
}

func (f fx) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := f.admin.Exec(ctxb, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// dump is every row of every table a handler may touch, full rows.
func (f fx) dump(t *testing.T) string {
	t.Helper()
	var out string
	for _, tbl := range []string{"trades", "orders", "order_events", "positions", "projection_catchup_basis", "projection_trade_quarantine", "projection_position_quarantine", "projection_catchup_lease"} {
		var v string
		from := pgx.Identifier{tbl}.Sanitize()
		if tbl == "positions" {
			// updated_at is a clock field (recon.ClockFields): a revert of a
			// position restores every value of Before and restamps it.
			from = `(SELECT scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq, quantity, avg_cost FROM positions)`
		}
		if err := f.admin.QueryRow(ctxb, `SELECT coalesce(string_agg(x::text, '|' ORDER BY x::text), '') FROM `+from+` x`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		out += tbl + ": " + v + "\n"
	}
	return out
}

func (f fx) position(t *testing.T, acct, instr string) recon.Fields {
	t.Helper()
	var out recon.Fields
	if err := pgx.BeginFunc(ctxb, f.admin, func(tx pgx.Tx) (err error) {
		out, err = positionFields(ctxb, tx, "s", acct, instr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

var ledger = []wire.Event{
	storetest.Opening(1, "A", "ACME", "10", "90"),
	storetest.Trade(2, 1, "t1", "ACME", "100", "5", "A", "B"),
	storetest.Trade(3, 2, "t2", "ACME", "110", "3", "B", "A"),
	storetest.Trade(4, 3, "t3", "ACME", "120", "2", "A", "B"),
}

// checkApplyRevert runs the handler contract on one action: apply → the
// dump changes; re-apply → no-op; revert → the exact Before dump; a second
// revert → no-op.
func checkApplyRevert(t *testing.T, f fx, a recon.Action, check func()) {
	t.Helper()
	hd := f.h.Registry()[a.Kind]
	before := f.dump(t)
	if err := hd.Apply(ctxb, a); err != nil {
		t.Fatalf("apply: %v", err)
	}
	applied := f.dump(t)
	if applied == before {
		t.Fatal("apply wrote nothing")
	}
	check()
	if err := hd.Apply(ctxb, a); err != nil {
		t.Fatalf("re-apply: %v", err)
	}
	if got := f.dump(t); got != applied {
		t.Fatalf("re-apply wrote:\n%s\nwant\n%s", got, applied)
	}
	if err := hd.Revert(ctxb, a); err != nil {
		t.Fatalf("revert: %v", err)
	}
	if got := f.dump(t); got != before {
		t.Fatalf("revert is not exact:\n%s\nwant\n%s", got, before)
	}
	if err := hd.Revert(ctxb, a); err != nil {
		t.Fatalf("second revert: %v", err)
	}
}

// rederive_position: a corrupted balance is re-derived to After, the basis is
// rebased through the cursor, the next page touching the key succeeds and
// every position equals the independent replay; revert is exact; a row that
// moved after the dry run is refused with nothing written.
func TestHandlers_RederivePosition(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 3)
	good := f.position(t, "A", "ACME")
	f.exec(t, `UPDATE positions SET quantity = 999, avg_cost = 1 WHERE scope = 's' AND account = 'A'`)
	f.exec(t, `UPDATE projection_catchup_basis SET quantity = 7 WHERE scope = 's' AND account = 'A'`) // a stale basis too
	bad := f.position(t, "A", "ACME")
	a := recon.Action{ID: "rederive_position:A", Kind: recon.ActionRederivePosition, Reversible: true,
		Target: recon.Fields{"scope": "s", "table": recon.TablePositions, "account": "A", "instrument": "ACME"},
		Before: bad, After: rowPart(good)}

	moved := a
	moved.Before = good // the dry run saw another row
	snap := f.dump(t)
	if err := f.h.Registry()[a.Kind].Apply(ctxb, moved); !errors.Is(err, ErrRecordMoved) {
		t.Fatalf("moved row: want ErrRecordMoved, got %v", err)
	}
	if f.dump(t) != snap {
		t.Fatal("a refused apply wrote")
	}
	checkApplyRevert(t, f, a, func() {
		if got := f.position(t, "A", "ACME"); !got.Equal(good) {
			t.Fatalf("after apply %v, want %v (row and basis)", got, good)
		}
	})
	if err := f.h.Registry()[a.Kind].Apply(ctxb, a); err != nil {
		t.Fatal(err)
	}
	f.page(t, storetest.NewLedger(t, 4, ledger...), 3)
	storetest.AssertPositions(t, f.admin, "s", ledger)
}

// adopt_source_opening: a row whose opening lost its provenance adopts the
// source opening; the next page succeeds and equals the replay.
func TestHandlers_AdoptSourceOpening(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 3)
	good := f.position(t, "A", "ACME")
	f.exec(t, `UPDATE positions SET opening_proven = false, opening_seq = NULL WHERE scope = 's' AND account = 'A'`)
	f.exec(t, `DELETE FROM projection_catchup_basis WHERE scope = 's' AND account = 'A'`)
	bad := f.position(t, "A", "ACME")
	a := recon.Action{ID: "adopt_source_opening:A", Kind: recon.ActionAdoptSourceOpening, Reversible: true,
		Target: recon.Fields{"scope": "s", "table": recon.TablePositions, "account": "A", "instrument": "ACME"},
		Before: bad, After: rowPart(good)}
	checkApplyRevert(t, f, a, func() {
		if got := f.position(t, "A", "ACME"); !got.Equal(good) {
			t.Fatalf("after apply %v, want %v", got, good)
		}
	})
	if err := f.h.Registry()[a.Kind].Apply(ctxb, a); err != nil {
		t.Fatal(err)
	}
	f.page(t, storetest.NewLedger(t, 4, ledger...), 3)
	storetest.AssertPositions(t, f.admin, "s", ledger)
}

// quarantine_trade: an orphan trade (never emitted by the consensus) moves to
// the quarantine table and back exactly; the next page succeeds and equals
// the replay of the source.
func TestHandlers_QuarantineTrade(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 3)
	f.exec(t, `INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts)
VALUES ('s', 'forged', 99, 3, 'ACME', 1.50, 1, 'x', 'y', 'C', 'D', '2026-03-01 09:30:03.5+00')`)
	var before recon.Fields
	if err := pgx.BeginFunc(ctxb, f.admin, func(tx pgx.Tx) (err error) {
		before, err = tradeFields(ctxb, tx, "trades", "s", "forged")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	a := recon.Action{ID: "quarantine_trade:forged", Kind: recon.ActionQuarantineTrade, Reversible: true,
		Target: recon.Fields{"scope": "s", "table": recon.TableTrades, "trade_id": "forged"},
		Before: before, After: recon.Fields{"location": "quarantine"}}
	checkApplyRevert(t, f, a, func() {})
	if err := f.h.Registry()[a.Kind].Apply(ctxb, a); err != nil {
		t.Fatal(err)
	}
	f.page(t, storetest.NewLedger(t, 4, ledger...), 3)
	storetest.AssertPositions(t, f.admin, "s", ledger)
}
