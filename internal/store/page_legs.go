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
	"bytes"
	"encoding/binary"
	"fmt"
	"math/big"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/projection-recovery/projection-recovery/internal/position"
)

// scanLegs reads derive's retained trade legs (account, instrument, seq,
// trade_seq, leg, quantity, price) into Nums, per key, counting the legs
// newer than the page (w.newer).
//
// A re-verification reads every retained leg newer than each page for every
// key the page touches, so this loop runs millions of times per page early
// in a long re-verification: it decodes the row's binary values itself
// (int8, int4, numeric through decodeNumeric) instead of pgx's Scan, which
// allocated a big.Int per numeric and spent a fifth of the store's CPU on
// reflection-driven scan plans. The key is converted to strings only when it
// changes (the query returns each key's legs together). A result not in
// binary format (a connection configured for the simple protocol, as behind
// a pooler in transaction mode) is read through Scan into the same
// coefficients and exponents (numOfNumeric).
func (w *pageTx) scanLegs(rows pgx.Rows) (map[key][]position.NumFill, error) {
	defer rows.Close()
	retained := map[key][]position.NumFill{}
	fds := rows.FieldDescriptions()
	raw := len(fds) == 7
	for i := 2; raw && i < 7; i++ {
		raw = fds[i].Format == pgtype.BinaryFormatCode
	}
	var (
		cur        key
		curA, curI []byte
		legs       []position.NumFill
		have       bool
	)
	flush := func() {
		if have {
			retained[cur] = legs
		}
	}
	for rows.Next() {
		var f position.NumFill
		var acct, instr []byte
		if raw {
			v := rows.RawValues()
			var err error
			acct, instr = v[0], v[1]
			if f, err = decodeLeg(v[2:]); err != nil {
				return nil, dbErr("store: decode retained trade", err)
			}
		} else {
			var a, i string
			var seq, tradeSeq int64
			var leg int
			var q, p pgtype.Numeric
			if err := rows.Scan(&a, &i, &seq, &tradeSeq, &leg, &q, &p); err != nil {
				return nil, dbErr("store: scan retained trade", err)
			}
			f.Seq, f.TradeSeq, f.Leg = seq, tradeSeq, leg
			var err error
			if f.Quantity, err = numOfNumeric(q); err == nil {
				f.Price, err = numOfNumeric(p)
			}
			if err != nil {
				return nil, dbErr("store: scan retained trade", err)
			}
			acct, instr = []byte(a), []byte(i)
		}
		if !have || !bytes.Equal(acct, curA) || !bytes.Equal(instr, curI) {
			flush()
			cur = key{account: string(acct), instrument: string(instr)}
			curA, curI = []byte(cur.account), []byte(cur.instrument)
			legs, have = retained[cur], true
		}
		legs = append(legs, f)
		if f.Seq > w.p.through {
			w.newer++
		}
	}
	flush()
	if err := rows.Err(); err != nil {
		return nil, dbErr("store: read retained trades", err)
	}
	return retained, nil
}

// decodeLeg decodes seq (int8), trade_seq (int8), leg (int4), quantity and
// price (numeric) from their binary values.
func decodeLeg(v [][]byte) (position.NumFill, error) {
	var f position.NumFill
	if len(v[0]) != 8 || len(v[1]) != 8 || len(v[2]) != 4 {
		return f, fmt.Errorf("store: retained trade leg with fields of %d, %d and %d bytes", len(v[0]), len(v[1]), len(v[2]))
	}
	f.Seq = int64(binary.BigEndian.Uint64(v[0]))
	f.TradeSeq = int64(binary.BigEndian.Uint64(v[1]))
	f.Leg = int(int32(binary.BigEndian.Uint32(v[2])))
	var err error
	if f.Quantity, err = decodeNumeric(v[3]); err != nil {
		return f, err
	}
	f.Price, err = decodeNumeric(v[4])
	return f, err
}

// numOfNumeric converts a numeric read in text format into the coefficient
// and exponent decodeNumeric gives for the same value in binary (pgx's text
// parse keeps "0.000" as 0E-3 and "10000" as 10000E0, its binary decoding
// gives 0E0 and 1E4): a zero has exponent 0, and an integer without a
// display scale has its trailing zeros in the exponent. Without it, a fold
// (whose sums take the smallest exponent) would store the same position
// spelled differently depending on the connection's protocol.
func numOfNumeric(n pgtype.Numeric) (position.Num, error) {
	if err := finiteNumeric(n); err != nil {
		return position.Num{}, err
	}
	c, e := n.Int, n.Exp
	switch {
	case c.Sign() == 0:
		return position.NumFromParts(0, 0), nil
	case e >= 0:
		c = new(big.Int).Set(c)
		ten, q, r := big.NewInt(10), new(big.Int), new(big.Int)
		for {
			q.QuoRem(c, ten, r)
			if r.Sign() != 0 {
				break
			}
			c.Set(q)
			e++
		}
	}
	return position.NumFromBig(c, e), nil
}
