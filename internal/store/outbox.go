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
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// This file holds every statement on projection_catchup_outbox: one row per
// notification a page or a repair committed (R2 of FR-APR06), published
// after the commit by internal/notify and stamped sent_at once NATS has it.

// outboxInsertPage writes one row per key of page_positions whose position
// changed, at the slice's through. A msg id present already (the same key,
// seq and value) is that notification: nothing is written twice.
func outboxInsertPage(ctx context.Context, tx pgx.Tx, scope string, through int64) error {
	_, err := tx.Exec(ctx, `
INSERT INTO projection_catchup_outbox (msg_id, scope, account, instrument, quantity, avg_cost, cursor_seq)
SELECT `+msgIDSQL+`, $1, account, instrument, quantity, avg_cost, $2 FROM page_positions WHERE changed
ON CONFLICT (msg_id) DO NOTHING`, scope, through)
	return err
}

// msgIDSQL is the notification idempotency key (Nats-Msg-Id):
// position/<scope>/<account>/<instrument>/<cursor seq>/<qty>@<avg>, names
// length-prefixed so that a '/' inside one cannot collide. The value is part
// of the key: after a cursor reset (FR-APR07) a page may end at the same seq
// with a different position, and that notification must not be mistaken for
// the one already sent.
const msgIDSQL = `'position/' || length($1::text) || ':' || $1::text || '/' || length(account) || ':' || account || '/' ||
       length(instrument) || ':' || instrument || '/' || $2::bigint || '/' || trim_scale(quantity)::text || '@' || trim_scale(avg_cost)::text`

// outboxInsertRepair writes a repair's notification (NotifyRepairTx);
// false when msgID exists already.
func outboxInsertRepair(ctx context.Context, tx pgx.Tx, msgID, scope, account, instrument, qty, cost string, cursor int64) (bool, error) {
	ct, err := tx.Exec(ctx, `
INSERT INTO projection_catchup_outbox (msg_id, scope, account, instrument, quantity, avg_cost, cursor_seq)
VALUES ($1, $2, $3, $4, $5::numeric, $6::numeric, $7)
ON CONFLICT (msg_id) DO NOTHING`, msgID, scope, account, instrument, qty, cost, cursor)
	return ct.RowsAffected() > 0, err
}

// OutboxRow is one outbox row; Quantity and AvgCost are the numeric text as
// PostgreSQL prints it (its scale kept), the body a notification carries.
type OutboxRow struct {
	ID                         int64
	MsgID                      string
	Scope, Account, Instrument string
	Quantity, AvgCost          string
	CursorSeq                  int64
	CreatedAt                  time.Time
	SentAt                     *time.Time
}

const outboxColumns = `id, msg_id, scope, account, instrument, quantity::text, avg_cost::text, cursor_seq, created_at, sent_at`

func scanOutbox(row pgx.Row) (OutboxRow, error) {
	var o OutboxRow
	err := row.Scan(&o.ID, &o.MsgID, &o.Scope, &o.Account, &o.Instrument, &o.Quantity, &o.AvgCost, &o.CursorSeq, &o.CreatedAt, &o.SentAt)
	return o, err
}

// OutboxGetForUpdate reads the outbox row id of scope FOR UPDATE (nil: none).
// id is the row id's text.
func OutboxGetForUpdate(ctx context.Context, tx pgx.Tx, scope, id string) (*OutboxRow, error) {
	o, err := scanOutbox(tx.QueryRow(ctx, `SELECT `+outboxColumns+`
  FROM projection_catchup_outbox WHERE scope = $1 AND id = $2::bigint FOR UPDATE`, scope, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// OutboxMarkSent stamps row id sent, unless it is already.
func OutboxMarkSent(ctx context.Context, q Querier, id int64) error {
	_, err := q.Exec(ctx, `UPDATE projection_catchup_outbox SET sent_at = clock_timestamp() WHERE id = $1 AND sent_at IS NULL`, id)
	return err
}

// OutboxDeleteUnsent deletes row id unless it was sent.
func OutboxDeleteUnsent(ctx context.Context, q Querier, id int64) error {
	_, err := q.Exec(ctx, `DELETE FROM projection_catchup_outbox WHERE id = $1 AND sent_at IS NULL`, id)
	return err
}

// OutboxUnsent reads the oldest limit unsent rows of every scope, in id
// order: the order one key's notifications must leave in.
func OutboxUnsent(ctx context.Context, q Querier, limit int) ([]OutboxRow, error) {
	rows, err := q.Query(ctx, `SELECT `+outboxColumns+`
  FROM projection_catchup_outbox WHERE sent_at IS NULL ORDER BY id LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []OutboxRow
	for rows.Next() {
		o, err := scanOutbox(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// OutboxMarkSentIDs stamps the rows ids sent.
func OutboxMarkSentIDs(ctx context.Context, q Querier, ids []int64) error {
	_, err := q.Exec(ctx, `UPDATE projection_catchup_outbox SET sent_at = clock_timestamp() WHERE id = ANY($1)`, ids)
	return err
}

// OutboxScan is one outbox row as OutboxEach scans it: numerics stay
// pgtype.Numeric, so a caller converts them without a text round trip.
type OutboxScan struct {
	ID                  int64
	MsgID               string
	Account, Instrument string
	Quantity, AvgCost   pgtype.Numeric
	CursorSeq           int64
	CreatedAt           time.Time
	SentAt              *time.Time
}

// OutboxEach calls each for every outbox row of the scope in id order, in
// q's snapshot. The row is reused between calls.
func OutboxEach(ctx context.Context, q Querier, scope string, each func(*OutboxScan) error) error {
	rows, err := q.Query(ctx, `SELECT id, msg_id, account, instrument, quantity, avg_cost, cursor_seq, created_at, sent_at
  FROM projection_catchup_outbox WHERE scope = $1 ORDER BY id`, scope)
	if err != nil {
		return err
	}
	defer rows.Close()
	var r OutboxScan
	for rows.Next() {
		if err := rows.Scan(&r.ID, &r.MsgID, &r.Account, &r.Instrument, &r.Quantity, &r.AvgCost, &r.CursorSeq, &r.CreatedAt, &r.SentAt); err != nil {
			return err
		}
		if err := each(&r); err != nil {
			return err
		}
	}
	return rows.Err()
}
