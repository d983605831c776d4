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
	"strings"

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
//
// Identifiers (order and trade ids) get a table of their own with a much
// larger bound: each id repeats across order_events, orders, trades and the
// source's events (five to six copies of an order id), so sharing them is
// one of the larger savings of a big read. The table only lives for one
// Read and never holds more entries than the snapshot holds ids.
type interner struct {
	strs map[string]string
	ids  map[string]string
	decs map[decKey]decimal.Decimal
}

// idLimit bounds the identifier table (entries); past it each id is kept as
// its own copy.
const idLimit = 1 << 23

type decKey struct {
	coef int64
	exp  int32
}

func newInterner() *interner {
	return &interner{strs: map[string]string{}, ids: map[string]string{}, decs: map[decKey]decimal.Decimal{}}
}

// sizeIDs allocates the identifier table for n ids (a trade id per trade,
// an order id per order: the SQL side's exact counts, which a clean source
// repeats) before any is added. Grown by inserts instead, the table splits
// as it fills and averages far below its load limit: sized once, it holds
// the same ids in about a quarter less memory, alive for the whole read,
// where the read's heap peaks. An empty table only: it never drops entries.
func (in *interner) sizeIDs(n int64) {
	if len(in.ids) == 0 && n > 0 {
		in.ids = make(map[string]string, min(n, idLimit))
	}
}

// strsIn interns several strings of their own in place (the SQL side).
func (in *interner) strsIn(ps ...*string) {
	for _, p := range ps {
		*p = intern(in.strs, internLimit, *p, false)
	}
}

// idsIn interns several identifiers of their own in place (the SQL side).
func (in *interner) idsIn(ps ...*string) {
	for _, p := range ps {
		*p = intern(in.ids, idLimit, *p, false)
	}
}

// decodedStrsIn and decodedIDsIn intern strings the wire decoder returned.
// It returns every identifier of an event as a slice of ONE string per
// event, so a value not shared yet is cloned: keeping the slice would pin
// the event's whole text (its other fields included) for the snapshot's
// life.
func (in *interner) decodedStrsIn(ps ...*string) {
	for _, p := range ps {
		*p = intern(in.strs, internLimit, *p, true)
	}
}

func (in *interner) decodedIDsIn(ps ...*string) {
	for _, p := range ps {
		*p = intern(in.ids, idLimit, *p, true)
	}
}

func intern(m map[string]string, limit int, s string, clone bool) string {
	if v, ok := m[s]; ok {
		return v
	}
	if clone {
		s = strings.Clone(s)
	}
	if len(m) < limit {
		m[s] = s
	}
	return s
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
