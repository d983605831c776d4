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

// write persists the page: missing trades, order versions, current order
// rows, positions, basis, outbox. Set-based: one statement per table (two for
// orders: a COPY of the new rows, an upsert of the older ones), none per row.
// The COPY streams were encoded beside derive (encodeWrites).
func (w *pageTx) write(ctx context.Context, ws *writeStreams) error {
	ws.wait()
	// The page trades not yet retained (checkTrades probed every one of
	// them by primary key in this transaction), COPYed straight into trades.
	// Under the projection write lock of their keys no other writer can add
	// one meanwhile; if one appeared anyway the primary key fails the COPY
	// and the page rolls back, it never double-writes.
	n, err := ws.trades.send(ctx, w.tx, copyTradesSQL)
	if err != nil {
		return w.copyErr("store: insert missing trades", err)
	}
	w.inserted = n
	// Order versions: exactly the missing ones, found by checkOrders in this
	// transaction under the projection write lock (no other writer can add
	// one meanwhile), so a direct COPY is safe; a concurrent insert would
	// fail the COPY on the primary key and roll the page back, never corrupt it.
	if n, err = ws.orderEvents.send(ctx, w.tx, copyOrderEventsSQL); err != nil {
		return w.copyErr("store: insert order events", err)
	}
	w.orderEvents = n
	if err := w.writeOrders(ctx, ws); err != nil {
		return err
	}
	if err := w.copyPagePositions(ctx); err != nil {
		return dbErr("store: copy positions", err)
	}
	if _, err := w.tx.Exec(ctx, positionsUpsertPageSQL, w.scope); err != nil {
		return dbErr("store: upsert positions", err)
	}
	if err := basisUpsertPage(ctx, w.tx, w.scope, w.p.through); err != nil {
		return dbErr("store: upsert basis", err)
	}
	// R2: one outbox row per key whose final position differs from its
	// pre-page value; published after commit by internal/notify.
	if err := outboxInsertPage(ctx, w.tx, w.scope, w.p.through); err != nil {
		return dbErr("store: outbox", err)
	}
	return nil
}

// writeOrders moves each page order's current row to the latest version the
// slice holds, only ever forward: a newer version the live feed wrote is never
// rewound. checkOrders read every page order's current row under the key
// locks (w.orderRows) and encodeOrders sorted them: no row, a COPY; an older
// version, an upsert from its order_events row with the forward-only guard;
// this version or newer, nothing. A row another writer created meanwhile
// fails the COPY on the primary key and rolls the slice back: nothing is
// overwritten.
func (w *pageTx) writeOrders(ctx context.Context, ws *writeStreams) error {
	if _, err := ws.orders.send(ctx, w.tx, copyOrdersSQL); err != nil {
		return w.copyErr("store: insert orders", err)
	}
	if len(ws.ids) == 0 {
		return nil
	}
	if _, err := w.tx.Exec(ctx, ordersForwardSQL, w.scope, ws.ids, ws.versions); err != nil {
		return dbErr("store: update orders", err)
	}
	return nil
}
