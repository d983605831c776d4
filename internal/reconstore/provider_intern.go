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

package reconstore

import (
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/shopspring/decimal"
)

// internLimit bounds each intern table: past it values are kept as read
// (correct, only larger), so adversarial data cannot grow the table without
// bound beyond what the snapshot itself holds.
const internLimit = 1 << 16

// interner shares repeated values across the snapshot's rows: accounts,
// instruments, sides, statuses and small decimals (prices, quantities)
// repeat across hundreds of thousands of rows, and each copy would cost a
// string or a big.Int of its own. Without it a 1M-event snapshot holds
// about twice the heap (NFR: the read must stay within 1 GiB at 1M events).
// Sharing is safe: strings are immutable, and decimal.Decimal never mutates
// its coefficient (every operation returns a new value).
type interner struct {
	strs map[string]string
	decs map[decKey]decimal.Decimal
}

type decKey struct {
	coef int64
	exp  int32
}

func newInterner() *interner {
	return &interner{strs: map[string]string{}, decs: map[decKey]decimal.Decimal{}}
}

// str returns the shared copy of s.
func (in *interner) str(s string) string {
	if v, ok := in.strs[s]; ok {
		return v
	}
	if len(in.strs) < internLimit {
		in.strs[s] = s
	}
	return s
}

// strs interns several strings in place.
func (in *interner) strsIn(ps ...*string) {
	for _, p := range ps {
		*p = in.str(*p)
	}
}

// numeric converts a scanned numeric exactly, sharing small values. NaN and
// infinities have no decimal: the row is unreadable, never zero.
func (in *interner) numeric(n pgtype.Numeric) (decimal.Decimal, error) {
	d, err := dec(n)
	if err != nil || !n.Int.IsInt64() {
		return d, err
	}
	return in.shared(decKey{n.Int.Int64(), n.Exp}, d), nil
}

// decimal shares d when its coefficient fits an int64.
func (in *interner) decimal(d decimal.Decimal) decimal.Decimal {
	if d.NumDigits() > 18 {
		return d
	}
	return in.shared(decKey{d.CoefficientInt64(), d.Exponent()}, d)
}

func (in *interner) shared(k decKey, d decimal.Decimal) decimal.Decimal {
	if v, ok := in.decs[k]; ok {
		return v
	}
	if len(in.decs) < internLimit {
		in.decs[k] = d
	}
	return d
}

// numerics converts several numerics into dst, stopping at the first
// unreadable one.
func (in *interner) numerics(dst []*decimal.Decimal, src []pgtype.Numeric) error {
	for i := range dst {
		v, err := in.numeric(src[i])
		if err != nil {
			return err
		}
		*dst[i] = v
	}
	return nil
}
