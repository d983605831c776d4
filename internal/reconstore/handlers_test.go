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
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

type fx struct {
	admin *pgxpool.Pool
	rec   *store.Store // projection_recovery: the recovery worker's pages
	st    *store.Store // projection_reconciliation: the handlers (proves its grants suffice)
	run   store.Run
	l     store.Lease
	h     *Handlers
	evs   []wire.Event      // the whole source
	src   *storetest.Ledger // evs, boundary = the last seq
}

// newFx: a database as production has it, a selected run, the recovery
// worker's pages of evs applied through `through` (as projection_recovery),
// and the handlers connected as projection_reconciliation under the same
// lease. The source the planner reads is all of evs.
func newFx(t *testing.T, evs []wire.Event, through int64) fx {
	t.Helper()
	db := recoverydb.New(t)
	f := fx{admin: pgtest.Pool(t, db.Admin), rec: store.New(pgtest.Pool(t, db.Recovery)),
		st: store.New(pgtest.Pool(t, db.Reconciliation)), evs: evs}
	var last int64
	for _, e := range evs {
		last = max(last, e.Seq())
	}
	f.src = storetest.NewLedger(t, last, evs...)
	f.exec(t, `INSERT INTO projection_runs (scope, epoch, managed, selected, phase, descriptor_hash, protocol_version)
VALUES ('s', 1, true, true, 'ACTIVE', $1, 1)`, storetest.Descriptor)
	var err error
	if f.run, err = f.rec.SelectedRun(ctxb, "s"); err != nil {
		t.Fatal(err)
	}
	if f.l, err = f.rec.AcquireLease(ctxb, "s", "recon", time.Minute); err != nil {
		t.Fatal(err)
	}
	f.h = &Handlers{Store: f.st, Lease: func(context.Context, string) (store.Lease, error) { return f.l, nil }}
	if through > 0 {
		if _, err := f.rec.ApplyPage(ctxb, f.l, f.run, storetest.NewLedger(t, through, prefix(evs, through)...).Page(0, 1000)); err != nil {
			t.Fatalf("page through %d: %v", through, err)
		}
	}
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

// nextPage applies the source's page after `after` as the recovery worker.
func (f fx) nextPage(t *testing.T, after int64) error {
	t.Helper()
	_, err := f.rec.ApplyPage(ctxb, f.l, f.run, f.src.Page(after, 1000))
	return err
}

// plan is the real planner's plan of the database as it is now.
func (f fx) plan(t *testing.T) *recon.Plan {
	t.Helper()
	return planOf(t, readSnapshot(t, f.admin, "s", f.src, time.Now()))
}

func (f fx) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := f.admin.Exec(ctxb, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// dumpTables is every table a handler may touch.
var dumpTables = []string{"trades", "orders", "order_events", "positions", "projection_catchup_basis", "projection_catchup_cursor",
	"projection_catchup_lease", "projection_catchup_outbox", "projection_trade_quarantine", "projection_position_quarantine"}

// dump is every row of every table a handler may touch, full rows as
// PostgreSQL renders them (numeric scale included), sorted. exact=false
// leaves out positions.updated_at: Before (recon's positionBefore) does not
// carry it, so a revert that writes a position from Before restores every
// value it carries and stamps updated_at anew. The numeric scale is in
// every dump: a column a repair leaves unchanged keeps its bytes (keepScale),
// and one it changes comes back as Before's canonical decimal, which is the
// stored spelling of every value these tests corrupt.
func (f fx) dump(t *testing.T, exact bool) string {
	t.Helper()
	var out string
	for _, tbl := range dumpTables {
		var v string
		from := pgx.Identifier{tbl}.Sanitize()
		if tbl == "positions" && !exact {
			from = `(SELECT scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq, quantity, avg_cost FROM positions)`
		}
		if err := f.admin.QueryRow(ctxb, `SELECT coalesce(string_agg(x::text, '|' ORDER BY x::text), '') FROM `+from+` x`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		out += tbl + ": " + v + "\n"
	}
	return out
}

// read reads one record with a handler's reader, as the admin.
func (f fx) read(t *testing.T, fn func(tx pgx.Tx) (recon.Fields, error)) recon.Fields {
	t.Helper()
	var out recon.Fields
	if err := pgx.BeginFunc(ctxb, f.admin, func(tx pgx.Tx) (err error) {
		out, err = fn(tx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func (f fx) position(t *testing.T, acct, instr string) recon.Fields {
	t.Helper()
	return f.read(t, func(tx pgx.Tx) (recon.Fields, error) { return positionFields(ctxb, tx, "s", acct, instr) })
}

func (f fx) trade(t *testing.T, table, id string) recon.Fields {
	t.Helper()
	return f.read(t, func(tx pgx.Tx) (recon.Fields, error) { return tradeFields(ctxb, tx, table, "s", id) })
}

func (f fx) order(t *testing.T, table, id, version string) recon.Fields {
	t.Helper()
	return f.read(t, func(tx pgx.Tx) (recon.Fields, error) {
		return orderFields(ctxb, tx, orderRef{table: table, scope: "s", id: id, version: version})
	})
}

// setup plants drift: each statement as the admin, in order.
func (f fx) setup(t *testing.T, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		f.exec(t, q)
	}
}

// blocks: the next page (after seq 4) refuses the planted drift, with code
// when one is named ("": any refusal).
func (f fx) blocks(t *testing.T, code codes.Code) {
	t.Helper()
	if err := f.nextPage(t, 4); err == nil || (code != "" && codes.Of(err) != code) {
		t.Fatalf("next page over the drift: want a refusal %q, got %v", code, err)
	}
}

// repaired: the next page from the cursor (after seq 4, or from genesis
// when a revert withdrew the certificate: then every retained row is
// re-verified) succeeds, makes the scope CURRENT, and every position
// equals the independent replay of the ledger.
func (f fx) repaired(t *testing.T) {
	t.Helper()
	cur, err := f.rec.ReadCursor(ctxb, "s")
	if err != nil {
		t.Fatal(err)
	}
	pr, err := f.rec.ApplyPage(ctxb, f.l, f.run, f.src.Page(cur.VerifiedThroughSeq, 1000))
	if err != nil || !pr.Current() {
		t.Fatalf("next page after the repair (from %d): %v %+v", cur.VerifiedThroughSeq, err, pr)
	}
	storetest.AssertPositions(t, f.admin, "s", ledger)
}

// refuses: the apply of a fails with want (errors.Is) and writes nothing.
func (f fx) refuses(t *testing.T, a recon.Action, want error) {
	t.Helper()
	snap := f.dump(t, true)
	if err := f.h.Registry()[a.Kind].Apply(withRun(ctxb, "refused"), a); !errors.Is(err, want) {
		t.Fatalf("apply %s: want %v, got %v", a.ID, want, err)
	}
	if got := f.dump(t, true); got != snap {
		t.Fatalf("a refused apply of %s wrote:\n%s\nwant\n%s", a.ID, got, snap)
	}
}

// holds is a contract check: the record read returns equals want (nil:
// absent).
func holds(t *testing.T, read func() recon.Fields, want recon.Fields) func() {
	return func() {
		t.Helper()
		if got := read(); !got.Equal(want) {
			t.Fatalf("after apply %v, want %v", got, want)
		}
	}
}

func (f fx) positionIs(t *testing.T, acct, instr string, want recon.Fields) func() {
	return holds(t, func() recon.Fields { return f.position(t, acct, instr) }, want)
}

func (f fx) tradeIs(t *testing.T, table, id string, want recon.Fields) func() {
	return holds(t, func() recon.Fields { return f.trade(t, table, id) }, want)
}

func (f fx) orderIs(t *testing.T, table, id, version string, want recon.Fields) func() {
	return holds(t, func() recon.Fields { return f.order(t, table, id, version) }, want)
}

// contract is the handler contract of one action, checked on real rows:
//
//   - move (optional): another writer moves the record after the dry run;
//     Apply refuses with ErrRecordMoved and writes nothing; unmove puts it back;
//   - Apply writes (the dump changes) and then check() holds (row == After);
//   - a second Apply is a no-op;
//   - Revert (reversible kinds) restores the dump before Apply (exact: full
//     rows; see dump for the one column Before does not carry), and a second
//     Revert is a no-op; an irreversible kind cannot revert;
//   - withdraws: the revert puts the record back inside the window the
//     cursor verified, so it also moves the cursor back to genesis
//     (store.WithdrawTx); otherwise the cursor too is as before Apply.
//
// It leaves the action applied.
type contract struct {
	exact        bool
	move, unmove string
	check        func()
	withdraws    bool
}

// withoutCertificate drops the lines of the cursor and the bases (its
// folds) from a dump.
func withoutCertificate(dump string) string {
	var out []string
	for _, line := range strings.SplitAfter(dump, "\n") {
		if !strings.HasPrefix(line, "projection_catchup_cursor: ") && !strings.HasPrefix(line, "projection_catchup_basis: ") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// withoutRepairNotes drops the repairs' notifications (store.NotifyRepairTx)
// from a dump's outbox line: a revert announces the balance it puts back
// rather than unsaying the apply's announcement, which consumers have.
func withoutRepairNotes(dump string) string {
	var out []string
	for _, line := range strings.SplitAfter(dump, "\n") {
		if rows, ok := strings.CutPrefix(line, "projection_catchup_outbox: "); ok {
			var keep []string
			for _, r := range strings.Split(strings.TrimSuffix(rows, "\n"), "|") {
				if !strings.Contains(r, ","+store.RepairMsgIDPrefix) {
					keep = append(keep, r)
				}
			}
			line = "projection_catchup_outbox: " + strings.Join(keep, "|") + "\n"
		}
		out = append(out, line)
	}
	return strings.Join(out, "")
}

// reverted: the dump after a revert is before's (the repairs'
// notifications aside); when c.withdraws the cursor is back at genesis
// without bases, else it and the bases are exactly before's.
func (c contract) reverted(t *testing.T, f fx, verified int64, before string) {
	t.Helper()
	got, before := withoutRepairNotes(f.dump(t, c.exact)), withoutRepairNotes(before)
	if withoutCertificate(got) != withoutCertificate(before) {
		t.Fatalf("revert is not exact:\n%s\nwant\n%s", got, before)
	}
	cur, err := f.rec.ReadCursor(ctxb, "s")
	if err != nil {
		t.Fatal(err)
	}
	var bases int
	if err := f.admin.QueryRow(ctxb, `SELECT count(*) FROM projection_catchup_basis WHERE scope = 's'`).Scan(&bases); err != nil {
		t.Fatal(err)
	}
	switch {
	case c.withdraws && (cur.VerifiedThroughSeq != 0 || cur.State != store.StateCatchingUp || bases != 0):
		t.Fatalf("the revert put the record back inside the verified window (through %d) but left the cursor %+v and %d bases", verified, cur, bases)
	case !c.withdraws && got != before:
		t.Fatalf("a revert outside the verified window changed the cursor:\n%s\nwant\n%s", got, before)
	}
}

func (c contract) run(t *testing.T, f fx, a recon.Action) {
	t.Helper()
	hd := f.h.Registry()[a.Kind]
	// The runs of production: an apply and its automatic revert, a second
	// apply an approver rolls back, a third apply.
	run1, run2, run3 := withRun(ctxb, "run-1"), withRun(ctxb, "run-2"), withRun(ctxb, "run-3")
	before := f.dump(t, c.exact)
	if c.move != "" {
		f.exec(t, c.move)
		f.refuses(t, a, ErrRecordMoved)
		f.exec(t, c.unmove)
		if got := f.dump(t, c.exact); got != before {
			t.Fatalf("unmove did not restore the state:\n%s\nwant\n%s", got, before)
		}
	}
	if err := hd.Apply(run1, a); err != nil {
		t.Fatalf("apply: %v", err)
	}
	applied := f.dump(t, true)
	if f.dump(t, c.exact) == before {
		t.Fatal("apply wrote nothing")
	}
	if c.check != nil {
		c.check()
	}
	if err := hd.Apply(run1, a); err != nil {
		t.Fatalf("re-apply: %v", err)
	}
	if got := f.dump(t, true); got != applied {
		t.Fatalf("re-apply wrote:\n%s\nwant\n%s", got, applied)
	}
	if !a.Reversible {
		if r, ok := hd.(recon.Reverter); !ok || r.CanRevert() {
			t.Fatalf("%s is irreversible but its handler can revert", a.Kind)
		}
		if err := hd.Revert(run1, a); !errors.Is(err, recon.ErrNoRevert) {
			t.Fatalf("revert of an irreversible action: %v", err)
		}
		if got := f.dump(t, true); got != applied {
			t.Fatal("a refused revert wrote")
		}
		return
	}
	verified, err := f.rec.ReadCursor(ctxb, "s")
	if err != nil {
		t.Fatal(err)
	}
	// A failed apply's automatic rollback (no recon.IsRollback) never
	// withdraws: that run ends where it began.
	if err := hd.Revert(run1, a); err != nil {
		t.Fatalf("automatic revert: %v", err)
	}
	contract{exact: c.exact}.reverted(t, f, verified.VerifiedThroughSeq, before)
	if err := hd.Apply(run2, a); err != nil {
		t.Fatalf("apply after the automatic revert: %v", err)
	}
	// An approver's rollback.
	rollback := recon.WithRollback(run2)
	if err := hd.Revert(rollback, a); err != nil {
		t.Fatalf("revert: %v", err)
	}
	c.reverted(t, f, verified.VerifiedThroughSeq, before)
	reverted := f.dump(t, true)
	if err := hd.Revert(rollback, a); err != nil {
		t.Fatalf("second revert: %v", err)
	}
	if got := f.dump(t, true); got != reverted {
		t.Fatalf("second revert wrote:\n%s\nwant\n%s", got, reverted)
	}
	if err := hd.Apply(run3, a); err != nil {
		t.Fatalf("apply after revert: %v", err)
	}
}

// ledger: an opening, orders and trades of two accounts on ACME.
var ledger = []wire.Event{
	storetest.Opening(1, "A", "ACME", "10", "90"),
	storetest.Order(2, "o1", 1, "A", "ACME", wire.SideBuy, "100", "5", "5", wire.StatusNew),
	storetest.Trade(3, 1, "t1", "ACME", "100", "5", "A", "B"),
	storetest.Order(3, "o1", 2, "A", "ACME", wire.SideBuy, "100", "5", "0", wire.StatusFilled),
	storetest.Trade(4, 2, "t2", "ACME", "110", "3", "B", "A"),
	storetest.Trade(5, 3, "t3", "ACME", "120", "2", "A", "B"),
	storetest.Order(6, "o2", 1, "B", "ACME", wire.SideSell, "130", "4", "4", wire.StatusNew),
}

// The decision every reversible handler shares (transition.next): the goal
// is tested before the starting state, so a repeated apply or revert is a
// no-op, and a record in neither state is refused with ErrRecordMoved.
func TestHandlers_TransitionDecision(t *testing.T) {
	t.Parallel()
	before, after := recon.Fields{"q": "1"}, recon.Fields{"q": "2"}
	moved := recon.Fields{"q": "3"}
	a := recon.Action{ID: "x", Before: before, After: after}
	apply := transition{done: is(after), from: is(before), want: "Before"}
	revert := transition{done: is(before), from: is(after), want: "After"}
	create := transition{done: is(after), from: is(nil), want: "absent"}
	for _, tc := range []struct {
		name      string
		t         transition
		cur       recon.Fields
		write     bool
		wantMoved bool
	}{
		{"apply from Before writes", apply, before, true, false},
		{"apply at After is a no-op", apply, after, false, false},
		{"apply over a moved record refuses", apply, moved, false, true},
		{"apply over an absent record refuses", apply, nil, false, true},
		{"revert from After writes", revert, after, true, false},
		{"revert at Before is a no-op", revert, before, false, false},
		{"revert over a moved record refuses", revert, moved, false, true},
		{"create from absent writes", create, nil, true, false},
		{"create over a present record refuses", create, moved, false, true},
		{"the goal wins when a record is both", transition{done: is(before), from: is(before)}, before, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			write, err := tc.t.next(a, tc.cur)
			if write != tc.write || errors.Is(err, ErrRecordMoved) != tc.wantMoved || (err != nil && !tc.wantMoved) {
				t.Fatalf("next(%v) = %v, %v; want write %v, moved %v", tc.cur, write, err, tc.write, tc.wantMoved)
			}
		})
	}
}
