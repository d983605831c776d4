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

// Package live is the trade-processor's existing, lossy live projector: it
// consumes the member's NATS feed and writes each event as it ARRIVES, with no
// gap detection and a naive arrival-order position update. A dropped or
// reordered message therefore leaves a real gap or a wrong average cost in SQL:
// exactly what automatic recovery (internal/store) proves and repairs.
//
// Every write takes the scope's projection write lock (store.WriteLock), the
// same lock a recovery page takes, so a live write never interleaves with a
// page (FR-APR06). Rows carry their consensus seq (provenance).
package live

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/position"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// Run subscribes to subject and projects every message until ctx ends. A
// message that does not decode, or whose write fails, is logged through onErr
// (if non-nil) and dropped: the live path is lossy by design.
func Run(ctx context.Context, nc *nats.Conn, subject string, pool *pgxpool.Pool, scope string, onErr func(error)) error {
	ch := make(chan *nats.Msg, 4096)
	sub, err := nc.ChanSubscribe(subject, ch)
	if err != nil {
		return fmt.Errorf("live: subscribe %s: %w", subject, err)
	}
	defer sub.Unsubscribe() //nolint:errcheck
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-ch:
			if err := ApplyWire(ctx, pool, scope, m.Data); err != nil && onErr != nil && ctx.Err() == nil {
				onErr(err)
			}
		}
	}
}

// ApplyWire decodes one wire event and applies it.
func ApplyWire(ctx context.Context, pool *pgxpool.Pool, scope string, b []byte) error {
	e, err := wire.Decode(b)
	if err != nil {
		return fmt.Errorf("live: decode: %w", err)
	}
	return Apply(ctx, pool, scope, e)
}

// Apply writes one event in its own transaction under the projection write lock.
func Apply(ctx context.Context, pool *pgxpool.Pool, scope string, e wire.Event) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := store.WriteLock(ctx, tx, scope); err != nil {
			return err
		}
		switch {
		case e.Trade != nil:
			if err := applyTrade(ctx, tx, scope, e.Trade); err != nil {
				return err
			}
		case e.Order != nil:
			if err := applyOrder(ctx, tx, scope, e.Order); err != nil {
				return err
			}
		case e.Opening != nil:
			if err := applyOpening(ctx, tx, scope, e.Opening); err != nil {
				return err
			}
		default:
			return errors.New("empty event")
		}
		// The trade-processor's "max observed seq": NOT completeness (FR-APR05).
		_, err := tx.Exec(ctx, `UPDATE projection_runs SET checkpoint_seq = greatest(checkpoint_seq, $2)
 WHERE scope = $1 AND selected AND checkpoint_seq < $2`, scope, e.Seq())
		return err
	})
	if err != nil {
		return fmt.Errorf("live: apply %s at seq %d: %w", e.Type, e.Seq(), err)
	}
	return nil
}

func applyTrade(ctx context.Context, tx pgx.Tx, scope string, t *wire.Trade) error {
	ct, err := tx.Exec(ctx, `
INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id,
                    buy_account, sell_account, ts, booking_status, written_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'BOOKED', 'live')
ON CONFLICT (scope, trade_id) DO NOTHING`, scope, t.TradeID, t.TradeSeq, t.Seq, t.Instrument, t.Price, t.Quantity,
		t.BuyOrderID, t.SellOrderID, t.BuyAccount, t.SellAccount, t.TS)
	if err != nil {
		return err
	}
	if ct.RowsAffected() == 0 {
		return nil // a redelivery (or recovery inserted it): the position already holds it
	}
	if err := bump(ctx, tx, scope, t.BuyAccount, t.Instrument, t.Quantity, t.Price); err != nil {
		return err
	}
	return bump(ctx, tx, scope, t.SellAccount, t.Instrument, t.Quantity.Neg(), t.Price)
}

// bump is the naive arrival-order position update.
func bump(ctx context.Context, tx pgx.Tx, scope, account, instrument string, qty, price decimal.Decimal) error {
	var s position.State
	err := tx.QueryRow(ctx, `SELECT quantity, avg_cost FROM positions WHERE scope = $1 AND account = $2 AND instrument = $3 FOR UPDATE`,
		scope, account, instrument).Scan(&s.Quantity, &s.AvgCost)
	if errors.Is(err, pgx.ErrNoRows) {
		s = position.State{Quantity: decimal.Zero, AvgCost: decimal.Zero}
	} else if err != nil {
		return err
	}
	n := position.Apply(s, qty, price)
	_, err = tx.Exec(ctx, `
INSERT INTO positions (scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, quantity, avg_cost)
VALUES ($1, $2, $3, 0, 0, true, $4, $5)
ON CONFLICT (scope, account, instrument) DO UPDATE SET quantity = EXCLUDED.quantity, avg_cost = EXCLUDED.avg_cost, updated_at = now()`,
		scope, account, instrument, n.Quantity, n.AvgCost)
	return err
}

func applyOrder(ctx context.Context, tx pgx.Tx, scope string, o *wire.Order) error {
	if _, err := tx.Exec(ctx, `
INSERT INTO order_events (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT (scope, order_id, version) DO NOTHING`, scope, o.OrderID, o.Version, o.Seq, o.Account, o.Instrument,
		string(o.Side), o.Price, o.Quantity, o.Remaining, string(o.Status), o.TS); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `
INSERT INTO orders AS o (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT (scope, order_id) DO UPDATE SET version = EXCLUDED.version, seq = EXCLUDED.seq, account = EXCLUDED.account,
    instrument = EXCLUDED.instrument, side = EXCLUDED.side, price = EXCLUDED.price, quantity = EXCLUDED.quantity,
    remaining = EXCLUDED.remaining, status = EXCLUDED.status, ts = EXCLUDED.ts
WHERE o.version < EXCLUDED.version`, scope, o.OrderID, o.Version, o.Seq, o.Account, o.Instrument,
		string(o.Side), o.Price, o.Quantity, o.Remaining, string(o.Status), o.TS)
	return err
}

// applyOpening records a proven opening; if trades of the key arrived first
// the opening quantity is added to what they produced (naive, like the rest).
func applyOpening(ctx context.Context, tx pgx.Tx, scope string, o *wire.Opening) error {
	_, err := tx.Exec(ctx, `
INSERT INTO positions AS p (scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq, quantity, avg_cost)
VALUES ($1, $2, $3, $4, $5, true, $6, $4, $5)
ON CONFLICT (scope, account, instrument) DO UPDATE SET
    opening_quantity = EXCLUDED.opening_quantity, opening_avg_cost = EXCLUDED.opening_avg_cost, opening_proven = true,
    opening_seq = EXCLUDED.opening_seq, quantity = p.quantity - p.opening_quantity + EXCLUDED.opening_quantity, updated_at = now()
WHERE p.opening_seq IS DISTINCT FROM EXCLUDED.opening_seq`, scope, o.Account, o.Instrument, o.Quantity, o.AvgCost, o.Seq)
	return err
}
