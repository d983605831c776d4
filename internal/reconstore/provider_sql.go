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
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// The SQL side's statements, all parameterised by the scope ($1). Every
// table is read in primary-key order, so the same database always yields the
// same snapshot (and so the same report and plan fingerprint).
const (
	tradesSQL = `SELECT trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id,
       buy_account, sell_account, ts, booking_status, written_by
  FROM trades WHERE scope = $1 ORDER BY trade_id`
	ordersSQL = `SELECT order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts
  FROM orders WHERE scope = $1 ORDER BY order_id`
	orderEventsSQL = `SELECT order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts
  FROM order_events WHERE scope = $1 ORDER BY order_id, version`
	positionsSQL = `SELECT account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq,
       quantity, avg_cost, updated_at
  FROM positions WHERE scope = $1 ORDER BY account, instrument`
	basisSQL = `SELECT account, instrument, basis_seq, quantity, avg_cost
  FROM projection_catchup_basis WHERE scope = $1 ORDER BY account, instrument`
	cursorSQL = `SELECT coalesce(descriptor_hash, ''), coalesce(protocol_version, 0), verified_through_seq, chain_digest,
       event_count, last_observed_boundary_seq, state, coalesce(blocked_reason, ''), last_verified_at, updated_at
  FROM projection_catchup_cursor WHERE scope = $1`
	leaseSQL = `SELECT owner, fence, expires_at, acquired_at, renewed_at
  FROM projection_catchup_lease WHERE scope = $1`
	runsSQL = `SELECT run_id, epoch, managed, selected, phase, descriptor_hash, protocol_version, frozen_seq,
       checkpoint_seq, recovery_checkpoint_seq, coalesce(recovery_checkpoint_digest, ''),
       coalesce(recovery_checkpoint_descriptor_hash, ''), coalesce(recovery_checkpoint_protocol_version, 0)
  FROM projection_runs WHERE scope = $1 ORDER BY run_id`
	outboxSQL = `SELECT id, msg_id, account, instrument, quantity, avg_cost, cursor_seq, created_at, sent_at
  FROM projection_catchup_outbox WHERE scope = $1 ORDER BY id`
	// The row counts of the large tables, read in the same snapshot as the
	// rows (so exact): the slices are allocated once at their final size.
	// Growing them by append instead keeps up to a quarter of slack and
	// leaves every outgrown array as garbage, which at 1M events is most of
	// the read's peak heap beyond the snapshot itself.
	countsSQL = `SELECT (SELECT count(*) FROM trades WHERE scope = $1),
       (SELECT count(*) FROM orders WHERE scope = $1),
       (SELECT count(*) FROM order_events WHERE scope = $1)`
	// Every scope's cursor: the cross-scope summary (manager_not_running).
	// Not parameterised by the scope on purpose.
	scopesSQL = `SELECT scope, state, coalesce(blocked_reason, ''), verified_through_seq, updated_at
  FROM projection_catchup_cursor ORDER BY scope`
)

// readSQL reads the scope's SQL side and every scope's cursor summary in ONE
// read-only REPEATABLE READ transaction: all statements see the same
// snapshot, so a page committing in between cannot show its trades without
// its positions or its cursor. (READ COMMITTED would give each statement its
// own snapshot and fabricate drift that never existed.) READ ONLY makes
// PostgreSQL refuse any write, whatever the role may do.
func readSQL(ctx context.Context, pool *pgxpool.Pool, scope string, s *recon.Snapshot, in *interner, limit int64) (err error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin read-only transaction: %w", err)
	}
	// Nothing to commit: ending a read-only transaction either way is the same.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var trades, orders, events int64
	if err := tx.QueryRow(ctx, countsSQL, scope).Scan(&trades, &orders, &events); err != nil {
		return fmt.Errorf("row counts: %w", err)
	}
	if n := trades + orders + events; n > limit {
		return fmt.Errorf("%w: the projection holds %d history rows (%d trades, %d orders, %d order versions), more than the snapshot cap of %d records",
			recon.ErrSnapshotTooLarge, n, trades, orders, events, limit)
	}
	s.SQL.Trades, s.SQL.Orders, s.SQL.OrderEvents = sized[recon.TradeRow](trades), sized[recon.OrderRow](orders), sized[recon.OrderRow](events)
	in.sizeIDs(trades + orders)
	steps := []struct {
		what string
		run  func() error
	}{
		{"trades", func() error { return readTrades(ctx, tx, scope, &s.SQL, in) }},
		{"orders", func() error { return readOrders(ctx, tx, ordersSQL, scope, &s.SQL.Orders, in) }},
		{"order_events", func() error { return readOrders(ctx, tx, orderEventsSQL, scope, &s.SQL.OrderEvents, in) }},
		{"positions", func() error { return readPositions(ctx, tx, scope, &s.SQL, in) }},
		{"projection_catchup_basis", func() error { return readBasis(ctx, tx, scope, &s.SQL, in) }},
		{"projection_catchup_cursor", func() error { return readCursor(ctx, tx, scope, &s.SQL) }},
		{"projection_catchup_lease", func() error { return readLease(ctx, tx, scope, &s.SQL) }},
		{"projection_runs", func() error { return readRuns(ctx, tx, scope, &s.SQL) }},
		{"projection_catchup_outbox", func() error { return readOutbox(ctx, tx, scope, &s.SQL, in) }},
		{"cursor summary", func() error { return readScopes(ctx, tx, s) }},
	}
	for _, st := range steps {
		if err := st.run(); err != nil {
			return fmt.Errorf("%s: %w", st.what, err)
		}
	}
	return nil
}

