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

package recon

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// Fields is a primitive key/value view of a record (identity, before,
// expected, after): strings only, so it is canonical in JSON (sorted keys),
// comparable, scrubbable and safe to audit. Decimals are their exact canonical
// strings, timestamps RFC 3339 with nanoseconds, absent optional values "".
// A nil Fields means the record is absent.
type Fields map[string]string

// Equal compares two Fields; nil and empty differ (absent vs present).
func (f Fields) Equal(o Fields) bool { return f.equalExcept(o, nil) }

// equalExcept compares ignoring the keys in skip.
func (f Fields) equalExcept(o Fields, skip map[string]bool) bool {
	if (f == nil) != (o == nil) {
		return false
	}
	n := 0
	for k, v := range f {
		if skip[k] {
			continue
		}
		n++
		if w, ok := o[k]; !ok || w != v {
			return false
		}
	}
	m := 0
	for k := range o {
		if !skip[k] {
			m++
		}
	}
	return n == m
}

func (f Fields) clone() Fields {
	if f == nil {
		return nil
	}
	c := make(Fields, len(f))
	for k, v := range f {
		c[k] = v
	}
	return c
}

// canonical renders sorted k=v pairs joined by ",".
func (f Fields) canonical() string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(f[k])
	}
	return b.String()
}

// Record names one record: its table and primitive identity.
type Record struct {
	Table    string `json:"table"`
	Identity Fields `json:"identity"`
}

// Key is the record's stable key ("table/k=v,..."): findings of one record
// share it, its action is named by it, verification matches on it.
func (r Record) Key() string { return r.Table + "/" + r.Identity.canonical() }

// Finding is one violated invariant on one record. It copies the invariant's
// statement and guidance so a report is actionable on its own.
type Finding struct {
	ID        string      `json:"id"` // invariant@record key: stable across reads
	Invariant InvariantID `json:"invariant"`
	Kind      Kind        `json:"kind"`
	Statement string      `json:"statement"`
	Guidance  string      `json:"guidance"`
	Strategy  ActionKind  `json:"strategy"`
	Record    Record      `json:"record"`
	Before    Fields      `json:"before"`   // SQL side (nil: absent)
	Expected  Fields      `json:"expected"` // what the source proves (nil: absent)
	Detail    string      `json:"detail,omitempty"`
	RootCause RootCause   `json:"rootCause"`
	// Related are record keys whose repair must wait for this finding (a
	// trade drift blocks the re-derivation of both its keys).
	Related []string `json:"related,omitempty"`
	// Redacted: a secret was scrubbed from the identity: always manual (a
	// security incident, not a cache repair). ValuesRedacted: from before or
	// expected: manual too, since an action would write the redacted text.
	Redacted       bool `json:"redacted,omitempty"`
	ValuesRedacted bool `json:"valuesRedacted,omitempty"`
}

// dec is the canonical exact string of a decimal (trailing zeros trimmed,
// never a float).
func dec(d decimal.Decimal) string { return d.String() }

// places is the number of significant decimal places of d (trailing zeros do
// not count: numeric keeps no canonical scale).
func places(d decimal.Decimal) int {
	s := d.String()
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return len(s) - i - 1
	}
	return 0
}

// MaxPlaces is the precision of every derived amount (position.Places); a
// value with more places than this was not produced by the derivation.
const MaxPlaces = 12

// overPrecise reports whether any of ds has more than MaxPlaces places.
func overPrecise(ds ...decimal.Decimal) bool {
	for _, d := range ds {
		if places(d) > MaxPlaces {
			return true
		}
	}
	return false
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func optSeq(p *int64) string {
	if p == nil {
		return ""
	}
	return itoa(*p)
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// tsSQL is the SQL representation of a source timestamp: timestamptz keeps
// microseconds and the writers truncate (never round) the nanoseconds, so the
// reviewed comparator is "row ts == source ts truncated to the microsecond"
// (as internal/store's page_prepare.go). Comparing at nanoseconds would flag
// every correct row.
func tsSQL(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// tsRounded: the row holds the source ts rounded, not truncated, to the
// microsecond (a writer that rounds): evidence for timestamp_rounded.
func tsRounded(row, src time.Time) bool {
	r := src.UTC().Round(time.Microsecond)
	return row.Equal(r) && !r.Equal(tsSQL(src))
}

func boolStr(b bool) string { return strconv.FormatBool(b) }
