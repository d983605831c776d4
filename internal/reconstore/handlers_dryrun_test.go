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

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/notify"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// dryRun runs every action of p through a dry-run copy of h (each in a
// transaction that is rolled back) and returns each action's error. Hooks
// must not be called.
func dryRun(t *testing.T, h *Handlers, p *recon.Plan) map[string]error {
	t.Helper()
	d := *h
	d.DryRun = true
	d.TriggerCycle = func(context.Context, string) error { t.Error("a dry run asked for a cycle"); return nil }
	d.Publish = func(context.Context, notify.Notification) error { t.Error("a dry run published"); return nil }
	reg := d.Registry()
	out := map[string]error{}
	for _, a := range p.Actions {
		out[a.ID] = reg[a.Kind].Apply(withRun(ctxb, "rehearsal"), a)
	}
	return out
}

// The dry run executes every handler's statements under the same locks and
// fence as the apply and rolls them back: each scenario's whole plan dry-runs
// without error and the database is byte for byte unchanged; the same plan
// then applies for real. Every action kind with a handler is covered.
func TestHandlers_DryRunWritesNothing(t *testing.T) {
	t.Parallel()
	scenarios := []struct {
		name  string
		setup []string
		kinds []recon.ActionKind
	}{
		{"trades orders outbox cycle phantom", []string{forged, phantom, stuckCursor, overdue, drained,
			`UPDATE order_events SET price = 101 WHERE scope = 's' AND order_id = 'o1' AND version = 1`,
			`INSERT INTO projection_catchup_outbox (msg_id, scope, account, instrument, quantity, avg_cost, cursor_seq, created_at)
SELECT msg_id || '-copy', scope, account, instrument, quantity, avg_cost, cursor_seq, created_at FROM projection_catchup_outbox WHERE account = 'A'`},
			[]recon.ActionKind{recon.ActionQuarantineTrade, recon.ActionDropPosition, recon.ActionTriggerCycle, recon.ActionRepublish,
				recon.ActionRewriteOrderVersion, recon.ActionCollapse}},
		{"positions", []string{
			`UPDATE positions SET quantity = 999 WHERE scope = 's' AND account = 'B'`,
			`UPDATE positions SET opening_proven = false, opening_seq = NULL WHERE scope = 's' AND account = 'A'`,
			`DELETE FROM projection_catchup_basis WHERE scope = 's' AND account = 'A'`},
			[]recon.ActionKind{recon.ActionRederivePosition, recon.ActionAdoptSourceOpening}},
		{"restore", []string{`DELETE FROM trades WHERE scope = 's' AND trade_id = 't1'`},
			[]recon.ActionKind{recon.ActionRestoreTrade}},
		{"dead holder", []string{deadHolder, stuckCursor}, []recon.ActionKind{recon.ActionReleaseLease}},
	}
	covered := map[recon.ActionKind]bool{}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			f := newFx(t, ledger, 4)
			f.setup(t, sc.setup...)
			p := f.plan(t)
			kinds := map[recon.ActionKind]bool{}
			for _, a := range p.Actions {
				kinds[a.Kind] = true
			}
			for _, k := range sc.kinds {
				if !kinds[k] {
					t.Fatalf("the plan has no %s action:\n%s", k, recon.FormatPlan(p))
				}
				covered[k] = true
			}
			snap := f.dump(t, true)
			for id, err := range dryRun(t, f.h, p) {
				if err != nil {
					t.Errorf("dry run of %s: %v", id, err)
				}
			}
			if got := f.dump(t, true); got != snap {
				t.Fatalf("the dry run wrote:\n%s\nwant\n%s", got, snap)
			}
			// Nothing was consumed: the plan applies for real.
			f.h.TriggerCycle = func(context.Context, string) error { return nil }
			f.h.Publish = func(context.Context, notify.Notification) error { return nil }
			for _, a := range p.Actions {
				if err := f.h.Registry()[a.Kind].Apply(withRun(ctxb, "apply"), a); err != nil {
					t.Fatalf("apply %s after its dry run: %v", a.ID, err)
				}
			}
			if sc.name != "dead holder" {
				f.repaired(t)
			}
		})
	}
	for _, s := range recon.ActionSpecs {
		if !covered[s.Kind] {
			t.Errorf("no dry-run scenario plans %s", s.Kind)
		}
	}
}

// A plan that would fail is known before approval: the dry run reports the
// failing handler (and only it) with the error the apply would meet, and
// writes nothing. Three failures: a record moved since the plan, a role
// without the grant (projection_recovery has no DELETE on trades nor any
// grant on the quarantine: the statement itself ran and PostgreSQL refused
// it), and a lost lease.
func TestHandlers_DryRunReportsFailingHandler(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	f.setup(t, forged, `UPDATE order_events SET price = 101 WHERE scope = 's' AND order_id = 'o1' AND version = 1`,
		phantom, overdue, drained)
	p := f.plan(t)
	quarantine := actionOf(t, p, recon.ActionQuarantineTrade, "forged").ID
	republish := actionOf(t, p, recon.ActionRepublish, "")
	rewrite := actionOf(t, p, recon.ActionRewriteOrderVersion, "order_events/").ID
	drop := actionOf(t, p, recon.ActionDropPosition, "BOLT").ID
	snap := f.dump(t, true)

	// Moved since the plan.
	f.exec(t, `UPDATE order_events SET remaining = 4 WHERE scope = 's' AND order_id = 'o1' AND version = 1`)
	moved := f.dump(t, true)
	errs := dryRun(t, f.h, p)
	if !errors.Is(errs[rewrite], ErrRecordMoved) || errs[quarantine] != nil || errs[drop] != nil {
		t.Fatalf("moved record: %v", errs)
	}
	if f.dump(t, true) != moved {
		t.Fatal("a dry run wrote")
	}
	f.exec(t, `UPDATE order_events SET remaining = 5 WHERE scope = 's' AND order_id = 'o1' AND version = 1`)

	// The runtime role instead of the reconciliation role.
	asRecovery := *f.h
	asRecovery.Store = f.rec
	errs = dryRun(t, &asRecovery, p)
	var pgErr *pgconn.PgError
	if !errors.As(errs[quarantine], &pgErr) || pgErr.Code != "42501" || errs[rewrite] != nil {
		t.Fatalf("as projection_recovery: %v", errs)
	}
	if !errors.As(errs[drop], &pgErr) || pgErr.Code != "42501" {
		t.Fatalf("drop as projection_recovery: %v", errs[drop])
	}

	// No publisher configured: the apply would fail, so the dry run does.
	noPub := *f.h
	noPub.DryRun, noPub.Publish = true, nil
	if err := noPub.Registry()[republish.Kind].Apply(ctxb, republish); err == nil {
		t.Fatal("the dry run of republish without a publisher succeeded")
	}

	// The lease was taken over.
	stale := *f.h
	stale.Lease = func(context.Context, string) (store.Lease, error) { l := f.l; l.Fence--; return l, nil }
	for id, err := range dryRun(t, &stale, p) {
		if codes.Of(err) != codes.LeaseLost {
			t.Errorf("%s under a replaced fence: %v", id, err)
		}
	}
	if got := f.dump(t, true); got != snap {
		t.Fatalf("the dry runs wrote:\n%s\nwant\n%s", got, snap)
	}
}
