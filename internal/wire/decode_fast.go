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

package wire

import (
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"
)

// Decode parses protocol-v1 bytes. It accepts exactly the bytes Encode
// produces for some event and returns that event; it refuses everything else
// with a *DecodeError (decodeReference, decode.go, lists the rules):
//   - anything that is not one JSON object, or is larger than MaxEventBytes;
//   - an unknown "type" (wrapping ErrUnknownType), unknown or missing fields;
//   - amounts not JSON strings in canonical decimal spelling;
//   - sequences not JSON integers >= 1; timestamps not in TimeLayout;
//   - bytes that decode to a valid event but are not exactly Encode of it
//     (wrapping ErrNonCanonical).
//
// decodeFast answers first, only for canonical bytes decodeReference would
// accept with an equal event, and declines anything else to decodeReference
// on the same bytes: every error is decodeReference's, unchanged
// (docs/design/decoding.md, "Events").
func Decode(b []byte) (Event, error) {
	if e, ok := decodeFast(b); ok {
		return e, nil
	}
	return decodeReference(b)
}

// decodeFast accepts b only if b == Encode(e) for the returned e; otherwise it
// reports false and the caller falls back to decodeReference. It checks the
// canonical layout literally, in Encode's key order:
//
//	{"type":"<t>","seq":<int>,"<key>":<value>,...}
//
// Invariant: whatever it accepts, decodeReference accepts with an equal event
// (why: docs/design/decoding.md, "Events"); without it an event would decode
// differently depending on the path. Declining is always safe, so anything
// not obviously canonical (other escapes, 20-digit integers, long
// coefficients, out-of-range timestamps) declines.
// FuzzDecodeFastMatchesReference checks it.
func decodeFast(b []byte) (Event, bool) {
	if len(b) > MaxEventBytes {
		return Event{}, false
	}
	p := fastParser{b: b}
	switch {
	case p.lit(`{"type":"trade","seq":`):
		return p.trade()
	case p.lit(`{"type":"order","seq":`):
		return p.order()
	case p.lit(`{"type":"opening","seq":`):
		return p.opening()
	}
	return Event{}, false
}

// fastParser scans b forward. bad is sticky: once set, every method returns
// zero values and the event is declined.
type fastParser struct {
	b   []byte
	i   int
	bad bool
}

// span is a string field's raw content in b (between the quotes). esc: it
// contains escapes; ascii: it contains no byte >= 0x80 (no UTF-8 check needed).
type span struct {
	from, to   int
	esc, ascii bool
}

func (p *fastParser) lit(s string) bool {
	if p.bad || len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// key consumes a literal that must be there (a key with its punctuation).
func (p *fastParser) key(s string) {
	if !p.lit(s) {
		p.bad = true
	}
}

// end requires the closing brace as the last byte.
func (p *fastParser) end() {
	if !p.lit("}") || p.i != len(p.b) {
		p.bad = true
	}
}

// seq parses what strconv.AppendInt writes for a value >= 1 (checkSeq): a
// digit 1-9 then digits, at most 19 of them, within int64. Whatever follows is
// checked by the next literal (',' in every layout), so the JSON number token
// decodeReference's ParseInt sees is exactly these digits.
func (p *fastParser) seq() int64 {
	if p.bad {
		return 0
	}
	b, i := p.b, p.i
	if i >= len(b) || b[i] < '1' || b[i] > '9' {
		p.bad = true
		return 0
	}
	var v uint64
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		if i-start == 19 { // a 20th digit overflows int64: the reference reports it
			p.bad = true
			return 0
		}
		v = v*10 + uint64(b[i]-'0') // 19 digits < 1e19 < 2^64: no wrap-around
		i++
	}
	if v > 1<<63-1 {
		p.bad = true
		return 0
	}
	p.i = i
	return int64(v)
}

// str scans the rest of a JSON string (the opening quote is part of the key
// literal) as Encode's str writes it: bytes other than '"', '\' and control
// characters literally, '"' and '\' escaped with a backslash. It checks what
// checkString checks except UTF-8 validity, which strings checks on the
// unescaped bytes: non-empty, at most MaxStringLen unescaped bytes, no control
// character (< 0x20 or DEL; in valid UTF-8 every byte of a multi-byte rune is
// >= 0x80, so checking bytes is checking runes). json.Unmarshal decodes such
// a string to exactly the unescaped bytes (valid UTF-8 passes through
// unchanged). The closing quote is consumed.
func (p *fastParser) str() span {
	if p.bad {
		return span{}
	}
	b, i := p.b, p.i
	sp := span{from: i, ascii: true}
	escapes := 0
	for {
		for i < len(b) {
			c := b[i]
			if c == '"' || c == '\\' || c < 0x20 || c == 0x7f {
				break
			}
			if c >= utf8.RuneSelf {
				sp.ascii = false
			}
			i++
		}
		if i >= len(b) || b[i] < 0x20 || b[i] == 0x7f {
			p.bad = true // unterminated, or a control character
			return span{}
		}
		if b[i] == '"' {
			break
		}
		// b[i] == '\\': only the two escapes Encode writes.
		if i+1 >= len(b) || (b[i+1] != '"' && b[i+1] != '\\') {
			p.bad = true
			return span{}
		}
		escapes++
		i += 2
	}
	sp.to, sp.esc = i, escapes > 0
	p.i = i + 1
	if n := sp.to - sp.from - escapes; n == 0 || n > MaxStringLen {
		p.bad = true
		return span{}
	}
	return sp
}

