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

package storetest

import (
	"context"
	"fmt"
	"math/big"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// ComparePositions compares the scope's positions table with Replay(evs):
// it returns the number of SQL keys and one line per difference (a key on one
// side only, or a different quantity or average cost). Values are read as
// text and parsed as big.Rat, so no shared decimal code is involved.
func ComparePositions(ctx context.Context, pool *pgxpool.Pool, scope string, evs []wire.Event) (keys int, diffs []string, err error) {
	want := Replay(evs)
	rows, err := pool.Query(ctx, `SELECT account, instrument, quantity::text, avg_cost::text FROM positions WHERE scope = $1`, scope)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	seen := map[Key]bool{}
	for rows.Next() {
		var k Key
		var q, a string
		if err := rows.Scan(&k.Account, &k.Instrument, &q, &a); err != nil {
			return 0, nil, err
		}
		keys++
		seen[k] = true
		w, ok := want[k]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("key %v in SQL (%s@%s) but not in the source replay", k, q, a))
			continue
		}
		qr, _ := new(big.Rat).SetString(q)
		ar, _ := new(big.Rat).SetString(a)
		if qr == nil || ar == nil || qr.Cmp(w.Qty) != 0 || ar.Cmp(w.Avg) != 0 {
			diffs = append(diffs, fmt.Sprintf("key %v: SQL %s@%s, replay %s@%s", k, q, a, w.Qty.FloatString(12), w.Avg.FloatString(12)))
		}
	}
	if err := rows.Err(); err != nil {
		return 0, nil, err
	}
	for k := range want {
		if !seen[k] {
			diffs = append(diffs, fmt.Sprintf("key %v in the source replay but not in SQL", k))
		}
	}
	return keys, diffs, nil
}

// AssertPositions fails unless the scope's positions table holds exactly the
// keys of Replay(evs) with equal quantity and average cost.
func AssertPositions(t testing.TB, pool *pgxpool.Pool, scope string, evs []wire.Event) {
	t.Helper()
	_, diffs, err := ComparePositions(context.Background(), pool, scope, evs)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range diffs {
		if i == 10 {
			t.Errorf("... and %d more differences", len(diffs)-10)
			break
		}
		t.Error(d)
	}
}
