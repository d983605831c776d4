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
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

// TestNumScan_SameValueAsText reads the same numerics from a real server
// twice, through numScan and through decimal's own Scan (the text route),
// and requires equal values, for zeros at several scales, signs, every
// exponent modulo 4, integers with trailing zeros, coefficients past 18
// digits, very small and very large magnitudes and random values; and
// refuses NULL, NaN and infinities.
func TestNumScan_SameValueAsText(t *testing.T) {
	s := newStore(t)
	vals := []string{"0", "0.0", "0.00000", "-0.000", "1", "-1", "10", "1e3", "12e5", "0.5", "-0.5", "1.50", "1.0000",
		"123.4567", "0.0001", "0.00012", "-0.000000001", "9999", "10000", "100000000", "99999999.99999999",
		"123456789012345678", "-123456789012345678", "1234567890123456789", "-98765432109876543210.123456789",
		"0.000000000000000000000000000001", "1e-40", "5e40", "3.14159265358979323846264338327950288", "102.467052160601"}
	rng := rand.New(rand.NewPCG(7, 2026))
	for range 500 {
		vals = append(vals, decimal.New(rng.Int64N(1_000_000_000_000)-500_000_000_000, int32(rng.IntN(24))-16).String())
	}
	rows, err := s.pool.Query(ctxb, `SELECT v::numeric, v::numeric FROM unnest($1::text[]) AS v`, vals)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for ; rows.Next(); i++ {
		var viaText, direct decimal.Decimal
		if err := rows.Scan(&viaText, numScan{&direct}); err != nil {
			t.Fatalf("%s: %v", vals[i], err)
		}
		if !direct.Equal(viaText) || !direct.Equal(decimal.RequireFromString(vals[i])) {
			t.Errorf("%s: numScan %s, text route %s", vals[i], direct, viaText)
		}
	}
	if err := rows.Err(); err != nil || i != len(vals) {
		t.Fatalf("%d of %d rows: %v", i, len(vals), err)
	}

	for _, bad := range []string{"NULL", "'NaN'", "'Infinity'", "'-Infinity'"} {
		var d decimal.Decimal
		err := s.pool.QueryRow(ctxb, `SELECT `+bad+`::numeric`).Scan(numScan{&d})
		if err == nil || !strings.Contains(err.Error(), "store: ") {
			t.Errorf("%s: scanned as %s, err %v; want a refusal", bad, d, err)
		}
	}
}
