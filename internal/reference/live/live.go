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
// Every write takes the projection write lock of the keys it writes
// (store.KeyLocks: the scope's lock shared, each position key's
// exclusively), the lock a recovery slice takes for its own keys, so a live
// write never interleaves with a slice on a key they share (FR-APR06) and
// goes through at once on the others. Rows carry their consensus seq
// (provenance).
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

// MaxBatch bounds how many queued messages one transaction writes. After a
// wait for a key a recovery slice holds, everything that queued meanwhile
// goes in the next transaction (ApplyBatch: three round trips whatever its
// size), so one wait never becomes a backlog. With a cap of 256, a writer
// waiting ~150 ms per batch for slices on the backlog's own keys kept up
// with at most ~1,700 events/s: at 2,000/s its queue, and every write's
// latency, grew until the catch-up ended (seconds; with 4,096: p99 ~0.6 s,
// docs/live-writes.md). It matches the subscription's buffer.
const MaxBatch = 4096

// Run subscribes to subject and projects every message until ctx ends. A
// message that does not decode, or whose write fails, is logged through onErr
// (if non-nil) and dropped: the live path is lossy by design. Messages that
// queued while a write waited for the projection write lock (a recovery
// slice holds it) are written together, in arrival order, by ApplyBatch.
func Run(ctx context.Context, nc *nats.Conn, subject string, pool *pgxpool.Pool, scope string, onErr func(error)) error {
	ch := make(chan *nats.Msg, MaxBatch)
	sub, err := nc.ChanSubscribe(subject, ch)
	if err != nil {
		return fmt.Errorf("live: subscribe %s: %w", subject, err)
	}
	defer sub.Unsubscribe() //nolint:errcheck
	report := func(err error) {
		if err != nil && onErr != nil && ctx.Err() == nil {
			onErr(err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-ch:
			evs := make([]wire.Event, 0, 1)
			for m != nil {
				if e, err := wire.Decode(m.Data); err != nil {
					report(fmt.Errorf("live: decode: %w", err))
				} else {
					evs = append(evs, e)
				}
				m = nil
				if len(evs) < MaxBatch {
					select {
					case m = <-ch:
					default:
					}
				}
			}
			report(ApplyBatch(ctx, pool, scope, evs))
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
		accts, instrs := keysOf([]wire.Event{e})
		if err := store.KeyLocks(ctx, tx, scope, accts, instrs); err != nil {
			return err
		}
		if err := applyEvent(ctx, tx, scope, e); err != nil {
			return err
		}
		return observe(ctx, tx, scope, e.Seq())
	})
	if err != nil {
		return fmt.Errorf("live: apply %s at seq %d: %w", e.Type, e.Seq(), err)
	}
	return nil
}

// ApplyBatch writes evs in arrival order in ONE transaction, under one
// acquisition of the projection write lock: the same writes, in the same
// order, as Apply of each. A projector that takes the lock once per event
// gets one event through per recovery slice when it has fallen behind (the
// slice is queued for the lock again before the projector's next BEGIN); once
// per backlog, everything that queued behind a slice is written at once
// (docs/live-writes.md). If the batch fails, each event is written alone, so
// a bad event is dropped alone, as with Apply.
func ApplyBatch(ctx context.Context, pool *pgxpool.Pool, scope string, evs []wire.Event) error {
	switch len(evs) {
	case 0:
		return nil
	case 1:
		return Apply(ctx, pool, scope, evs[0])
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return applyBatch(ctx, tx, scope, evs) })
	if err == nil || ctx.Err() != nil {
		return err
	}
	var errs []error
	for _, e := range evs {
		if err := Apply(ctx, pool, scope, e); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// applyBatch is ApplyBatch's transaction in three round trips, whatever the
// batch size, so the projection write lock is held briefly even for a large
// backlog: (1) the lock, every order write, every trade insert (RETURNING
// the ones that were new) and the max observed seq, pipelined in arrival
// order; (2) the positions of the new trades' keys, FOR UPDATE; (3) each
// key's position after the naive arrival-order bumps of its new trades,
// computed here. Orders never touch positions, so running their writes
// before the bumps changes nothing. An opening does (applyOpening adjusts
// the position the trades before it produced), so a batch holding one is
// written event by event.
func applyBatch(ctx context.Context, tx pgx.Tx, scope string, evs []wire.Event) error {
	var last int64
	for _, e := range evs {
		last = max(last, e.Seq())
	}
	for _, e := range evs {
		if e.Opening != nil || (e.Trade == nil && e.Order == nil) {
			accts, instrs := keysOf(evs)
			if err := store.KeyLocks(ctx, tx, scope, accts, instrs); err != nil {
				return err
			}
			for _, e := range evs {
				if err := applyEvent(ctx, tx, scope, e); err != nil {
					return err
				}
			}
			return observe(ctx, tx, scope, last)
		}
	}
	b := &pgx.Batch{}
	lockAccts, lockInstrs := keysOf(evs)
	b.Queue(store.ScopeSharedLockSQL, scope)
	b.Queue(store.KeyLocksSQL, scope, lockAccts, lockInstrs)
	var trades []*wire.Trade
	for _, e := range evs {
		if o := e.Order; o != nil {
			b.Queue(insertOrderEventSQL, orderArgs(scope, o)...)
			b.Queue(upsertOrderSQL, orderArgs(scope, o)...)
			continue
		}
		trades = append(trades, e.Trade)
		b.Queue(insertTradeSQL+` RETURNING true`, tradeArgs(scope, e.Trade)...)
	}
	b.Queue(observeSQL, scope, last)
	br := tx.SendBatch(ctx, b)
	for range 2 {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return fmt.Errorf("projection write lock: %w", err)
		}
	}
	var fresh []*wire.Trade
	for _, e := range evs {
		if e.Order != nil {
			for range 2 {
				if _, err := br.Exec(); err != nil {
					br.Close()
					return err
				}
			}
			continue
		}
		var inserted bool
		err := br.QueryRow().Scan(&inserted)
		switch {
		case errors.Is(err, pgx.ErrNoRows): // a redelivery: the position already holds it
		case err != nil:
			br.Close()
			return err
		default:
			fresh = append(fresh, e.Trade)
		}
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		return err
	}
	if err := br.Close(); err != nil {
		return err
	}
	if len(fresh) == 0 {
		return nil
	}
	type key struct{ account, instrument string }
	pos := map[key]position.State{}
	var accts, instrs []string
	for _, t := range fresh {
		for _, a := range []string{t.BuyAccount, t.SellAccount} {
			k := key{a, t.Instrument}
			if _, ok := pos[k]; !ok {
				pos[k] = position.State{Quantity: decimal.Zero, AvgCost: decimal.Zero}
				accts, instrs = append(accts, k.account), append(instrs, k.instrument)
			}
		}
	}
	rows, err := tx.Query(ctx, `SELECT p.account, p.instrument, p.quantity, p.avg_cost
  FROM unnest($2::text[], $3::text[]) AS k(account, instrument)
  JOIN positions p ON p.scope = $1 AND p.account = k.account AND p.instrument = k.instrument
 FOR UPDATE OF p`, scope, accts, instrs)
	if err != nil {
		return err
	}
	for rows.Next() {
		var k key
		var st position.State
		if err := rows.Scan(&k.account, &k.instrument, &st.Quantity, &st.AvgCost); err != nil {
			rows.Close()
			return err
		}
		pos[k] = st
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, t := range fresh {
		b, s := key{t.BuyAccount, t.Instrument}, key{t.SellAccount, t.Instrument}
		pos[b] = position.Apply(pos[b], t.Quantity, t.Price)
		pos[s] = position.Apply(pos[s], t.Quantity.Neg(), t.Price)
	}
	ub := &pgx.Batch{}
	for i := range accts {
		st := pos[key{accts[i], instrs[i]}]
		ub.Queue(upsertPositionSQL, scope, accts[i], instrs[i], st.Quantity, st.AvgCost)
	}
	return tx.SendBatch(ctx, ub).Close()
}

// keysOf is the position keys evs write (trade legs, order versions,
// openings), pairwise as accounts and instruments: what store.KeyLocks
// locks.
func keysOf(evs []wire.Event) (accts, instrs []string) {
	type key struct{ account, instrument string }
	seen := map[key]bool{}
	add := func(a, i string) {
		if k := (key{a, i}); !seen[k] {
			seen[k] = true
			accts, instrs = append(accts, a), append(instrs, i)
		}
	}
	for _, e := range evs {
		switch {
		case e.Trade != nil:
			add(e.Trade.BuyAccount, e.Trade.Instrument)
			add(e.Trade.SellAccount, e.Trade.Instrument)
		case e.Order != nil:
			add(e.Order.Account, e.Order.Instrument)
		case e.Opening != nil:
			add(e.Opening.Account, e.Opening.Instrument)
		}
	}
	return accts, instrs
}

func applyEvent(ctx context.Context, tx pgx.Tx, scope string, e wire.Event) error {
	switch {
	case e.Trade != nil:
		return applyTrade(ctx, tx, scope, e.Trade)
	case e.Order != nil:
		return applyOrder(ctx, tx, scope, e.Order)
	case e.Opening != nil:
		return applyOpening(ctx, tx, scope, e.Opening)
	}
	return errors.New("empty event")
}

// observe moves the trade-processor's "max observed seq": NOT completeness (FR-APR05).
func observe(ctx context.Context, tx pgx.Tx, scope string, seq int64) error {
	_, err := tx.Exec(ctx, observeSQL, scope, seq)
	return err
}

const observeSQL = `UPDATE projection_runs SET checkpoint_seq = greatest(checkpoint_seq, $2)
 WHERE scope = $1 AND selected AND checkpoint_seq < $2`

const insertTradeSQL = `
INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id,
                    buy_account, sell_account, ts, booking_status, written_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'BOOKED', 'live')
ON CONFLICT (scope, trade_id) DO NOTHING`

func tradeArgs(scope string, t *wire.Trade) []any {
	return []any{scope, t.TradeID, t.TradeSeq, t.Seq, t.Instrument, t.Price, t.Quantity,
		t.BuyOrderID, t.SellOrderID, t.BuyAccount, t.SellAccount, t.TS}
}

func applyTrade(ctx context.Context, tx pgx.Tx, scope string, t *wire.Trade) error {
	ct, err := tx.Exec(ctx, insertTradeSQL, tradeArgs(scope, t)...)
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
	_, err = tx.Exec(ctx, upsertPositionSQL, scope, account, instrument, n.Quantity, n.AvgCost)
	return err
}

const upsertPositionSQL = `
INSERT INTO positions (scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, quantity, avg_cost)
VALUES ($1, $2, $3, 0, 0, true, $4, $5)
ON CONFLICT (scope, account, instrument) DO UPDATE SET quantity = EXCLUDED.quantity, avg_cost = EXCLUDED.avg_cost, updated_at = now()`

const (
	insertOrderEventSQL = `
INSERT INTO order_events (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT (scope, order_id, version) DO NOTHING`
	upsertOrderSQL = `
INSERT INTO orders AS o (scope, order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT (scope, order_id) DO UPDATE SET version = EXCLUDED.version, seq = EXCLUDED.seq, account = EXCLUDED.account,
    instrument = EXCLUDED.instrument, side = EXCLUDED.side, price = EXCLUDED.price, quantity = EXCLUDED.quantity,
    remaining = EXCLUDED.remaining, status = EXCLUDED.status, ts = EXCLUDED.ts
WHERE o.version < EXCLUDED.version`
)

func orderArgs(scope string, o *wire.Order) []any {
	return []any{scope, o.OrderID, o.Version, o.Seq, o.Account, o.Instrument, string(o.Side), o.Price, o.Quantity, o.Remaining, string(o.Status), o.TS}
}

func applyOrder(ctx context.Context, tx pgx.Tx, scope string, o *wire.Order) error {
	if _, err := tx.Exec(ctx, insertOrderEventSQL, orderArgs(scope, o)...); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, upsertOrderSQL, orderArgs(scope, o)...)
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
