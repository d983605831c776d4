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

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"
)

// This file holds the statements of internal/store on positions, the
// trade-processor's table of each key's position: a page reads its touched
// keys with their bases (derive), writes their re-derived rows from
// page_positions, and, before CURRENT, looks for balances nothing explains;
// a repair's notification reads the row back as written.

// touchedKeysSQL reads, for every key of page_keys, its positions row and
// its basis (NULL columns when either is absent), for derive.
const touchedKeysSQL = `
SELECT k.account, k.instrument, p.scope IS NOT NULL,
       coalesce(p.quantity, 0), coalesce(p.avg_cost, 0), coalesce(p.opening_quantity, 0), coalesce(p.opening_avg_cost, 0),
       coalesce(p.opening_proven, true), p.opening_seq, b.basis_seq, coalesce(b.quantity, 0), coalesce(b.avg_cost, 0),
       b.derived_quantity, b.derived_avg_cost
  FROM page_keys k
  LEFT JOIN positions p ON p.scope = $1 AND p.account = k.account AND p.instrument = k.instrument
  LEFT JOIN projection_catchup_basis b ON b.scope = $1 AND b.account = k.account AND b.instrument = k.instrument`

// positionsUpsertPageSQL writes the derived row of every key in
// page_positions, touching only rows whose values change.
const positionsUpsertPageSQL = `
INSERT INTO positions AS p (scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq, quantity, avg_cost, updated_at)
SELECT $1, account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq, quantity, avg_cost, clock_timestamp()
  FROM page_positions
ON CONFLICT (scope, account, instrument) DO UPDATE SET
    opening_quantity = EXCLUDED.opening_quantity, opening_avg_cost = EXCLUDED.opening_avg_cost,
    opening_proven = EXCLUDED.opening_proven, opening_seq = EXCLUDED.opening_seq,
    quantity = EXCLUDED.quantity, avg_cost = EXCLUDED.avg_cost, updated_at = EXCLUDED.updated_at
WHERE (p.quantity, p.avg_cost, p.opening_quantity, p.opening_avg_cost, p.opening_proven, p.opening_seq)
      IS DISTINCT FROM (EXCLUDED.quantity, EXCLUDED.avg_cost, EXCLUDED.opening_quantity, EXCLUDED.opening_avg_cost,
                        EXCLUDED.opening_proven, EXCLUDED.opening_seq)`

// phantomBalancesSQL finds a position row with a balance that no basis, no
// retained trade and no later opening explains (checkPhantomBalances).
const phantomBalancesSQL = `
SELECT p.account, p.instrument, p.quantity FROM positions p
 WHERE p.scope = $1 AND (p.quantity <> 0 OR p.avg_cost <> 0) AND (p.opening_seq IS NULL OR p.opening_seq <= $2)
   AND NOT EXISTS (SELECT 1 FROM projection_catchup_basis b WHERE b.scope = $1 AND b.account = p.account AND b.instrument = p.instrument)
   AND NOT EXISTS (SELECT 1 FROM trades t WHERE t.scope = $1 AND t.buy_account = p.account AND t.instrument = p.instrument)
   AND NOT EXISTS (SELECT 1 FROM trades t WHERE t.scope = $1 AND t.sell_account = p.account AND t.instrument = p.instrument)
 LIMIT 1`

// repairedPositionSQL reads a key's position as a repair left it, with the
// cursor's verified seq (0 without a cursor): one row, absent position or not
// (NotifyRepairTx).
const repairedPositionSQL = `
SELECT p.quantity::text, p.avg_cost::text, coalesce(c.verified_through_seq, 0)
  FROM (SELECT 1) one
  LEFT JOIN positions p ON p.scope = $1 AND p.account = $2 AND p.instrument = $3
  LEFT JOIN projection_catchup_cursor c ON c.scope = $1`

// The statements a repair runs on one position (internal/reconstore's
// handlers), in its transaction under the projection write lock and the
// fenced lease (WithScopeWrite).

// PositionRow is one positions row as a repair reads it.
type PositionRow struct {
	Quantity, AvgCost, OpeningQuantity, OpeningAvgCost decimal.Decimal
	OpeningProven                                      bool
	OpeningSeq                                         *int64
}

// PositionGet reads the key's row (nil: absent).
func PositionGet(ctx context.Context, q Querier, scope, account, instrument string) (*PositionRow, error) {
	var p PositionRow
	err := q.QueryRow(ctx, `SELECT quantity, avg_cost, opening_quantity, opening_avg_cost, opening_proven, opening_seq
  FROM positions WHERE scope = $1 AND account = $2 AND instrument = $3`, scope, account, instrument).
		Scan(&p.Quantity, &p.AvgCost, &p.OpeningQuantity, &p.OpeningAvgCost, &p.OpeningProven, &p.OpeningSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// PositionDelete deletes the key's row.
func PositionDelete(ctx context.Context, q Querier, scope, account, instrument string) error {
	_, err := q.Exec(ctx, `DELETE FROM positions WHERE scope = $1 AND account = $2 AND instrument = $3`, scope, account, instrument)
	return err
}

// PositionValues are a key's row as a repair carries it: numbers and the
// proven flag as their text, cast by the statement.
type PositionValues struct {
	Account, Instrument                            string
	OpeningQuantity, OpeningAvgCost, OpeningProven string
	OpeningSeq                                     *int64
	Quantity, AvgCost                              string
}

// PositionUpsert writes the key's row, updated_at stamped now. A numeric
// value the row holds already keeps its stored scale (KeepScale), so a
// revert is byte-exact for every value the repair did not change.
func PositionUpsert(ctx context.Context, q Querier, scope string, v PositionValues) error {
	_, err := q.Exec(ctx, `
INSERT INTO positions (scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq, quantity, avg_cost, updated_at)
VALUES ($1, $2, $3, $4::numeric, $5::numeric, $6::boolean, $7, $8::numeric, $9::numeric, clock_timestamp())
ON CONFLICT (scope, account, instrument) DO UPDATE SET
    opening_proven = EXCLUDED.opening_proven, opening_seq = EXCLUDED.opening_seq, updated_at = EXCLUDED.updated_at,
    `+KeepScale("positions", "opening_quantity", "opening_avg_cost", "quantity", "avg_cost"),
		scope, v.Account, v.Instrument, v.OpeningQuantity, v.OpeningAvgCost, v.OpeningProven, v.OpeningSeq, v.Quantity, v.AvgCost)
	return err
}

// PositionRestoreFromQuarantine inserts the key's row back exactly as
// projection_position_quarantine holds it (numeric scale and updated_at
// included); false when it holds none.
func PositionRestoreFromQuarantine(ctx context.Context, q Querier, scope, account, instrument string) (bool, error) {
	ct, err := q.Exec(ctx, `
INSERT INTO positions (scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq, quantity, avg_cost, updated_at)
SELECT scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq, quantity, avg_cost, updated_at
  FROM projection_position_quarantine WHERE scope = $1 AND account = $2 AND instrument = $3`, scope, account, instrument)
	return ct.RowsAffected() > 0, err
}

// PositionsSnapshotSQL reads every position of scope $1 in key order: the
// statement reconciliation's detection reads positions with, in its
// read-only REPEATABLE READ transaction (internal/reconstore's provider).
const PositionsSnapshotSQL = `SELECT account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq,
       quantity, avg_cost, updated_at
  FROM positions WHERE scope = $1 ORDER BY account, instrument`
