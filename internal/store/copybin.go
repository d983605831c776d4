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
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"
)

// copyBuf builds one COPY ... FROM STDIN (FORMAT binary) stream from the
// page's own structs, field by field, without boxing a value per field
// (docs/design/page-transaction.md, "Encoding off the applying goroutine").
// Each field must be the type's binary send format, byte for byte what pgx
// sends for the same value, numeric scale included (copybin_test.go compares
// both on a real server): else a COPYed row would differ from the row the
// plain path writes.
type copyBuf struct {
	b      []byte
	fields int // fields per row, checked at every row
	n      int // fields written in the current row
	rows   int
	err    error
}

// copySignature is the binary COPY header: signature, flags, extension length.
var copySignature = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// pgEpochMicros is 2000-01-01T00:00:00Z in microseconds since the Unix epoch:
// the zero of PostgreSQL's timestamptz.
const pgEpochMicros = 946_684_800_000_000

// numericDScaleMax is PostgreSQL's NUMERIC_DSCALE_MAX.
const numericDScaleMax = 0x3FFF

// copyBufs keeps a few streams for reuse. A page's stream is up to ~1 MB;
// a sync.Pool would drop them at every GC and each page would grow a new
// one by doubling.
var copyBufs = make(chan *copyBuf, 8)

// getCopyBuf returns an empty stream of rows of fields fields; putCopyBuf
// gives it back once sent.
func getCopyBuf(fields int) *copyBuf {
	var c *copyBuf
	select {
	case c = <-copyBufs:
	default:
		c = new(copyBuf)
	}
	c.b = append(c.b[:0], copySignature...)
	c.fields, c.n, c.rows, c.err = fields, fields, 0, nil
	return c
}

func putCopyBuf(c *copyBuf) {
	if cap(c.b) > 16<<20 {
		return // one huge page must not pin its buffer for good
	}
	select {
	case copyBufs <- c:
	default:
	}
}

// row starts a row; the previous one must be complete.
func (c *copyBuf) row() {
	c.checkRow()
	c.b = binary.BigEndian.AppendUint16(c.b, uint16(c.fields))
	c.n = 0
	c.rows++
}

// checkRow records an error if the current row lacks fields (a stream that
// starts with no row passes: n starts at fields).
func (c *copyBuf) checkRow() {
	if c.n != c.fields && c.err == nil {
		c.err = fmt.Errorf("store: copy row %d has %d fields, want %d", c.rows, c.n, c.fields)
	}
}

func (c *copyBuf) field(length int) {
	c.n++
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(int32(length)))
}

func (c *copyBuf) null() { c.field(-1) }

// text: the binary form of text is its bytes (the server checks the
// encoding, as for any other client).
func (c *copyBuf) text(s string) {
	c.field(len(s))
	c.b = append(c.b, s...)
}

func (c *copyBuf) int8(v int64) {
	c.field(8)
	c.b = binary.BigEndian.AppendUint64(c.b, uint64(v))
}

// int8p writes NULL for nil.
func (c *copyBuf) int8p(v *int64) {
	if v == nil {
		c.null()
		return
	}
	c.int8(*v)
}

func (c *copyBuf) boolean(v bool) {
	c.field(1)
	if v {
		c.b = append(c.b, 1)
	} else {
		c.b = append(c.b, 0)
	}
}

// timestamptz: microseconds since 2000-01-01 UTC, nanoseconds truncated
// toward the past, as pgx encodes them (tsSQL's comparator relies on it).
func (c *copyBuf) timestamptz(t time.Time) {
	c.field(8)
	us := t.Unix()*1_000_000 + int64(t.Nanosecond())/1000 - pgEpochMicros
	c.b = binary.BigEndian.AppendUint64(c.b, uint64(us))
}

// numeric writes d in numeric's binary form: base-10,000 digits, the weight
// of the first, the sign and the display scale. The scale is max(0,
// -exponent), as pgx sends it, so the stored value prints the same whichever
// path wrote it. A coefficient of up to 18 digits (every amount the wire
// format carries in practice) is converted without allocating; a longer one
// goes through big.Int's digits.
func (c *copyBuf) numeric(d decimal.Decimal) {
	exp := d.Exponent()
	dscale := 0
	if exp < 0 {
		dscale = -int(exp)
	}
	if dscale > numericDScaleMax {
		c.fail(fmt.Errorf("store: numeric %s has scale %d, PostgreSQL allows %d", d, dscale, numericDScaleMax))
		return
	}
	sign := d.Sign()
	if sign == 0 {
		c.field(8)
		c.b = binary.BigEndian.AppendUint16(c.b, 0) // ndigits
		c.b = binary.BigEndian.AppendUint16(c.b, 0) // weight
		c.b = binary.BigEndian.AppendUint16(c.b, 0) // sign
		c.b = binary.BigEndian.AppendUint16(c.b, uint16(dscale))
		return
	}
	var tmp [24]byte
	var digits []byte
	if d.NumDigits() <= 18 {
		v := d.CoefficientInt64()
		if v < 0 {
			v = -v
		}
		digits = strconv.AppendUint(tmp[:0], uint64(v), 10)
	} else {
		x := d.Coefficient()
		digits = x.Abs(x).Append(tmp[:0], 10)
	}
	// Pad on the right so the last digit's exponent is a multiple of 4:
	// then every group of 4 decimal digits, counted from the right, is one
	// base-10,000 digit.
	r := int(((exp % 4) + 4) % 4)
	for range r {
		digits = append(digits, '0')
	}
	low := int64(exp) - int64(r) // exponent of the last decimal digit, a multiple of 4
	groups := (len(digits) + 3) / 4
	weight := low/4 + int64(groups) - 1
	if groups > math.MaxInt16 || weight > math.MaxInt16 || weight < math.MinInt16 {
		c.fail(fmt.Errorf("store: numeric %s is out of PostgreSQL's range", d))
		return
	}
	c.field(8 + 2*groups)
	c.b = binary.BigEndian.AppendUint16(c.b, uint16(groups))
	c.b = binary.BigEndian.AppendUint16(c.b, uint16(int16(weight)))
	if sign < 0 {
		c.b = binary.BigEndian.AppendUint16(c.b, 0x4000)
	} else {
		c.b = binary.BigEndian.AppendUint16(c.b, 0)
	}
	c.b = binary.BigEndian.AppendUint16(c.b, uint16(dscale))
	first := len(digits) - 4*(groups-1) // the first group may be short
	for g, at := 0, 0; g < groups; g++ {
		end := first
		if g > 0 {
			end = at + 4
		}
		var v uint16
		for ; at < end; at++ {
			v = v*10 + uint16(digits[at]-'0')
		}
		c.b = binary.BigEndian.AppendUint16(c.b, v)
	}
}

func (c *copyBuf) fail(err error) {
	if c.err == nil {
		c.err = err
	}
	c.null() // keep the row's shape; the stream is never sent
}

// send streams the rows with sql (a constant COPY ... FROM STDIN (FORMAT
// binary) naming the columns in the order they were written) inside tx and
// returns the rows the server copied. A stream without rows sends nothing.
func (c *copyBuf) send(ctx context.Context, tx pgx.Tx, sql string) (int64, error) {
	c.checkRow()
	if c.err != nil {
		return 0, c.err
	}
	if c.rows == 0 {
		return 0, nil // nothing to copy: spare the round trip
	}
	c.b = binary.BigEndian.AppendUint16(c.b, 0xFFFF) // trailer
	ct, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(c.b), sql)
	if err != nil {
		return 0, err
	}
	return ct.RowsAffected(), nil
}
