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

	"github.com/jackc/pgx/v5/pgtype"
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

// TestDecodeNumeric_SameAsPgx reads numerics from a real server as raw
// binary values and requires decodeNumeric to give exactly pgx's coefficient
// and exponent (numScan's) over sampleDecimals plus values at the int64
// limit, past it and with display scales longer than their digits; and the
// same refusals of NULL, NaN and infinities.
func TestDecodeNumeric_SameAsPgx(t *testing.T) {
	s := newStore(t)
	vals := append(sampleDecimals(11, 2000), "9223372036854775807", "-9223372036854775807", "9223372036854775808",
		"92233720368547758.07", "922337203685477580.8", "1.000000000000000000000", "10000.0000", "-0.0000000001000",
		"100000000000000000000", "12345678901234567890123456789")
	rows, err := s.pool.Query(ctxb, `SELECT v::numeric FROM unnest($1::text[]) WITH ORDINALITY AS u(v, i) ORDER BY i`, vals)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if f := rows.FieldDescriptions()[0].Format; f != pgtype.BinaryFormatCode {
		t.Fatalf("result format %d, want binary", f)
	}
	i := 0
	for ; rows.Next(); i++ {
		raw := rows.RawValues()[0]
		var want decimal.Decimal
		if err := pgtype.NewMap().Scan(pgtype.NumericOID, pgtype.BinaryFormatCode, raw, numScan{&want}); err != nil {
			t.Fatalf("%s: %v", vals[i], err)
		}
		got, err := decodeNumeric(raw)
		if err != nil {
			t.Fatalf("%s: %v", vals[i], err)
		}
		g := got.Decimal()
		if g.Exponent() != want.Exponent() || g.Coefficient().Cmp(want.Coefficient()) != 0 {
			t.Errorf("%s: decodeNumeric %sE%d, pgx %sE%d", vals[i], g.Coefficient(), g.Exponent(), want.Coefficient(), want.Exponent())
		}
	}
	if err := rows.Err(); err != nil || i != len(vals) {
		t.Fatalf("%d of %d rows: %v", i, len(vals), err)
	}

	for _, bad := range []string{"NULL", "'NaN'", "'Infinity'", "'-Infinity'"} {
		rows, err := s.pool.Query(ctxb, `SELECT `+bad+`::numeric`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			if n, err := decodeNumeric(rows.RawValues()[0]); err == nil || !strings.Contains(err.Error(), "store: ") {
				t.Errorf("%s: decoded as %v, err %v; want a refusal", bad, n.Decimal(), err)
			}
		}
		rows.Close()
	}
	for _, short := range [][]byte{{0, 1}, {0, 2, 0, 0, 0, 0, 0, 0, 0, 1}} {
		if _, err := decodeNumeric(short); err == nil {
			t.Errorf("% x: decoded; want a refusal", short)
		}
	}
}
