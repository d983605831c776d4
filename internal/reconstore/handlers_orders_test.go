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
)

// Orders carry no position key: an order repair changes no basis, and the
// next page verifies the repaired rows against the source.

// rewrite_order_version on order_events: a version whose values a writer
// changed is rewritten to the source event's SQL representation (After);
// revert writes Before back. Before carries every column of the row; its
// numbers are canonical decimals, so the dump is exact for rows written with
// canonical scale (this one) and exact in value otherwise.
func TestHandlers_RewriteOrderEvent(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	f.exec(t, `UPDATE order_events SET price = 101 WHERE scope = 's' AND order_id = 'o1' AND version = 1`)
	a := actionOf(t, f.plan(t), recon.ActionRewriteOrderVersion, "order_events/")
	contract{
		withdraws: true, // o1's versions are at seq 2 and 3, verified through 4
		exact:     true,
		move:      `UPDATE order_events SET remaining = 4 WHERE scope = 's' AND order_id = 'o1' AND version = 1`,
		unmove:    `UPDATE order_events SET remaining = 5 WHERE scope = 's' AND order_id = 'o1' AND version = 1`,
		check:     f.orderIs(t, recon.TableOrderEvents, "o1", "1", a.After),
	}.run(t, f, a)
	f.repaired(t)
}

// rewrite_order_version on a rewound orders row (the current row holds
// version 1 while version 2 is verified): the row becomes version 2; a
// newer version written meanwhile (version 3 of a live write) is never
// replaced by the plan's older one; revert writes Before back.
func TestHandlers_RewriteRewoundOrder(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	v2 := f.order(t, recon.TableOrders, "o1", "")
	f.exec(t, `UPDATE orders o SET version = e.version, seq = e.seq, remaining = e.remaining, status = e.status, ts = e.ts
  FROM order_events e WHERE o.scope = 's' AND o.order_id = 'o1' AND e.scope = 's' AND e.order_id = 'o1' AND e.version = 1`)
	a := actionOf(t, f.plan(t), recon.ActionRewriteOrderVersion, ":orders/")
	if !a.After.Equal(v2) {
		t.Fatalf("the plan's After %v is not version 2 %v", a.After, v2)
	}
	contract{
		withdraws: true, // o1's versions are at seq 2 and 3, verified through 4
		exact:     true,
		move:      `UPDATE orders SET version = 3, seq = 7, remaining = 1, status = 'PARTIALLY_FILLED' WHERE scope = 's' AND order_id = 'o1'`,
		unmove:    `UPDATE orders SET version = 1, seq = 2, remaining = 5, status = 'NEW' WHERE scope = 's' AND order_id = 'o1'`,
		check:     f.orderIs(t, recon.TableOrders, "o1", "", v2),
	}.run(t, f, a)
	f.repaired(t)
}

// Never rewound, whatever the action says: an action whose After is an
// older version than the row it replaces (a plan no detector makes: edited,
// or built from another history) is refused and writes nothing.
func TestHandlers_RewriteOrderNeverRewinds(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	v2 := f.order(t, recon.TableOrders, "o1", "")
	v1 := f.order(t, recon.TableOrderEvents, "o1", "1")
	a := recon.Action{ID: "rewrite_order_version:orders/order_id=o1", Kind: recon.ActionRewriteOrderVersion, Reversible: true,
		Target: recon.Fields{"scope": "s", "table": recon.TableOrders, "order_id": "o1"}, Before: v2, After: v1}
	f.refuses(t, a, ErrRewind)
}

// rewrite_order_version of a deleted current row: Before is absent, the
// apply inserts After, and the exact revert deletes it again (DELETE on
// orders: projection_reconciliation).
func TestHandlers_RewriteDeletedOrder(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	f.exec(t, `DELETE FROM orders WHERE scope = 's' AND order_id = 'o1'`)
	a := actionOf(t, f.plan(t), recon.ActionRewriteOrderVersion, ":orders/")
	if a.Before != nil {
		t.Fatalf("Before of a deleted row: %v", a.Before)
	}
	contract{
		withdraws: true, // o1's versions are at seq 2 and 3, verified through 4
		exact:     true,
		move: `INSERT INTO orders (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts)
VALUES ('s', 'o1', 3, 7, 'A', 'ACME', 'BUY', 100, 5, 0, 'FILLED', now())`,
		unmove: `DELETE FROM orders WHERE scope = 's' AND order_id = 'o1'`,
		check:  f.orderIs(t, recon.TableOrders, "o1", "", a.After),
	}.run(t, f, a)
	f.repaired(t)
}
