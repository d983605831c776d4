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

	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
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
	good := f.position(t, "A", "ACME")
	f.exec(t, `UPDATE positions SET quantity = 999, avg_cost = 1 WHERE scope = 's' AND account = 'A'`)
	f.exec(t, `UPDATE projection_catchup_basis SET quantity = 7 WHERE scope = 's' AND account = 'A'`)
	if err := f.nextPage(t, 4); err == nil {
		t.Fatal("the next page accepted a corrupted balance")
	}
	a := actionOf(t, f.plan(t), recon.ActionRederivePosition, "account=A")
	contract{
		move:   `UPDATE positions SET quantity = 998 WHERE scope = 's' AND account = 'A'`,
		unmove: `UPDATE positions SET quantity = 999 WHERE scope = 's' AND account = 'A'`,
		check: func() {
			if got := f.position(t, "A", "ACME"); !got.Equal(good) {
				t.Fatalf("after apply %v, want %v (row and basis)", got, good)
			}
		},
	}.run(t, f, a)
	if err := f.nextPage(t, 4); err != nil {
		t.Fatalf("next page after the repair: %v", err)
	}
	storetest.AssertPositions(t, f.admin, "s", ledger)
}

// adopt_source_opening: a row whose opening lost its provenance (and its
// basis) adopts the source opening; the next page succeeds and equals the
// replay.
func TestHandlers_AdoptSourceOpening(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	good := f.position(t, "A", "ACME")
	f.exec(t, `UPDATE positions SET opening_proven = false, opening_seq = NULL WHERE scope = 's' AND account = 'A'`)
	f.exec(t, `DELETE FROM projection_catchup_basis WHERE scope = 's' AND account = 'A'`)
	if err := f.nextPage(t, 4); err == nil {
		t.Fatal("the next page accepted an unproven opening")
	}
	a := actionOf(t, f.plan(t), recon.ActionAdoptSourceOpening, "account=A")
	contract{
		move:   `UPDATE positions SET opening_quantity = 11 WHERE scope = 's' AND account = 'A'`,
		unmove: `UPDATE positions SET opening_quantity = 10 WHERE scope = 's' AND account = 'A'`,
		check: func() {
			if got := f.position(t, "A", "ACME"); !got.Equal(good) {
				t.Fatalf("after apply %v, want %v", got, good)
			}
		},
	}.run(t, f, a)
	if err := f.nextPage(t, 4); err != nil {
		t.Fatalf("next page after the repair: %v", err)
	}
	storetest.AssertPositions(t, f.admin, "s", ledger)
}
