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
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/shopspring/decimal"
)

// MaxEventBytes bounds one encoded event. Real events are a few hundred bytes.
const MaxEventBytes = 8 << 10

var fieldsByType = map[Type][]string{
	TypeOpening: {"type", "seq", "account", "instrument", "quantity", "avgCost"},
	TypeOrder:   {"type", "seq", "orderId", "version", "account", "instrument", "side", "price", "quantity", "remaining", "status", "ts"},
	TypeTrade:   {"type", "seq", "tradeId", "tradeSeq", "instrument", "price", "quantity", "buyOrderId", "sellOrderId", "buyAccount", "sellAccount", "ts"},
}

// decodeReference is the specification of Decode: it parses protocol-v1 bytes
// generically (encoding/json into a map), validates every field, re-encodes
// the event and compares bytes; every error Decode returns is produced here
// (docs/design/decoding.md, "Events"). It refuses, with *DecodeError:
//   - anything that is not one JSON object, or is larger than MaxEventBytes;
//   - an unknown "type" (wrapping ErrUnknownType), unknown or missing fields;
//   - amounts not JSON strings in canonical decimal spelling ("1e3", "NaN",
//     "+1", ".5", "1.50", "-0", JSON numbers: a number would pass through
//     float64, a second spelling give the same event a second digest);
//   - sequences that are not JSON integers >= 1;
//   - timestamps not in TimeLayout (UTC "Z", exactly nine fractional digits);
//   - bytes that decode to a valid event but are not exactly Encode of it
//     (wrapping ErrNonCanonical): reordered keys, whitespace, duplicate keys,
//     escaped characters that need no escape.
func decodeReference(b []byte) (Event, error) {
	if len(b) > MaxEventBytes {
		return Event{}, &DecodeError{Reason: "event larger than " + strconv.Itoa(MaxEventBytes) + " bytes"}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return Event{}, &DecodeError{Reason: "not a JSON object: " + err.Error()}
	}
	if raw == nil {
		return Event{}, &DecodeError{Reason: "not a JSON object: null"}
	}
	d := decoder{raw: raw}
	typ, ok := d.string("type")
	if !ok {
		return Event{}, d.err
	}
	fields, known := fieldsByType[Type(typ)]
	if !known {
		return Event{}, &DecodeError{Field: "type", Reason: strconv.Quote(typ) + " is not a protocol-v1 type", Err: ErrUnknownType}
	}
	allowed := make(map[string]bool, len(fields))
	for _, f := range fields {
		allowed[f] = true
		if _, ok := raw[f]; !ok {
			return Event{}, &DecodeError{Field: f, Reason: "missing"}
		}
	}
	for k := range raw {
		if !allowed[k] {
			return Event{}, &DecodeError{Field: k, Reason: "unknown field for type " + typ}
		}
	}
	var e Event
	switch Type(typ) {
	case TypeOpening:
		o := &Opening{
			Seq:        d.int("seq"),
			Account:    d.str("account"),
			Instrument: d.str("instrument"),
			Quantity:   d.dec("quantity"),
			AvgCost:    d.dec("avgCost"),
		}
		e = Event{Type: TypeOpening, Opening: o}
	case TypeOrder:
		o := &Order{
			Seq:        d.int("seq"),
			OrderID:    d.str("orderId"),
			Version:    d.int("version"),
			Account:    d.str("account"),
			Instrument: d.str("instrument"),
			Side:       Side(d.str("side")),
			Price:      d.dec("price"),
			Quantity:   d.dec("quantity"),
			Remaining:  d.dec("remaining"),
			Status:     OrderStatus(d.str("status")),
			TS:         d.time("ts"),
		}
		e = Event{Type: TypeOrder, Order: o}
	case TypeTrade:
		t := &Trade{
			Seq:         d.int("seq"),
			TradeID:     d.str("tradeId"),
			TradeSeq:    d.int("tradeSeq"),
			Instrument:  d.str("instrument"),
			Price:       d.dec("price"),
			Quantity:    d.dec("quantity"),
			BuyOrderID:  d.str("buyOrderId"),
			SellOrderID: d.str("sellOrderId"),
			BuyAccount:  d.str("buyAccount"),
			SellAccount: d.str("sellAccount"),
			TS:          d.time("ts"),
		}
		e = Event{Type: TypeTrade, Trade: t}
	}
	if d.err != nil {
		return Event{}, d.err
	}
	if fe := validateEvent(e); fe != nil {
		return Event{}, &DecodeError{Field: fe.field, Reason: fe.reason, Err: fe.err}
	}
	canon, err := Encode(e)
	if err != nil { // unreachable: validateEvent passed
		return Event{}, &DecodeError{Reason: "re-encode: " + err.Error()}
	}
	if !bytes.Equal(canon, b) {
		return Event{}, &DecodeError{Reason: "bytes differ from the canonical encoding of the event", Err: ErrNonCanonical}
	}
	return e, nil
}

