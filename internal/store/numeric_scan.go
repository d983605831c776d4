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
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/position"
)

// numScan scans a numeric column straight into a decimal: pgx decodes the
// binary value into a coefficient and an exponent (pgtype.NumericScanner)
// and the decimal takes them as they are. Scanning into *decimal.Decimal
// itself goes through database/sql's Scanner, which formats the value as
// text and parses it back (docs/design/page-transaction.md, "Planner and
// driver guards").
//
// The value is exact; the exponent may differ from the text route's (an
// integer with trailing zeros and no display scale, 10000, comes as 1E4; a
// zero as 0 whatever its display scale). It is used only where the value
// alone matters: the retained legs derive folds (sums, whose exponent is
// decided by the key's start, scanned as text, and the page's legs; averages,
// rounded to position.Places) and the retained orders checkOrders compares
// with Equal. Never for a value written back as read.
type numScan struct{ d *decimal.Decimal }

func (s numScan) ScanNumeric(n pgtype.Numeric) error {
	if err := finiteNumeric(n); err != nil {
		return err
	}
	*s.d = decimal.NewFromBigInt(n.Int, n.Exp)
	return nil
}

// finiteNumeric refuses NULL, NaN and infinities where a number is required.
func finiteNumeric(n pgtype.Numeric) error {
	switch {
	case !n.Valid:
		return fmt.Errorf("store: NULL where a number is required")
	case n.NaN || n.InfinityModifier != pgtype.Finite:
		return fmt.Errorf("store: numeric NaN or infinity where a finite number is required")
	}
	return nil
}

// decodeNumeric decodes a numeric in PostgreSQL's binary format into the
// coefficient and exponent pgx's own decoding gives (numScan's: with a
// display scale, exponent = −scale; without, an integer with its trailing
// zeros moved into the exponent; a zero as 0), without a big.Int when the
// coefficient fits an int64, and through pgx when it does not.
// TestDecodeNumeric_SameAsPgx holds the equality over values read from a
// real server. NULL, NaN and infinities are refused, as numScan refuses them.
func decodeNumeric(src []byte) (position.Num, error) {
	if src == nil {
		return position.Num{}, fmt.Errorf("store: NULL where a number is required")
	}
	if len(src) < 8 {
		return position.Num{}, fmt.Errorf("store: numeric of %d bytes", len(src))
	}
	ndigits := int(binary.BigEndian.Uint16(src))
	weight := int(int16(binary.BigEndian.Uint16(src[2:])))
	sign := binary.BigEndian.Uint16(src[4:])
	dscale := int(int16(binary.BigEndian.Uint16(src[6:])))
	switch sign {
	case 0xC000, 0xD000, 0xF000:
		return position.Num{}, fmt.Errorf("store: numeric NaN or infinity where a finite number is required")
	}
	if ndigits == 0 {
		return position.NumFromParts(0, 0), nil
	}
	if len(src) != 8+2*ndigits {
		return position.Num{}, fmt.Errorf("store: numeric of %d digits in %d bytes", ndigits, len(src))
	}
	slow := func() (position.Num, error) {
		var d decimal.Decimal // a Map per call: a Map's plan cache is not safe for concurrent use
		if err := pgtype.NewMap().Scan(pgtype.NumericOID, pgtype.BinaryFormatCode, src, numScan{&d}); err != nil {
			return position.Num{}, err
		}
		return position.NumOf(d), nil
	}
	var v uint64
	for i := 0; i < ndigits; i++ {
		hi, lo := bits.Mul64(v, 10000)
		digit := uint64(binary.BigEndian.Uint16(src[8+2*i:]))
		sum, carry := bits.Add64(lo, digit, 0)
		if hi != 0 || carry != 0 {
			return slow()
		}
		v = sum
	}
	exp := (weight - ndigits + 1) * 4
	if dscale > 0 {
		frac := (ndigits - weight - 1) * 4
		for ; dscale > frac; frac++ {
			hi, lo := bits.Mul64(v, 10)
			if hi != 0 {
				return slow()
			}
			v, exp = lo, exp-1
		}
		for ; dscale < frac; frac-- {
			v, exp = v/10, exp+1
		}
	}
	if exp >= 0 && v != 0 {
		for v%10 == 0 {
			v, exp = v/10, exp+1
		}
	}
	if v > math.MaxInt64 || exp > math.MaxInt32 || exp < math.MinInt32 {
		return slow()
	}
	c := int64(v)
	if sign != 0 {
		c = -c
	}
	return position.NumFromParts(c, int32(exp)), nil
}
