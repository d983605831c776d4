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
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// The fixture's snapshot reader is faithful: a database the recovery worker
// wrote plans nothing (else every other test would plan from a misread).
func TestHandlers_CleanScopePlansNothing(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	if p := f.plan(t); len(p.Actions) != 0 || len(p.Manual) != 0 {
		t.Fatalf("a clean scope planned:\n%s", recon.FormatPlan(p))
	}
}

// rederive_position: a corrupted balance (and a stale basis) is re-derived to
// the planner's After, the basis is rebased through the cursor, the next page
// touching the key succeeds and every position equals the independent
// replay; a row moved after the plan is refused; revert is exact.
func TestHandlers_RederivePosition(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	good := f.position(t, "A", "ACME") // row and basis
	f.setup(t, `UPDATE positions SET quantity = 999, avg_cost = 1 WHERE scope = 's' AND account = 'A'`,
		`UPDATE projection_catchup_basis SET quantity = 7 WHERE scope = 's' AND account = 'A'`)
	f.blocks(t, "")
	contract{
		withdraws: true, // a position row: the fold of its key's whole history
		move:      `UPDATE positions SET quantity = 998 WHERE scope = 's' AND account = 'A'`,
		unmove:    `UPDATE positions SET quantity = 999 WHERE scope = 's' AND account = 'A'`,
		check:     f.positionIs(t, "A", "ACME", good),
	}.run(t, f, actionOf(t, f.plan(t), recon.ActionRederivePosition, "account=A"))
	f.repaired(t)
}

// adopt_source_opening: a row whose opening lost its provenance (and its
// basis) adopts the source opening; the next page succeeds and equals the
// replay.
func TestHandlers_AdoptSourceOpening(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	good := f.position(t, "A", "ACME")
	f.setup(t, `UPDATE positions SET opening_proven = false, opening_seq = NULL WHERE scope = 's' AND account = 'A'`,
		`DELETE FROM projection_catchup_basis WHERE scope = 's' AND account = 'A'`)
	f.blocks(t, "")
	contract{
		withdraws: true, // a position row: the fold of its key's whole history
		move:      `UPDATE positions SET opening_quantity = 11 WHERE scope = 's' AND account = 'A'`,
		unmove:    `UPDATE positions SET opening_quantity = 10 WHERE scope = 's' AND account = 'A'`,
		check:     f.positionIs(t, "A", "ACME", good),
	}.run(t, f, actionOf(t, f.plan(t), recon.ActionAdoptSourceOpening, "account=A"))
	f.repaired(t)
}

// rederive_position of a deleted row (Before: row=absent, the basis kept):
// the apply inserts the derived row; the exact revert deletes it again
// (projection_reconciliation's DELETE) and leaves the basis as Before had it.
func TestHandlers_RederiveDeletedPosition(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	good := f.position(t, "B", "ACME")
	f.exec(t, `DELETE FROM positions WHERE scope = 's' AND account = 'B'`)
	a := actionOf(t, f.plan(t), recon.ActionRederivePosition, "account=B")
	if a.Before["row"] != "absent" {
		t.Fatalf("Before of a deleted row: %v", a.Before)
	}
	contract{
		withdraws: true, // a position row: the fold of its key's whole history
		move:      `INSERT INTO positions (scope, account, instrument, opening_proven, quantity, avg_cost) VALUES ('s', 'B', 'ACME', true, 1, 1)`,
		unmove:    `DELETE FROM positions WHERE scope = 's' AND account = 'B'`,
		check:     f.positionIs(t, "B", "ACME", good),
	}.run(t, f, a)
	f.repaired(t)
}

// phantom is a balance nothing explains on a key of a known account (numeric
// scale 5.00 and a fixed updated_at on purpose: the exact revert through
// projection_position_quarantine must keep both).
const phantom = `INSERT INTO positions (scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, quantity, avg_cost, updated_at)
VALUES ('s', 'A', 'BOLT', 0, 0, true, 5.00, 10.0, '2026-02-01 00:00:00.123456+00')`

// drop_position: the phantom blocks the page that makes the scope CURRENT
// (UNEXPLAINED_BALANCE); the planner's action moves it (and its basis, when
// it has one) into projection_position_quarantine; the revert re-inserts it
// byte for byte, updated_at and numeric scale included (the dump here is
// exact); after the drop the final page succeeds and equals the replay.
func TestHandlers_DropPosition(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	f.exec(t, phantom)
	f.blocks(t, codes.UnexplainedBalance)
	contract{
		withdraws: true, // a position row: the fold of its key's whole history
		exact:     true,
		move:      `UPDATE positions SET quantity = 6 WHERE scope = 's' AND instrument = 'BOLT'`,
		unmove:    `UPDATE positions SET quantity = 5.00 WHERE scope = 's' AND instrument = 'BOLT'`,
		check:     f.positionIs(t, "A", "BOLT", nil),
	}.run(t, f, actionOf(t, f.plan(t), recon.ActionDropPosition, "instrument=BOLT"))
	f.repaired(t)
}

// A phantom with a basis row: both move to the quarantine and back exactly.
// A different copy quarantined earlier is never overwritten (no role may
// UPDATE the quarantine): refused, nothing written.
func TestHandlers_DropPositionWithBasis(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	f.exec(t, phantom)
	f.exec(t, `INSERT INTO projection_catchup_basis (scope, account, instrument, basis_seq, quantity, avg_cost) VALUES ('s', 'A', 'BOLT', 4, 5.00, 10.0)`)
	a := actionOf(t, f.plan(t), recon.ActionDropPosition, "instrument=BOLT")
	if a.Before["basis_seq"] != "4" {
		t.Fatalf("Before carries no basis: %v", a.Before)
	}
	f.exec(t, `INSERT INTO projection_position_quarantine (scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, quantity, avg_cost, updated_at)
VALUES ('s', 'A', 'BOLT', 0, 0, true, 9, 9, now())`)
	f.refuses(t, a, ErrRecordMoved) // another quarantined copy
	f.exec(t, `DELETE FROM projection_position_quarantine`)
	contract{exact: true, withdraws: true, check: f.positionIs(t, "A", "BOLT", nil)}.run(t, f, a)
}
