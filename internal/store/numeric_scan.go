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

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/shopspring/decimal"
)

// numScan scans a numeric column straight into a decimal: pgx decodes the
// binary value into a coefficient and an exponent (pgtype.NumericScanner)
// and the decimal takes them as they are. Scanning into *decimal.Decimal
// itself goes through database/sql's Scanner, which formats the value as
// text and parses it back: ~20 % of the store's CPU when a re-verification
// reads every retained trade leg of every key a page touches.
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
	switch {
	case !n.Valid:
		return fmt.Errorf("store: NULL where a number is required")
	case n.NaN || n.InfinityModifier != pgtype.Finite:
		return fmt.Errorf("store: numeric NaN or infinity where a finite number is required")
	}
	*s.d = decimal.NewFromBigInt(n.Int, n.Exp)
	return nil
}