// strings unescapes the spans into one buffer, checks each is valid UTF-8 and
// stores them into dst as substrings of one new string: an event's
// identifiers cost one allocation and never alias b (the caller may reuse b).
// It reports false (decline) on invalid UTF-8.
func (p *fastParser) strings(sps []span, dst []*string) bool {
	var arr [6 * MaxStringLen]byte // every event's identifiers fit; stays on the stack
	var ends [6]int
	buf := arr[:0]
	for k, sp := range sps {
		start := len(buf)
		raw := p.b[sp.from:sp.to]
		if !sp.esc {
			buf = append(buf, raw...)
		} else {
			for i := 0; i < len(raw); i++ {
				if raw[i] == '\\' { // str admitted only \" and \\: keep the next byte
					i++
				}
				buf = append(buf, raw[i])
			}
		}
		if !sp.ascii && !utf8.Valid(buf[start:]) {
			return false
		}
		ends[k] = len(buf)
	}
	s := string(buf)
	from := 0
	for k := range sps {
		*dst[k] = s[from:ends[k]]
		from = ends[k]
	}
	return true
}

// word consumes one of the given literal values (each including the closing
// quote) and returns it without the quote. Used for side and status, whose
// values are fixed ASCII words that need no escaping.
func (p *fastParser) word(ws ...string) string {
	for _, w := range ws {
		if p.lit(w) {
			return w[:len(w)-1]
		}
	}
	p.bad = true
	return ""
}

// dec parses the rest of an amount string (opening quote in the key literal)
// up to and including the closing quote. It accepts exactly the strings
// canonicalDecimal accepts (the grammar below mirrors it; a canonical string
// contains no '"' or '\', so there is nothing to unescape) and that satisfy
// rule, and builds the value as decimal.NewFromString does:
// coefficient = the digits without the point, with the sign; exponent = minus
// the number of fractional digits; for at most 18 characters besides the
// point the coefficient comes from big.NewInt (decimal.New), otherwise from
// NewFromString itself. canonicalLen of such a value is len(s) <= MaxDecimalLen
// (FormatDecimal reproduces a canonical string), so checkDecimal's length
// check passes.
func (p *fastParser) dec(rule signRule) decimal.Decimal {
	if p.bad {
		return decimal.Decimal{}
	}
	b := p.b
	n := p.i
	for n < len(b) && b[n] != '"' {
		n++
	}
	if n >= len(b) {
		p.bad = true
		return decimal.Decimal{}
	}
	s := b[p.i:n]
	p.i = n + 1
	if len(s) == 0 || len(s) > MaxDecimalLen {
		p.bad = true
		return decimal.Decimal{}
	}
	i := 0
	neg := s[0] == '-'
	if neg {
		i = 1
	}
	var v uint64 // the coefficient's magnitude; used only when it has <= 18 digits
	intStart := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		v = v*10 + uint64(s[i]-'0')
		i++
	}
	intLen := i - intStart
	if intLen == 0 || (intLen > 1 && s[intStart] == '0') {
		p.bad = true // no integer digits, or a leading zero
		return decimal.Decimal{}
	}
	fracLen := 0
	if i < len(s) {
		if s[i] != '.' {
			p.bad = true
			return decimal.Decimal{}
		}
		i++
		fracStart := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			v = v*10 + uint64(s[i]-'0')
			i++
		}
		fracLen = i - fracStart
		if i != len(s) || fracLen == 0 || s[len(s)-1] == '0' {
			p.bad = true // junk, a bare point, or a trailing zero
			return decimal.Decimal{}
		}
	}
	// With a fraction, the last digit is nonzero; without, the value is zero
	// exactly when s is "0" or "-0". So the value is zero iff s ends the
	// integer part with a single "0" and has no fraction.
	zero := fracLen == 0 && intLen == 1 && s[intStart] == '0'
	switch {
	case neg && zero: // "-0": not canonical
		p.bad = true
	case rule == signNonNegative && neg, rule == signPositive && (neg || zero):
		p.bad = true // validateEvent refuses; the reference words the error
	case fracLen > decimal.MaxDecodeExponent, -fracLen > decimal.MaxDecodeExponent: // NewFromString would refuse (exponent -fracLen)
		p.bad = true
	}
	if p.bad {
		return decimal.Decimal{}
	}
	numLen := len(s) // NewFromString's shortcut bound: length without the point
	if fracLen > 0 {
		numLen--
	}
	if numLen <= 18 {
		c := int64(v) // <= 18 digits: < 1e18, no overflow
		if neg {
			c = -c
		}
		return decimal.New(c, int32(-fracLen))
	}
	d, err := decimal.NewFromString(string(s))
	if err != nil { // not reached for a canonical string; decline anyway
		p.bad = true
	}
	return d
}

