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

package store

import (
	"context"
)

// write persists the page: missing trades, order versions, positions, basis,
// outbox. Set-based: one statement per table.
func (w *pageTx) write(ctx context.Context) error {
	// A plain INSERT of the page trades not yet retained (one primary-key
	// probe each, fenced by OFFSET 0 like checkTrades so it never becomes a
	// hash of the whole table) instead of ON CONFLICT DO NOTHING: no
	// speculative insertion per row. Under the projection write lock no other writer can add one
	// meanwhile; if one appeared anyway the primary key fails the page and it
	// rolls back, it never double-writes.
	ct, err := w.tx.Exec(ctx, `
INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id,
                    buy_account, sell_account, ts, booking_status, written_by)
SELECT $1, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id,
       buy_account, sell_account, ts, 'BOOKED', 'recovery'
  FROM page_trades p
  LEFT JOIN LATERAL (SELECT true AS found FROM trades t WHERE t.scope = $1 AND t.trade_id = p.trade_id OFFSET 0) x ON true
 WHERE x.found IS NULL`, w.scope)
	if err != nil {
		return dbErr("store: insert missing trades", err)
	}
	w.inserted = ct.RowsAffected()
	// Order versions: exactly the missing ones, found by checkOrders in this
	// transaction under the projection write lock (no other writer can add
	// one meanwhile), so a direct COPY is safe; a concurrent insert would
	// fail the COPY on the primary key and roll the page back, never corrupt it.
	n, err := w.copyOrderEvents(ctx)
	if err != nil {
		return dbErr("store: insert order events", err)
	}
	w.orderEvents = n
	// The current order row only moves forward: a newer version already
	// written by the live feed is never rewound to the page's older one. The
	// window's versions are all in order_events now (retained and verified, or
	// just inserted).
	if _, err := w.tx.Exec(ctx, `
INSERT INTO orders AS o (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts)
SELECT DISTINCT ON (order_id) scope, order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts
  FROM order_events WHERE scope = $1 AND seq > $2 AND seq <= $3
 ORDER BY order_id, version DESC
ON CONFLICT (scope, order_id) DO UPDATE SET
    version = EXCLUDED.version, seq = EXCLUDED.seq, account = EXCLUDED.account, instrument = EXCLUDED.instrument,
    side = EXCLUDED.side, price = EXCLUDED.price, quantity = EXCLUDED.quantity, remaining = EXCLUDED.remaining,
    status = EXCLUDED.status, ts = EXCLUDED.ts
WHERE o.version < EXCLUDED.version`, w.scope, w.p.after, w.p.through); err != nil {
		return dbErr("store: upsert orders", err)
	}

	if err := w.copyPagePositions(ctx); err != nil {
		return dbErr("store: copy positions", err)
	}
	if _, err := w.tx.Exec(ctx, `
INSERT INTO positions AS p (scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq, quantity, avg_cost, updated_at)
SELECT $1, account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq, quantity, avg_cost, clock_timestamp()
  FROM page_positions
ON CONFLICT (scope, account, instrument) DO UPDATE SET
    opening_quantity = EXCLUDED.opening_quantity, opening_avg_cost = EXCLUDED.opening_avg_cost,
    opening_proven = EXCLUDED.opening_proven, opening_seq = EXCLUDED.opening_seq,
    quantity = EXCLUDED.quantity, avg_cost = EXCLUDED.avg_cost, updated_at = EXCLUDED.updated_at
WHERE (p.quantity, p.avg_cost, p.opening_quantity, p.opening_avg_cost, p.opening_proven, p.opening_seq)
      IS DISTINCT FROM (EXCLUDED.quantity, EXCLUDED.avg_cost, EXCLUDED.opening_quantity, EXCLUDED.opening_avg_cost,
                        EXCLUDED.opening_proven, EXCLUDED.opening_seq)`, w.scope); err != nil {
		return dbErr("store: upsert positions", err)
	}
	if _, err := w.tx.Exec(ctx, `
INSERT INTO projection_catchup_basis AS b (scope, account, instrument, basis_seq, quantity, avg_cost)
SELECT $1, account, instrument, $2, basis_quantity, basis_avg_cost FROM page_positions
ON CONFLICT (scope, account, instrument) DO UPDATE SET
    basis_seq = EXCLUDED.basis_seq, quantity = EXCLUDED.quantity, avg_cost = EXCLUDED.avg_cost`, w.scope, w.p.through); err != nil {
		return dbErr("store: upsert basis", err)
	}
	// R2: one outbox row per key whose final position differs from its
	// pre-page value; published after commit by internal/notify.
	if _, err := w.tx.Exec(ctx, `
INSERT INTO projection_catchup_outbox (msg_id, scope, account, instrument, quantity, avg_cost, cursor_seq)
SELECT `+msgIDSQL+`, $1, account, instrument, quantity, avg_cost, $2 FROM page_positions WHERE changed
ON CONFLICT (msg_id) DO NOTHING`, w.scope, w.p.through); err != nil {
		return dbErr("store: outbox", err)
	}
	return nil
}

// msgIDSQL is the notification idempotency key (Nats-Msg-Id):
// position/<scope>/<account>/<instrument>/<cursor seq>/<qty>@<avg>, names
// length-prefixed so that a '/' inside one cannot collide. The value is part
// of the key: after a cursor reset (FR-APR07) a page may end at the same seq
// with a different position, and that notification must not be mistaken for
// the one already sent.
const msgIDSQL = `'position/' || length($1::text) || ':' || $1::text || '/' || length(account) || ':' || account || '/' ||
       length(instrument) || ':' || instrument || '/' || $2::bigint || '/' || trim_scale(quantity)::text || '@' || trim_scale(avg_cost)::text`
