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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// The SQL side's statements, internal/store's (each in its table's file),
// all parameterised by the scope ($1). Every table is read in primary-key
// order, so the same database always yields the same snapshot (and so the
// same report and plan fingerprint). The row counts are read in the same
// snapshot as the rows (so exact): the slices are allocated once at their
// final size, without append's slack and outgrown arrays.
const (
	tradesSQL      = store.TradesSnapshotSQL
	ordersSQL      = store.OrdersSnapshotSQL
	orderEventsSQL = store.OrderEventsSnapshotSQL
	positionsSQL   = store.PositionsSnapshotSQL
	countsSQL      = store.HistoryCountsSQL
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
	var n [2]pgtype.Numeric
	return store.BasisEach(ctx, tx, scope, func(b *store.BasisScan) error {
		r := recon.BasisRow{Account: b.Account, Instrument: b.Instrument, BasisSeq: b.BasisSeq}
		n[0], n[1] = b.Quantity, b.AvgCost
		if err := in.numerics([]*decimal.Decimal{&r.Quantity, &r.AvgCost}, n[:]); err != nil {
			return fmt.Errorf("basis %s/%s: %w", r.Account, r.Instrument, err)
		}
		out.Basis = append(out.Basis, r)
		return nil
	})
}

func readCursor(ctx context.Context, tx pgx.Tx, scope string, out *recon.SQLSide) error {
	c, err := store.CursorGet(ctx, tx, scope)
	if err != nil || !c.Exists {
		return err // nil, genesis: no cursor yet
	}
	out.Cursor = &recon.CursorRow{DescriptorHash: c.DescriptorHash, ProtocolVersion: c.ProtocolVersion,
		VerifiedThroughSeq: c.VerifiedThroughSeq, ChainDigest: c.ChainDigest, EventCount: c.EventCount,
		LastObservedBoundarySeq: c.LastObservedBoundarySeq, State: c.State, BlockedReason: c.BlockedReason,
		LastVerifiedAt: c.LastVerifiedAt, UpdatedAt: c.UpdatedAt}
	return nil
}

func readLease(ctx context.Context, tx pgx.Tx, scope string, out *recon.SQLSide) error {
	l, err := store.LeaseGet(ctx, tx, scope)
	if err != nil || l == nil {
		return err // nil, nil: never leased
	}
	out.Lease = &recon.LeaseRow{Owner: l.Owner, Fence: l.Fence, ExpiresAt: l.ExpiresAt, AcquiredAt: l.AcquiredAt, RenewedAt: l.RenewedAt}
	return nil
}

func readRuns(ctx context.Context, tx pgx.Tx, scope string, out *recon.SQLSide) error {
	runs, err := store.RunList(ctx, tx, scope)
	if err != nil {
		return err
	}
	for _, r := range runs {
		out.Runs = append(out.Runs, recon.ProjectionRun{RunID: r.RunID, Epoch: r.Epoch, Managed: r.Managed, Selected: r.Selected,
			Phase: r.Phase, DescriptorHash: r.DescriptorHash, ProtocolVersion: r.ProtocolVersion, FrozenSeq: r.FrozenSeq,
			CheckpointSeq: r.CheckpointSeq, RecoveryCheckpointSeq: r.RecoveryCheckpointSeq,
			RecoveryCheckpointDigest: r.RecoveryCheckpointDigest, RecoveryCheckpointDescriptorHash: r.RecoveryCheckpointDescriptorHash,
			RecoveryCheckpointProtocolVersion: r.RecoveryCheckpointProtocolVersion})
	}
	return nil
}

func readOutbox(ctx context.Context, tx pgx.Tx, scope string, out *recon.SQLSide, in *interner) error {
	var n [2]pgtype.Numeric
	return store.OutboxEach(ctx, tx, scope, func(o *store.OutboxScan) error {
		r := recon.OutboxRow{ID: o.ID, MsgID: o.MsgID, Account: o.Account, Instrument: o.Instrument, CursorSeq: o.CursorSeq,
			CreatedAt: o.CreatedAt, SentAt: o.SentAt}
		n[0], n[1] = o.Quantity, o.AvgCost
		if err := in.numerics([]*decimal.Decimal{&r.Quantity, &r.AvgCost}, n[:]); err != nil {
			return fmt.Errorf("outbox %d: %w", r.ID, err)
		}
		out.Outbox = append(out.Outbox, r)
		return nil
	})
}

func readScopes(ctx context.Context, tx pgx.Tx, s *recon.Snapshot) error {
	cursors, err := store.CursorList(ctx, tx)
	if err != nil {
		return err
	}
	for _, c := range cursors {
		s.Scopes = append(s.Scopes, recon.ScopeCursor{Scope: c.Scope, State: c.State, BlockedReason: c.BlockedReason,
			VerifiedThroughSeq: c.VerifiedThroughSeq, UpdatedAt: c.UpdatedAt})
	}
	return nil
}
