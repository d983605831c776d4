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

// forged is a trade the consensus never emitted, at a seq the next page
// verifies, between A and B (numeric scale 1.50 kept on purpose: the
// quarantine round trip must keep it).
const forged = `INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts)
VALUES ('s', 'forged', 99, 5, 'ACME', 1.50, 1, 'x', 'y', 'A', 'B', '2026-03-01 09:30:05.5+00')`

// quarantine_trade: the orphan blocks the next page (ORPHAN_TRADE); the
// planner's action moves it to projection_trade_quarantine column for
// column and back exactly; after it, the next page succeeds and every
// position equals the replay of the source.
func TestHandlers_QuarantineTrade(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	f.exec(t, forged)
	f.blocks(t, codes.OrphanTrade)
	before := f.trade(t, "trades", "forged")
	gone, quarantined := f.tradeIs(t, "trades", "forged", nil), f.tradeIs(t, tradeQuarantine, "forged", before)
	contract{
		exact:  true, // the forged trade is at seq 5, after the cursor (4): no withdrawal
		move:   `UPDATE trades SET quantity = 2 WHERE scope = 's' AND trade_id = 'forged'`,
		unmove: `UPDATE trades SET quantity = 1 WHERE scope = 's' AND trade_id = 'forged'`,
		check:  func() { gone(); quarantined() },
	}.run(t, f, actionOf(t, f.plan(t), recon.ActionQuarantineTrade, "trade_id=forged"))
	f.repaired(t)
}

// The quarantine is evidence, written once: a different copy of the trade
// quarantined earlier is never overwritten (no role may UPDATE it); the
// apply refuses and writes nothing. An identical copy completes the move.
func TestHandlers_QuarantineTradeKeepsAnEarlierCopy(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	f.exec(t, forged)
	a := actionOf(t, f.plan(t), recon.ActionQuarantineTrade, "trade_id=forged")
	f.exec(t, `INSERT INTO projection_trade_quarantine SELECT scope, trade_id, trade_seq, seq, instrument, 7, quantity, buy_order_id,
    sell_order_id, buy_account, sell_account, ts, booking_status, written_by FROM trades WHERE trade_id = 'forged'`)
	f.refuses(t, a, ErrRecordMoved) // another quarantined copy
	f.exec(t, `UPDATE projection_trade_quarantine SET price = 1.50 WHERE trade_id = 'forged'`)
	if err := f.h.Registry()[a.Kind].Apply(ctxb, a); err != nil {
		t.Fatalf("an identical quarantined copy: %v", err)
	}
	f.tradeIs(t, "trades", "forged", nil)()
}

// restore_trade: a verified trade deleted after verification is inserted as
// the planner's After (the source trade's SQL representation); a row written
// meanwhile under its id is never overwritten; revert deletes exactly what
// was inserted (projection_reconciliation's DELETE). The next page touching
// its keys succeeds and equals the replay: the trade is inside every basis
// of its keys already, so no basis changes.
func TestHandlers_RestoreTrade(t *testing.T) {
	t.Parallel()
	f := newFx(t, ledger, 4)
	f.exec(t, `DELETE FROM trades WHERE scope = 's' AND trade_id = 't1'`)
	a := actionOf(t, f.plan(t), recon.ActionRestoreTrade, "trade_id=t1")
	if a.Before != nil {
		t.Fatalf("restore of an absent row has Before %v", a.Before)
	}
	contract{
		exact:     true,
		withdraws: true, // t1 is at seq 3, verified through 4
		move: `INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts)
VALUES ('s', 't1', 1, 3, 'ACME', 100, 6, 'b-t1', 's-t1', 'A', 'B', '2026-03-01 09:30:03.123456+00')`,
		unmove: `DELETE FROM trades WHERE scope = 's' AND trade_id = 't1'`,
		check:  f.tradeIs(t, "trades", "t1", a.After),
	}.run(t, f, a)
	if p := f.plan(t); len(p.Actions) != 0 || len(p.Manual) != 0 {
		t.Fatalf("after the restore the scope still plans:\n%s", recon.FormatPlan(p))
	}
	f.repaired(t)
}
