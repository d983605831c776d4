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
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/shopspring/decimal"
)

// This file holds every statement on projection_catchup_basis: per key, the
// fold of the verified source through basis_seq, which the next page of the
// key starts from (proveStart), and the last full fold's derived position
// with the deferred mark (deferred.go).

// basisDeleteScope drops every basis of the scope: a cursor at genesis
// trusts nothing derived before it (FR-APR07), so a bootstrap page and a
// withdrawal (WithdrawTx) re-derive every key from its opening.
func basisDeleteScope(ctx context.Context, tx pgx.Tx, scope string) error {
	_, err := tx.Exec(ctx, `DELETE FROM projection_catchup_basis WHERE scope = $1`, scope)
	return err
}

// basisDeferredCount counts the scope's keys whose derivation a page deferred.
func basisDeferredCount(ctx context.Context, tx pgx.Tx, scope string) (int64, error) {
	var left int64
	err := tx.QueryRow(ctx, `SELECT count(*) FROM projection_catchup_basis WHERE scope = $1 AND deferred`, scope).Scan(&left)
	return left, err
}

// basisDeferredKeys lists up to limit deferred keys of the scope, in key order.
func basisDeferredKeys(ctx context.Context, q Querier, scope string, limit int) ([]key, error) {
	rows, err := q.Query(ctx, `SELECT account, instrument FROM projection_catchup_basis WHERE scope = $1 AND deferred
 ORDER BY account, instrument LIMIT $2`, scope, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []key
	for rows.Next() {
		var k key
		if err := rows.Scan(&k.account, &k.instrument); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// basisUpsertPage writes the basis of every key in page_positions at the
// slice's through, with the derived position and the deferred mark.
func basisUpsertPage(ctx context.Context, tx pgx.Tx, scope string, through int64) error {
	_, err := tx.Exec(ctx, `
INSERT INTO projection_catchup_basis AS b (scope, account, instrument, basis_seq, quantity, avg_cost, derived_quantity, derived_avg_cost, deferred)
SELECT $1, account, instrument, $2, basis_quantity, basis_avg_cost, quantity, avg_cost, deferred FROM page_positions
ON CONFLICT (scope, account, instrument) DO UPDATE SET
    basis_seq = EXCLUDED.basis_seq, quantity = EXCLUDED.quantity, avg_cost = EXCLUDED.avg_cost,
    derived_quantity = EXCLUDED.derived_quantity, derived_avg_cost = EXCLUDED.derived_avg_cost, deferred = EXCLUDED.deferred`, scope, through)
	return err
}

// Basis is one key's basis as a repair reads it.
type Basis struct {
	BasisSeq          int64
	Quantity, AvgCost decimal.Decimal
}

// BasisGet reads the key's basis (nil: none).
func BasisGet(ctx context.Context, q Querier, scope, account, instrument string) (*Basis, error) {
	var b Basis
	err := q.QueryRow(ctx, `SELECT basis_seq, quantity, avg_cost FROM projection_catchup_basis WHERE scope = $1 AND account = $2 AND instrument = $3`,
		scope, account, instrument).Scan(&b.BasisSeq, &b.Quantity, &b.AvgCost)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// BasisDelete drops the key's basis.
func BasisDelete(ctx context.Context, q Querier, scope, account, instrument string) error {
	_, err := q.Exec(ctx, `DELETE FROM projection_catchup_basis WHERE scope = $1 AND account = $2 AND instrument = $3`, scope, account, instrument)
	return err
}

// BasisUpsert writes the key's basis (seq, quantity and avg_cost as their
// text or numeric values). A numeric value the row holds already keeps its
// stored scale (KeepScale), so a repair's revert is byte-exact for every
// value the repair did not change. The derived position and the deferred
// mark are left as they are: they are a hint, never a proof (deferred.go).
func BasisUpsert(ctx context.Context, q Querier, scope, account, instrument string, seq, qty, avg any) error {
	_, err := q.Exec(ctx, `
INSERT INTO projection_catchup_basis (scope, account, instrument, basis_seq, quantity, avg_cost)
VALUES ($1, $2, $3, $4::bigint, $5::numeric, $6::numeric)
ON CONFLICT (scope, account, instrument) DO UPDATE SET basis_seq = EXCLUDED.basis_seq, `+KeepScale("projection_catchup_basis", "quantity", "avg_cost"),
		scope, account, instrument, seq, qty, avg)
	return err
}

// BasisRestoreFromPositionQuarantine writes back the basis a dropped
// position's quarantined copy kept (none when it kept none).
func BasisRestoreFromPositionQuarantine(ctx context.Context, q Querier, scope, account, instrument string) error {
	_, err := q.Exec(ctx, `
INSERT INTO projection_catchup_basis (scope, account, instrument, basis_seq, quantity, avg_cost)
SELECT scope, account, instrument, basis_seq, basis_quantity, basis_avg_cost
  FROM projection_position_quarantine WHERE scope = $1 AND account = $2 AND instrument = $3 AND basis_seq IS NOT NULL`, scope, account, instrument)
	return err
}

// BasisScan is one basis row as BasisEach scans it: numerics stay
// pgtype.Numeric, so a caller converts them without a text round trip.
type BasisScan struct {
	Account, Instrument string
	BasisSeq            int64
	Quantity, AvgCost   pgtype.Numeric
}

// BasisEach calls each for every basis row of the scope in key order, in
// q's snapshot. The row is reused between calls.
func BasisEach(ctx context.Context, q Querier, scope string, each func(*BasisScan) error) error {
	rows, err := q.Query(ctx, `SELECT account, instrument, basis_seq, quantity, avg_cost
  FROM projection_catchup_basis WHERE scope = $1 ORDER BY account, instrument`, scope)
	if err != nil {
		return err
	}
	defer rows.Close()
	var r BasisScan
	for rows.Next() {
		if err := rows.Scan(&r.Account, &r.Instrument, &r.BasisSeq, &r.Quantity, &r.AvgCost); err != nil {
			return err
		}
		if err := each(&r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// KeepScale is the SET list of an upsert that writes each numeric column
// only when its VALUE changes: numeric keeps the scale it was written with
// (100.000000000000 and 100 are equal and print differently), and a repair
// carries canonical decimals, so rewriting an equal value would change the
// row's bytes for nothing. table and cols are constants of the caller,
// never input.
func KeepScale(table string, cols ...string) string {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%[2]s = CASE WHEN %[1]s.%[2]s = EXCLUDED.%[2]s THEN %[1]s.%[2]s ELSE EXCLUDED.%[2]s END", table, c)
	}
	return b.String()
}