// ts parses the rest of a timestamp string (opening quote in the key literal)
// and its closing quote. It accepts only the 30-byte TimeLayout spelling with
// every field in the range time.Parse accepts (month 1-12, day within the
// month, hour < 24, minute and second < 60) and with checkTime's conditions
// (year 1..9999, not the zero Time). For those, time.Parse(TimeLayout, s)
// returns time.Date(fields..., time.UTC), exactly what is built here, and
// Format(TimeLayout) gives s back (four-digit year, zero-padded fields, nine
// fractional digits), so decodeReference's round-trip check passes.
func (p *fastParser) ts() time.Time {
	const n = len(TimeLayout) // 2006-01-02T15:04:05.000000000Z
	b := p.b[p.i:]
	if p.bad || len(b) < n+1 || b[n] != '"' ||
		b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[19] != '.' || b[29] != 'Z' {
		p.bad = true
		return time.Time{}
	}
	num := func(from, to int) int {
		v := 0
		for _, c := range b[from:to] {
			if c < '0' || c > '9' {
				p.bad = true
				return 0
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 7), num(8, 10)
	hour, minute, sec, nsec := num(11, 13), num(14, 16), num(17, 19), num(20, 29)
	if p.bad || year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 ||
		(year == 1 && month == 1 && day == 1 && hour == 0 && minute == 0 && sec == 0 && nsec == 0) { // IsZero: "missing"
		p.bad = true
		return time.Time{}
	}
	p.i += n + 1
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
}

// daysIn is the number of days of month in year (proleptic Gregorian, as the
// time package).
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

func (p *fastParser) trade() (Event, bool) {
	t := Trade{Seq: p.seq()}
	p.key(`,"tradeId":"`)
	tradeID := p.str()
	p.key(`,"tradeSeq":`)
	t.TradeSeq = p.seq()
	p.key(`,"instrument":"`)
	instrument := p.str()
	p.key(`,"price":"`)
	t.Price = p.dec(signPositive)
	p.key(`,"quantity":"`)
	t.Quantity = p.dec(signPositive)
	p.key(`,"buyOrderId":"`)
	buyOrder := p.str()
	p.key(`,"sellOrderId":"`)
	sellOrder := p.str()
	p.key(`,"buyAccount":"`)
	buyAccount := p.str()
	p.key(`,"sellAccount":"`)
	sellAccount := p.str()
	p.key(`,"ts":"`)
	t.TS = p.ts()
	p.end()
	if p.bad {
		return Event{}, false
	}
	if !p.strings([]span{tradeID, instrument, buyOrder, sellOrder, buyAccount, sellAccount},
		[]*string{&t.TradeID, &t.Instrument, &t.BuyOrderID, &t.SellOrderID, &t.BuyAccount, &t.SellAccount}) {
		return Event{}, false
	}
	return Event{Type: TypeTrade, Trade: &t}, true
}

func (p *fastParser) order() (Event, bool) {
	o := Order{Seq: p.seq()}
	p.key(`,"orderId":"`)
	orderID := p.str()
	p.key(`,"version":`)
	o.Version = p.seq()
	p.key(`,"account":"`)
	account := p.str()
	p.key(`,"instrument":"`)
	instrument := p.str()
	p.key(`,"side":"`)
	o.Side = Side(p.word(`BUY"`, `SELL"`))
	p.key(`,"price":"`)
	o.Price = p.dec(signPositive)
	p.key(`,"quantity":"`)
	o.Quantity = p.dec(signPositive)
	p.key(`,"remaining":"`)
	o.Remaining = p.dec(signNonNegative)
	p.key(`,"status":"`)
	o.Status = OrderStatus(p.word(`NEW"`, `PARTIALLY_FILLED"`, `FILLED"`, `CANCELLED"`))
	p.key(`,"ts":"`)
	o.TS = p.ts()
	p.end()
	// The same comparison validateEvent makes.
	if p.bad || o.Remaining.Cmp(o.Quantity) > 0 {
		return Event{}, false
	}
	if !p.strings([]span{orderID, account, instrument}, []*string{&o.OrderID, &o.Account, &o.Instrument}) {
		return Event{}, false
	}
	return Event{Type: TypeOrder, Order: &o}, true
}

func (p *fastParser) opening() (Event, bool) {
	o := Opening{Seq: p.seq()}
	p.key(`,"account":"`)
	account := p.str()
	p.key(`,"instrument":"`)
	instrument := p.str()
	p.key(`,"quantity":"`)
	o.Quantity = p.dec(signAny)
	p.key(`,"avgCost":"`)
	o.AvgCost = p.dec(signNonNegative)
	p.end()
	if p.bad {
		return Event{}, false
	}
	if !p.strings([]span{account, instrument}, []*string{&o.Account, &o.Instrument}) {
		return Event{}, false
	}
	return Event{Type: TypeOpening, Opening: &o}, true
}