// decoder keeps the first error so the field list above stays readable.
type decoder struct {
	raw map[string]json.RawMessage
	err *DecodeError
}

func (d *decoder) fail(f, reason string) {
	if d.err == nil {
		d.err = &DecodeError{Field: f, Reason: reason}
	}
}

func (d *decoder) string(f string) (string, bool) {
	r, ok := d.raw[f]
	if !ok {
		d.fail(f, "missing")
		return "", false
	}
	if len(r) == 0 || r[0] != '"' {
		d.fail(f, "must be a JSON string")
		return "", false
	}
	var s string
	if err := json.Unmarshal(r, &s); err != nil {
		d.fail(f, "invalid string: "+err.Error())
		return "", false
	}
	return s, true
}

func (d *decoder) str(f string) string {
	s, _ := d.string(f)
	return s
}

func (d *decoder) int(f string) int64 {
	r := d.raw[f]
	if len(r) == 0 || !(r[0] == '-' || (r[0] >= '0' && r[0] <= '9')) {
		d.fail(f, "must be a JSON integer")
		return 0
	}
	v, err := strconv.ParseInt(string(r), 10, 64)
	if err != nil {
		d.fail(f, "must be a JSON integer in int64 range")
		return 0
	}
	return v
}

// canonicalDecimal reports whether s is the FormatDecimal spelling of a value.
func canonicalDecimal(s string) bool {
	if s == "" || len(s) > MaxDecimalLen {
		return false
	}
	i := 0
	if s[0] == '-' {
		i = 1
	}
	intStart := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intLen := i - intStart
	if intLen == 0 || (intLen > 1 && s[intStart] == '0') {
		return false
	}
	if i == len(s) {
		return !(s[0] == '-' && s == "-0")
	}
	if s[i] != '.' {
		return false
	}
	i++
	fracStart := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i != len(s) || i == fracStart || s[len(s)-1] == '0' {
		return false
	}
	return true
}

func (d *decoder) dec(f string) decimal.Decimal {
	s, ok := d.string(f)
	if !ok {
		if r := d.raw[f]; len(r) > 0 && r[0] != '"' && d.err != nil && d.err.Field == f {
			d.err.Reason = "amount must be a decimal string, not a JSON " + jsonKind(r)
		}
		return decimal.Decimal{}
	}
	if !canonicalDecimal(s) {
		d.fail(f, "amount "+strconv.Quote(truncate(s))+" is not a canonical decimal string")
		return decimal.Decimal{}
	}
	v, err := decimal.NewFromString(s)
	if err != nil {
		d.fail(f, "amount: "+err.Error())
		return decimal.Decimal{}
	}
	return v
}

func (d *decoder) time(f string) time.Time {
	s, ok := d.string(f)
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse(TimeLayout, s)
	if err != nil || t.Format(TimeLayout) != s {
		d.fail(f, "timestamp "+strconv.Quote(truncate(s))+" is not UTC RFC3339 with nine fractional digits")
		return time.Time{}
	}
	return t
}

func jsonKind(r json.RawMessage) string {
	switch r[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
