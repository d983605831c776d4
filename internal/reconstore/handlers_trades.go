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
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// tradeFields reads one row of table (trades or its quarantine mirror) in
// recon's tradeRowFields spelling; nil when absent.
func tradeFields(ctx context.Context, tx pgx.Tx, table, scope, id string) (recon.Fields, error) {
	var t *store.TradeRow
	var err error
	if table == tradeQuarantine {
		t, err = store.ScanTradeRow(tx.QueryRow(ctx, `SELECT `+store.TradeRowColumns+`
  FROM projection_trade_quarantine WHERE scope = $1 AND trade_id = $2`, scope, id))
	} else {
		t, err = store.TradeGet(ctx, tx, scope, id)
	}
	if err != nil {
		return nil, fmt.Errorf("reconstore: read %s %s: %w", table, id, err)
	}
	if t == nil {
		return nil, nil
	}
	return recon.Fields{"trade_id": id, "trade_seq": fmt.Sprint(t.TradeSeq), "seq": fieldSeq(t.Seq), "instrument": t.Instrument,
		"price": t.Price.String(), "quantity": t.Quantity.String(), "buy_order_id": t.BuyOrderID, "sell_order_id": t.SellOrderID,
		"buy_account": t.BuyAccount, "sell_account": t.SellAccount, "ts": fieldTS(t.TS), "booking_status": t.BookingStatus, "written_by": t.WrittenBy}, nil
}

const tradeQuarantine = "projection_trade_quarantine"

// tradeRow reads the trades row of id in the handler's transaction.
func tradeRow(scope, id string) func(context.Context, pgx.Tx) (recon.Fields, error) {
	return func(ctx context.Context, tx pgx.Tx) (recon.Fields, error) {
		return tradeFields(ctx, tx, "trades", scope, id)
	}
}

// quarantineTrade moves the trades row equal to Before into
// projection_trade_quarantine, column for column. Bases are left as they
// are, on purpose: a basis is the fold of the VERIFIED source through its
// seq, which a row the consensus never emitted is not part of (a page that
// saw it in its window would have refused it), so removing it leaves every
// basis exact; the keys' rows are re-derived by a following plan
// (rederive_position), which rebases them.
func (h *Handlers) quarantineTrade(ctx context.Context, a recon.Action) error {
	scope, id := a.Target["scope"], a.Target["trade_id"]
	var quarantined recon.Fields // the quarantine's copy, read when trades has none
	return h.compareAndWrite(ctx, a, transition{
		read: func(ctx context.Context, tx pgx.Tx) (recon.Fields, error) {
			quarantined = nil
			cur, err := tradeFields(ctx, tx, "trades", scope, id)
			if err != nil || cur != nil {
				return cur, err
			}
			quarantined, err = tradeFields(ctx, tx, tradeQuarantine, scope, id)
			return nil, err
		},
		done: func(cur recon.Fields) bool { return cur == nil && quarantined.Equal(a.Before) }, // quarantined already
		from: is(a.Before), want: "Before",
		write: func(ctx context.Context, tx pgx.Tx) error {
			// The quarantined copy is written once and never updated (no role
			// has UPDATE on the quarantine tables: it is the evidence of what
			// was moved out). A copy there already (the trade was quarantined,
			// then written again by another writer) is kept when it holds
			// Before's values, and refuses otherwise: a human compares the two
			// copies.
			ct, err := tx.Exec(ctx, `INSERT INTO projection_trade_quarantine (`+store.TradeColumns+`)
SELECT `+store.TradeColumns+` FROM trades WHERE scope = $1 AND trade_id = $2
ON CONFLICT (scope, trade_id) DO NOTHING`, scope, id)
			if err != nil {
				return fmt.Errorf("reconstore: quarantine trade %s: %w", id, err)
			}
			if ct.RowsAffected() == 0 {
				q, err := tradeFields(ctx, tx, tradeQuarantine, scope, id)
				if err != nil {
					return err
				}
				if !q.Equal(a.Before) {
					return fmt.Errorf("%w: %s: another copy of trade %s is quarantined already (%v); a human compares the two", ErrRecordMoved, a.ID, id, q)
				}
			}
			if err := store.TradeDelete(ctx, tx, scope, id); err != nil {
				return fmt.Errorf("reconstore: remove quarantined trade %s: %w", id, err)
			}
			return nil
		},
	})
}

