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
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

// TestNumScan_SameValueAsText reads the same numerics from a real server
// twice, through numScan and through decimal's own Scan (the text route),
// and requires equal values over sampleDecimals; and refuses NULL, NaN and
// infinities.
func TestNumScan_SameValueAsText(t *testing.T) {
	s := newStore(t)
	vals := sampleDecimals(7, 500)
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
