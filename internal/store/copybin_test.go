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
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/shopspring/decimal"
)

// TestCopyBuf_SameAsPgx writes the same values twice into a real server:
// through copyBuf's binary COPY and through pgx's own parameter encoding
// (num, which the store used before), and compares what the server stored,
// as text (numeric's display scale included) and as values. Decimals cover
// zero at several scales, signs, every exponent modulo 4, positive
// exponents, coefficients at and past 18 digits, and random ones.
func TestCopyBuf_SameAsPgx(t *testing.T) {
	s := newStore(t)
	decs := sampleDecimals(12, 300)
	times := []time.Time{
		time.Date(2026, 12, 2, 7, 1, 2, 123456789, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(1969, 7, 20, 20, 17, 40, 500, time.FixedZone("x", -5*3600)),
		time.Unix(0, 0),
	}

	cb := getCopyBuf(8)
	defer putCopyBuf(cb)
	batch := &pgx.Batch{}
	const ins = `INSERT INTO copybin (src, kind, t, i, ip, b, ts, n) VALUES ($1, 'pgx', $2, $3, $4, $5, $6, $7)`
	for i, ds := range decs {
		d := decimal.RequireFromString(ds)
		text := strings.Repeat("é", i%3) + ds
		var ip *int64
		if i%2 == 0 {
			ip = i64(int64(-i))
		}
		ts := times[i%len(times)]
		cb.row()
		cb.text(ds)
		cb.text("copy")
		cb.text(text)
		cb.int8(int64(i) - 150)
		cb.int8p(ip)
		cb.boolean(i%3 == 0)
		cb.timestamptz(ts)
		cb.numeric(d)
		batch.Queue(ins, ds, text, int64(i)-150, ip, i%3 == 0, ts, num(d))
	}
	tx, err := s.pool.Begin(ctxb)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctxb) }()
	// A temporary table: the store's role creates those (page_trades), not tables.
	if _, err := tx.Exec(ctxb, `CREATE TEMP TABLE copybin (src text, kind text, t text, i bigint, ip bigint, b boolean, ts timestamptz, n numeric)`); err != nil {
		t.Fatal(err)
	}
	n, err := cb.send(ctxb, tx, `COPY copybin (src, kind, t, i, ip, b, ts, n) FROM STDIN (FORMAT binary)`)
	if err != nil {
		t.Fatal(err)
	}
	if int(n) != len(decs) {
		t.Fatalf("copied %d rows, want %d", n, len(decs))
	}
	if err := tx.SendBatch(ctxb, batch).Close(); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctxb, `
SELECT c.src, c.t, p.t, c.i, p.i, c.ip IS NOT DISTINCT FROM p.ip, c.b, p.b, c.ts = p.ts, c.n::text, p.n::text
  FROM copybin c JOIN copybin p ON p.src = c.src AND p.kind = 'pgx' WHERE c.kind = 'copy'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var src, ct, pt, cn, pn string
		var ci, pi int64
		var ipSame, cbo, pbo, tsSame bool
		if err := rows.Scan(&src, &ct, &pt, &ci, &pi, &ipSame, &cbo, &pbo, &tsSame, &cn, &pn); err != nil {
			t.Fatal(err)
		}
		seen++
		t.Run(src, func(t *testing.T) {
			if ct != pt || ci != pi || !ipSame || cbo != pbo || !tsSame {
				t.Errorf("copy and pgx stored different values: text %q/%q int %d/%d nullable same %v bool %v/%v ts same %v", ct, pt, ci, pi, ipSame, cbo, pbo, tsSame)
			}
			if cn != pn {
				t.Errorf("numeric: copy stored %s, pgx stored %s", cn, pn)
			}
			if !decimal.RequireFromString(cn).Equal(decimal.RequireFromString(src)) {
				t.Errorf("numeric: stored %s for %s", cn, src)
			}
		})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != len(decs) {
		t.Fatalf("compared %d rows, want %d", seen, len(decs))
	}
}

// sampleDecimals are the amounts the numeric round trips are checked on:
// zero at several scales, signs, every exponent modulo 4, integers with
// trailing zeros, coefficients at and past 18 digits, very small and very
// large magnitudes, then n random ones from seed.
func sampleDecimals(seed uint64, n int) []string {
	decs := []string{"0", "0.0", "0.00000", "-0.000", "1", "-1", "10", "1e3", "12e5", "0.5", "-0.5", "1.50", "1.0000",
		"123.4567", "0.0001", "0.00012", "-0.000000001", "9999", "10000", "99999999.99999999", "100000000",
		"123456789012345678", "-123456789012345678", "1234567890123456789", "-98765432109876543210.123456789",
		"0.000000000000000000000000000001", "1e-40", "5e40", "3.14159265358979323846264338327950288", "102.467052160601"}
	rng := rand.New(rand.NewPCG(seed, 2026))
	for range n {
		c := rng.Int64N(1_000_000_000_000) - 500_000_000_000
		decs = append(decs, decimal.New(c, int32(rng.IntN(24))-16).String())
	}
	return decs
}

// TestCopyBuf_Refuses: a malformed stream is never sent.
func TestCopyBuf_Refuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(*copyBuf)
		want  string
	}{
		{"short row", func(c *copyBuf) { c.row(); c.int8(1) }, "has 1 fields, want 2"},
		{"short row before another", func(c *copyBuf) { c.row(); c.int8(1); c.row(); c.int8(1); c.int8(2) }, "has 1 fields, want 2"},
		{"scale past numeric's", func(c *copyBuf) { c.row(); c.int8(1); c.numeric(decimal.New(1, -20000)) }, "scale 20000"},
		{"weight past numeric's", func(c *copyBuf) { c.row(); c.int8(1); c.numeric(decimal.New(1, 200000)) }, "out of PostgreSQL's range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := getCopyBuf(2)
			defer putCopyBuf(c)
			tc.build(c)
			_, err := c.send(ctxb, nil, "unused")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestCopyBuf_NoAllocations: encoding a row of the page's types allocates
// nothing once the buffer has grown (docs/performance.md, the store's allocation budget).
func TestCopyBuf_NoAllocations(t *testing.T) {
	c := getCopyBuf(6)
	defer putCopyBuf(c)
	d, ts, seq := decimal.RequireFromString("-1234.5678"), time.Now(), int64(7)
	row := func() {
		c.row()
		c.text("trade-123")
		c.int8(42)
		c.int8p(&seq)
		c.boolean(true)
		c.timestamptz(ts)
		c.numeric(d)
	}
	for range 1000 {
		row()
	}
	c.b = c.b[:len(copySignature)]
	if a := testing.AllocsPerRun(1000, row); a != 0 {
		t.Fatalf("%v allocations per row, want 0", a)
	}
}

// num is pgx's numeric for d, as the store encoded amounts before copyBuf.
func num(d decimal.Decimal) pgtype.Numeric {
	return pgtype.Numeric{Int: d.Coefficient(), Exp: d.Exponent(), Valid: true}
}