// unquarantineTrade moves the row back exactly as it was quarantined.
func (h *Handlers) unquarantineTrade(ctx context.Context, a recon.Action) error {
	scope, id := a.Target["scope"], a.Target["trade_id"]
	seq, err := seqArg(a.Before["seq"])
	if err != nil {
		return err
	}
	var quarantined recon.Fields
	return h.compareAndWrite(ctx, a, transition{
		revert: true, reinstated: []*int64{seq},
		read: func(ctx context.Context, tx pgx.Tx) (recon.Fields, error) {
			cur, err := tradeFields(ctx, tx, "trades", scope, id)
			if err != nil {
				return nil, err
			}
			quarantined, err = tradeFields(ctx, tx, tradeQuarantine, scope, id)
			return cur, err
		},
		// Never quarantined, or back already.
		done: func(cur recon.Fields) bool { return cur.Equal(a.Before) && quarantined == nil },
		from: func(cur recon.Fields) bool { return cur == nil && quarantined.Equal(a.Before) },
		want: "quarantined Before",
		write: func(ctx context.Context, tx pgx.Tx) error {
			if err := store.TradeRestoreFromQuarantine(ctx, tx, scope, id); err != nil {
				return fmt.Errorf("reconstore: unquarantine trade %s: %w", id, err)
			}
			if _, err := tx.Exec(ctx, `DELETE FROM projection_trade_quarantine WHERE scope = $1 AND trade_id = $2`, scope, id); err != nil {
				return fmt.Errorf("reconstore: unquarantine trade %s: %w", id, err)
			}
			return nil
		},
	})
}

// restoreTrade inserts the verified source trade (After, its SQL
// representation) the SQL side lost. Bases stay: the trade is part of the
// verified fold through its seq (<= the cursor) already, so every basis of
// its keys includes it; removing or restoring the row changes no fold.
func (h *Handlers) restoreTrade(ctx context.Context, a recon.Action) error {
	scope, id := a.Target["scope"], a.Target["trade_id"]
	return h.compareAndWrite(ctx, a, transition{
		read: tradeRow(scope, id), done: is(a.After), from: is(a.Before), want: "Before",
		write: func(ctx context.Context, tx pgx.Tx) error {
			f := a.After
			seq, ts, err := seqTSArgs(f)
			if err != nil {
				return err
			}
			err = store.TradeInsert(ctx, tx, scope, id, store.TradeValues{TradeSeq: f["trade_seq"], Seq: seq, Instrument: f["instrument"],
				Price: f["price"], Quantity: f["quantity"], BuyOrderID: f["buy_order_id"], SellOrderID: f["sell_order_id"],
				BuyAccount: f["buy_account"], SellAccount: f["sell_account"], TS: ts, BookingStatus: f["booking_status"], WrittenBy: f["written_by"]})
			if err != nil {
				return fmt.Errorf("reconstore: restore trade %s: %w", id, err)
			}
			return nil
		},
	})
}

// unrestoreTrade deletes the restored row if it still equals After.
//
// A source trade inside the verified window is then missing again: the
// certificate is withdrawn, and the re-verification inserts it back
// (FR-APR06 inserts missing trades), which a human who rolled the repair
// back should expect.
func (h *Handlers) unrestoreTrade(ctx context.Context, a recon.Action) error {
	scope, id := a.Target["scope"], a.Target["trade_id"]
	seq, err := seqArg(a.After["seq"])
	if err != nil {
		return err
	}
	return h.compareAndWrite(ctx, a, transition{
		revert: true, reinstated: []*int64{seq},
		read: tradeRow(scope, id), done: is(a.Before), from: is(a.After), want: "After",
		write: func(ctx context.Context, tx pgx.Tx) error {
			if err := store.TradeDelete(ctx, tx, scope, id); err != nil {
				return fmt.Errorf("reconstore: delete restored trade %s: %w", id, err)
			}
			return nil
		},
	})
}