// sized is an empty slice with capacity n, nil when n is 0 (a table without
// rows reads as nil, as before).
func sized[T any, N int | int64](n N) []T {
	if n <= 0 {
		return nil
	}
	return make([]T, 0, n)
}

// dec converts a scanned numeric exactly (no text round trip). NaN and
// infinities have no decimal: the row is unreadable, never zero.
func dec(n pgtype.Numeric) (decimal.Decimal, error) {
	switch {
	case !n.Valid:
		return decimal.Decimal{}, errors.New("NULL numeric")
	case n.NaN || n.InfinityModifier != pgtype.Finite:
		return decimal.Decimal{}, errors.New("non-finite numeric")
	}
	return decimal.NewFromBigInt(n.Int, n.Exp), nil
}

func readTrades(ctx context.Context, tx pgx.Tx, scope string, out *recon.SQLSide, in *interner) error {
	rows, err := tx.Query(ctx, tradesSQL, scope)
	if err != nil {
		return err
	}
	defer rows.Close()
	var n [2]pgtype.Numeric
	var seq pgtype.Int8 // a value: scanning into the row's seq allocates nothing
	for rows.Next() {
		var r recon.TradeRow
		if err := rows.Scan(&r.TradeID, &r.TradeSeq, &seq, &r.Instrument, &n[0], &n[1], &r.BuyOrderID, &r.SellOrderID,
			&r.BuyAccount, &r.SellAccount, &r.TS, &r.BookingStatus, &r.WrittenBy); err != nil {
			return err
		}
		if err := in.numerics([]*decimal.Decimal{&r.Price, &r.Quantity}, n[:]); err != nil {
			return fmt.Errorf("trade %s: %w", r.TradeID, err)
		}
		if r.Seq, err = recon.SeqFromSQL(seq.Int64, seq.Valid); err != nil {
			return fmt.Errorf("trade %s: %w", r.TradeID, err)
		}
		in.strsIn(&r.Instrument, &r.BuyAccount, &r.SellAccount, &r.BookingStatus, &r.WrittenBy)
		in.idsIn(&r.TradeID, &r.BuyOrderID, &r.SellOrderID)
		out.Trades = append(out.Trades, r)
	}
	return rows.Err()
}

func readOrders(ctx context.Context, tx pgx.Tx, sql, scope string, out *[]recon.OrderRow, in *interner) error {
	rows, err := tx.Query(ctx, sql, scope)
	if err != nil {
		return err
	}
	defer rows.Close()
	var n [3]pgtype.Numeric
	var seq pgtype.Int8
	for rows.Next() {
		var r recon.OrderRow
		if err := rows.Scan(&r.OrderID, &r.Version, &seq, &r.Account, &r.Instrument, &r.Side, &n[0], &n[1], &n[2],
			&r.Status, &r.TS); err != nil {
			return err
		}
		if err := in.numerics([]*decimal.Decimal{&r.Price, &r.Quantity, &r.Remaining}, n[:]); err != nil {
			return fmt.Errorf("order %s v%d: %w", r.OrderID, r.Version, err)
		}
		if r.Seq, err = recon.SeqFromSQL(seq.Int64, seq.Valid); err != nil {
			return fmt.Errorf("order %s v%d: %w", r.OrderID, r.Version, err)
		}
		in.strsIn(&r.Account, &r.Instrument, &r.Side, &r.Status)
		in.idsIn(&r.OrderID)
		*out = append(*out, r)
	}
	return rows.Err()
}

