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
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// seqStream is one history table read through its cursor: buf holds the
// rows FETCHed and not returned yet (at most a batch past the last through).
type seqStream[T any] struct {
	fetch string
	scan  func(pgx.Rows) (T, error)
	seq   func(*T) recon.RowSeq
	buf   []T
	done  bool
}

// exhausted: every row was returned (nothing is left ahead of the stream).
func (s *seqStream[T]) exhausted() bool { return s.done && len(s.buf) == 0 }

// low: the cursor is not exhausted and holds less than a batch ahead.
func (s *seqStream[T]) low() bool { return !s.done && len(s.buf) < fetchBatch }

// more FETCHes the cursor's next batch into buf.
func (s *seqStream[T]) more(ctx context.Context, tx store.Querier) error {
	if s.done {
		return nil
	}
	batch, err := queryRows(ctx, tx, s.scan, s.fetch)
	if err != nil {
		return err
	}
	if len(batch) == 0 {
		s.done = true
	}
	s.buf = append(s.buf, batch...)
	return nil
}

// through returns the rows with seq <= through not returned yet.
func (s *seqStream[T]) through(ctx context.Context, tx store.Querier, through int64) ([]T, error) {
	for !s.done && (len(s.buf) == 0 || int64(s.seq(&s.buf[len(s.buf)-1])) <= through) {
		if err := s.more(ctx, tx); err != nil {
			return nil, err
		}
	}
	n := sort.Search(len(s.buf), func(i int) bool { return int64(s.seq(&s.buf[i])) > through })
	// A copy: the buffer's array is reused for the next FETCHes, and the
	// rows returned must not keep a batch ahead alive.
	out := append([]T(nil), s.buf[:n]...)
	s.buf = append(s.buf[:0], s.buf[n:]...)
	return out, nil
}

// queryRows runs a statement and scans every row.
func queryRows[T any](ctx context.Context, tx store.Querier, scan func(pgx.Rows) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func scanTrade(rows pgx.Rows) (recon.TradeRow, error) {
	var r recon.TradeRow
	var n [2]pgtype.Numeric
	var seq pgtype.Int8
	if err := rows.Scan(&r.TradeID, &r.TradeSeq, &seq, &r.Instrument, &n[0], &n[1], &r.BuyOrderID, &r.SellOrderID,
		&r.BuyAccount, &r.SellAccount, &r.TS, &r.BookingStatus, &r.WrittenBy); err != nil {
		return r, err
	}
	if err := decimals([]*decimal.Decimal{&r.Price, &r.Quantity}, n[:]); err != nil {
		return r, fmt.Errorf("trade %s: %w", r.TradeID, err)
	}
	var err error
	if r.Seq, err = recon.SeqFromSQL(seq.Int64, seq.Valid); err != nil {
		return r, fmt.Errorf("trade %s: %w", r.TradeID, err)
	}
	return r, nil
}

func scanOrder(rows pgx.Rows) (recon.OrderRow, error) {
	var r recon.OrderRow
	var n [3]pgtype.Numeric
	var seq pgtype.Int8
	if err := rows.Scan(&r.OrderID, &r.Version, &seq, &r.Account, &r.Instrument, &r.Side, &n[0], &n[1], &n[2],
		&r.Status, &r.TS); err != nil {
		return r, err
	}
	if err := decimals([]*decimal.Decimal{&r.Price, &r.Quantity, &r.Remaining}, n[:]); err != nil {
		return r, fmt.Errorf("order %s v%d: %w", r.OrderID, r.Version, err)
	}
	var err error
	if r.Seq, err = recon.SeqFromSQL(seq.Int64, seq.Valid); err != nil {
		return r, fmt.Errorf("order %s v%d: %w", r.OrderID, r.Version, err)
	}
	return r, nil
}

// decimals converts scanned numerics exactly into dst.
func decimals(dst []*decimal.Decimal, src []pgtype.Numeric) error {
	for i := range dst {
		v, err := dec(src[i])
		if err != nil {
			return err
		}
		*dst[i] = v
	}
	return nil
}
