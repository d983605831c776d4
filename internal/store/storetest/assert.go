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
	"math/big"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// AssertPositions fails unless the scope's positions table holds exactly the
// keys of Replay(evs) with equal quantity and average cost. Values are read
// as text and parsed as big.Rat, so no shared decimal code is involved.
func AssertPositions(t testing.TB, pool *pgxpool.Pool, scope string, evs []wire.Event) {
	t.Helper()
	want := Replay(evs)
	rows, err := pool.Query(context.Background(), `SELECT account, instrument, quantity::text, avg_cost::text FROM positions WHERE scope = $1`, scope)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := 0
	bad := 0
	for rows.Next() {
		var k Key
		var q, a string
		if err := rows.Scan(&k.Account, &k.Instrument, &q, &a); err != nil {
			t.Fatal(err)
		}
		got++
		w, ok := want[k]
		qr, _ := new(big.Rat).SetString(q)
		ar, _ := new(big.Rat).SetString(a)
		if !ok {
			t.Errorf("key %v in SQL (%s@%s) but not in the source replay", k, q, a)
			bad++
			continue
		}
		if qr.Cmp(w.Qty) != 0 || ar.Cmp(w.Avg) != 0 {
			bad++
			if bad <= 10 {
				t.Errorf("key %v: SQL %s@%s, replay %s@%s", k, q, a, w.Qty.FloatString(12), w.Avg.FloatString(12))
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got != len(want) {
		t.Errorf("SQL holds %d keys, replay %d", got, len(want))
	}
}
