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
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/position"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// TestScanLegs_BinaryAndTextAgree: the same legs read in binary (decoded
// from their bytes) and in text format (the simple protocol, read through
// Scan) give the same keys, legs, coefficients and exponents, and the same
// count of legs newer than the page; a NULL amount is refused either way.
func TestScanLegs_BinaryAndTextAgree(t *testing.T) {
	s := newStore(t)
	vals := sampleDecimals(5, 300)
	const q = `
SELECT 'acct-' || (i % 3), 'XYZ', i::bigint, (i * 7)::bigint, (i % 2)::int, v::numeric, (v::numeric * 3)
  FROM unnest($1::text[]) WITH ORDINALITY AS u(v, i) ORDER BY i % 3, i`
	read := func(mode pgx.QueryExecMode, sql string) (*pageTx, map[key][]string, error) {
		w := &pageTx{p: &prepared{through: 150}}
		rows, err := s.pool.Query(ctxb, sql, mode, vals)
		if err != nil {
			t.Fatal(err)
		}
		legs, err := w.scanLegs(rows)
		out := map[key][]string{}
		for k, ls := range legs {
			for _, f := range ls {
				qd, pd := f.Quantity.Decimal(), f.Price.Decimal()
				out[k] = append(out[k], fmtLeg(f.Seq, f.TradeSeq, f.Leg, qd.Coefficient().String(), qd.Exponent(), pd.Coefficient().String(), pd.Exponent()))
			}
		}
		return w, out, err
	}
	wb, bin, err := read(pgx.QueryExecModeCacheStatement, q)
	if err != nil {
		t.Fatal(err)
	}
	wt, text, err := read(pgx.QueryExecModeSimpleProtocol, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(bin) != 3 || wb.newer != wt.newer || wb.newer != int64(len(vals)-150) {
		t.Fatalf("keys %d, newer %d (binary) %d (text), want 3 keys and %d newer", len(bin), wb.newer, wt.newer, len(vals)-150)
	}
	for k, b := range bin {
		tx := text[k]
		if len(tx) != len(b) {
			t.Fatalf("key %v: %d legs binary, %d text", k, len(b), len(tx))
		}
		for i := range b {
			if b[i] != tx[i] {
				t.Fatalf("key %v leg %d: binary %s, text %s", k, i, b[i], tx[i])
			}
		}
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		if _, _, err := read(mode, `SELECT 'a', 'X', 1::bigint, 1::bigint, 0, NULL::numeric, 1::numeric WHERE $1::text[] IS NOT NULL`); err == nil {
			t.Errorf("mode %v: a NULL quantity was read", mode)
		}
	}
}

func fmtLeg(seq, tradeSeq int64, leg int, qc string, qe int32, pc string, pe int32) string {
	return fmt.Sprintf("%d/%d/%d %sE%d @ %sE%d", seq, tradeSeq, leg, qc, qe, pc, pe)
}

// TestFillRowNum: a leg converted for the fold (fillRow.num), from the
// amounts prepare converted (numsOf) or from the trade's decimals, is
// exactly position.Fill's conversion of the signed leg (Fill.Num of the
// quantity, negated for the sell leg): same coefficients and exponents,
// small or big.
func TestFillRowNum(t *testing.T) {
	for i, v := range append(sampleDecimals(7, 200), "0", "0.000", "-1.5", "123456789012345678901234567890.25", "9223372036854775807", "-9223372036854775808") {
		for leg := range 2 {
			tr := &wire.Trade{Seq: int64(i), TradeSeq: int64(7 * i), Quantity: decimal.RequireFromString(v), Price: decimal.RequireFromString(v).Add(decimal.New(1, -2))}
			q := tr.Quantity
			if leg == 1 {
				q = q.Neg()
			}
			want := position.Fill{Seq: tr.Seq, TradeSeq: tr.TradeSeq, Leg: leg, Quantity: q, Price: tr.Price}.Num()
			for _, n := range []*tradeNums{nil, &numsOf([]wire.Event{{Trade: tr}}, 1)[0]} {
				got := fillRow{t: tr, leg: leg, n: n}.num()
				if fmtNumFill(got) != fmtNumFill(want) {
					t.Fatalf("%s, leg %d, prepared %v: num() = %s, Fill.Num() = %s", v, leg, n != nil, fmtNumFill(got), fmtNumFill(want))
				}
			}
		}
	}
}

func fmtNumFill(f position.NumFill) string {
	q, p := f.Quantity.Decimal(), f.Price.Decimal()
	return fmtLeg(f.Seq, f.TradeSeq, f.Leg, q.Coefficient().String(), q.Exponent(), p.Coefficient().String(), p.Exponent())
}