func readPositions(ctx context.Context, tx pgx.Tx, scope string, out *recon.SQLSide, in *interner) error {
	rows, err := tx.Query(ctx, positionsSQL, scope)
	if err != nil {
		return err
	}
	defer rows.Close()
	var n [4]pgtype.Numeric
	for rows.Next() {
		var r recon.PositionRow
		if err := rows.Scan(&r.Account, &r.Instrument, &n[0], &n[1], &r.OpeningProven, &r.OpeningSeq, &n[2], &n[3], &r.UpdatedAt); err != nil {
			return err
		}
		if err := in.numerics([]*decimal.Decimal{&r.OpeningQuantity, &r.OpeningAvgCost, &r.Quantity, &r.AvgCost}, n[:]); err != nil {
			return fmt.Errorf("position %s/%s: %w", r.Account, r.Instrument, err)
		}
		out.Positions = append(out.Positions, r)
	}
	return rows.Err()
}

func readBasis(ctx context.Context, tx pgx.Tx, scope string, out *recon.SQLSide, in *interner) error {
	rows, err := tx.Query(ctx, basisSQL, scope)
	if err != nil {
		return err
	}
	defer rows.Close()
	var n [2]pgtype.Numeric
	for rows.Next() {
		var r recon.BasisRow
		if err := rows.Scan(&r.Account, &r.Instrument, &r.BasisSeq, &n[0], &n[1]); err != nil {
			return err
		}
		if err := in.numerics([]*decimal.Decimal{&r.Quantity, &r.AvgCost}, n[:]); err != nil {
			return fmt.Errorf("basis %s/%s: %w", r.Account, r.Instrument, err)
		}
		out.Basis = append(out.Basis, r)
	}
	return rows.Err()
}

func readCursor(ctx context.Context, tx pgx.Tx, scope string, out *recon.SQLSide) error {
	var c recon.CursorRow
	var pv int32
	err := tx.QueryRow(ctx, cursorSQL, scope).Scan(&c.DescriptorHash, &pv, &c.VerifiedThroughSeq, &c.ChainDigest,
		&c.EventCount, &c.LastObservedBoundarySeq, &c.State, &c.BlockedReason, &c.LastVerifiedAt, &c.UpdatedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil // genesis: no cursor yet
	case err != nil:
		return err
	}
	c.ProtocolVersion = int(pv)
	out.Cursor = &c
	return nil
}

func readLease(ctx context.Context, tx pgx.Tx, scope string, out *recon.SQLSide) error {
	var l recon.LeaseRow
	err := tx.QueryRow(ctx, leaseSQL, scope).Scan(&l.Owner, &l.Fence, &l.ExpiresAt, &l.AcquiredAt, &l.RenewedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil // never leased
	case err != nil:
		return err
	}
	out.Lease = &l
	return nil
}

func readRuns(ctx context.Context, tx pgx.Tx, scope string, out *recon.SQLSide) error {
	rows, err := tx.Query(ctx, runsSQL, scope)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r recon.ProjectionRun
		var epoch, pv, ckPV int32
		if err := rows.Scan(&r.RunID, &epoch, &r.Managed, &r.Selected, &r.Phase, &r.DescriptorHash, &pv, &r.FrozenSeq,
			&r.CheckpointSeq, &r.RecoveryCheckpointSeq, &r.RecoveryCheckpointDigest,
			&r.RecoveryCheckpointDescriptorHash, &ckPV); err != nil {
			return err
		}
		r.Epoch, r.ProtocolVersion, r.RecoveryCheckpointProtocolVersion = int(epoch), int(pv), int(ckPV)
		out.Runs = append(out.Runs, r)
	}
	return rows.Err()
}

func readOutbox(ctx context.Context, tx pgx.Tx, scope string, out *recon.SQLSide, in *interner) error {
	rows, err := tx.Query(ctx, outboxSQL, scope)
	if err != nil {
		return err
	}
	defer rows.Close()
	var n [2]pgtype.Numeric
	for rows.Next() {
		var r recon.OutboxRow
		if err := rows.Scan(&r.ID, &r.MsgID, &r.Account, &r.Instrument, &n[0], &n[1], &r.CursorSeq, &r.CreatedAt, &r.SentAt); err != nil {
			return err
		}
		if err := in.numerics([]*decimal.Decimal{&r.Quantity, &r.AvgCost}, n[:]); err != nil {
			return fmt.Errorf("outbox %d: %w", r.ID, err)
		}
		out.Outbox = append(out.Outbox, r)
	}
	return rows.Err()
}

func readScopes(ctx context.Context, tx pgx.Tx, s *recon.Snapshot) error {
	rows, err := tx.Query(ctx, scopesSQL)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var c recon.ScopeCursor
		var at time.Time
		if err := rows.Scan(&c.Scope, &c.State, &c.BlockedReason, &c.VerifiedThroughSeq, &at); err != nil {
			return err
		}
		c.UpdatedAt = at
		s.Scopes = append(s.Scopes, c)
	}
	return rows.Err()
}
