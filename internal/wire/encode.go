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
	"errors"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"
)

// Encode returns the canonical protocol-v1 bytes of e. Key order per type:
//
//	opening: type, seq, account, instrument, quantity, avgCost
//	order:   type, seq, orderId, version, account, instrument, side, price, quantity, remaining, status, ts
//	trade:   type, seq, tradeId, tradeSeq, instrument, price, quantity, buyOrderId, sellOrderId, buyAccount, sellAccount, ts
//
// Encode refuses (with *EncodeError) any event Decode would refuse, so every
// encoded event round-trips.
func Encode(e Event) ([]byte, error) {
	if err := validateEvent(e); err != nil {
		return nil, &EncodeError{Field: err.field, Reason: err.reason, Err: err.err}
	}
	w := encoder{buf: make([]byte, 0, 320)}
	switch e.Type {
	case TypeOpening:
		o := e.Opening
		w.str("type", string(TypeOpening), true)
		w.int("seq", o.Seq)
		w.str("account", o.Account, false)
		w.str("instrument", o.Instrument, false)
		w.dec("quantity", o.Quantity)
		w.dec("avgCost", o.AvgCost)
	case TypeOrder:
		o := e.Order
		w.str("type", string(TypeOrder), true)
		w.int("seq", o.Seq)
		w.str("orderId", o.OrderID, false)
		w.int("version", o.Version)
		w.str("account", o.Account, false)
		w.str("instrument", o.Instrument, false)
		w.str("side", string(o.Side), false)
		w.dec("price", o.Price)
		w.dec("quantity", o.Quantity)
		w.dec("remaining", o.Remaining)
		w.str("status", string(o.Status), false)
		w.str("ts", FormatTime(o.TS), false)
	case TypeTrade:
		t := e.Trade
		w.str("type", string(TypeTrade), true)
		w.int("seq", t.Seq)
		w.str("tradeId", t.TradeID, false)
		w.int("tradeSeq", t.TradeSeq)
		w.str("instrument", t.Instrument, false)
		w.dec("price", t.Price)
		w.dec("quantity", t.Quantity)
		w.str("buyOrderId", t.BuyOrderID, false)
		w.str("sellOrderId", t.SellOrderID, false)
		w.str("buyAccount", t.BuyAccount, false)
		w.str("sellAccount", t.SellAccount, false)
		w.str("ts", FormatTime(t.TS), false)
	}
	w.buf = append(w.buf, '}')
	return w.buf, nil
}

// FormatTime is the canonical timestamp spelling (UTC, nine fractional digits).
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// FormatDecimal is the canonical amount spelling, independent of the
// shopspring package-level knobs (TrimTrailingZeros, UseScientificNotation):
// optional '-', integer part without leading zeros, and a fractional part
// without trailing zeros; zero is "0". Example: 1.50 → "1.5", -0.0 → "0".
func FormatDecimal(d decimal.Decimal) string {
	neg, digits, exp := canonicalParts(d)
	if digits == "0" {
		return "0"
	}
	var s string
	switch {
	case exp >= 0:
		s = digits + strings.Repeat("0", int(exp))
	case int64(len(digits)) > -exp:
		cut := len(digits) + int(exp)
		s = digits[:cut] + "." + digits[cut:]
	default:
		s = "0." + strings.Repeat("0", int(-exp)-len(digits)) + digits
	}
	if neg {
		s = "-" + s
	}
	return s
}

// canonicalParts returns sign, the coefficient digits without trailing zeros
// (when the exponent is negative) and the exponent: value = ±digits × 10^exp.
func canonicalParts(d decimal.Decimal) (neg bool, digits string, exp int64) {
	coef := new(big.Int).Set(d.Coefficient())
	exp = int64(d.Exponent())
	if coef.Sign() == 0 {
		return false, "0", 0
	}
	ten, rem := big.NewInt(10), new(big.Int)
	for exp < 0 {
		q, r := new(big.Int).QuoRem(coef, ten, rem)
		if r.Sign() != 0 {
			break
		}
		coef = q
		exp++
	}
	return coef.Sign() < 0, new(big.Int).Abs(coef).String(), exp
}

// canonicalLen is len(FormatDecimal(d)) computed without building the string,
// so absurd exponents are refused without allocating them.
func canonicalLen(d decimal.Decimal) int64 {
	neg, digits, exp := canonicalParts(d)
	n := int64(len(digits))
	switch {
	case digits == "0":
		return 1
	case exp >= 0:
		n += exp
	case n > -exp:
		n++ // the point
	default:
		n = 2 + -exp // "0." + zeros + digits
	}
	if neg {
		n++
	}
	return n
}

// ValidateString reports whether v is acceptable as an identifier field
// (account, instrument, order or trade id): non-empty, at most MaxStringLen
// bytes of valid UTF-8 without control characters. Producers (the engine's
// command validation) use it so that every accepted command encodes.
func ValidateString(v string) error {
	if fe := checkString("", v); fe != nil {
		return errors.New(fe.reason)
	}
	return nil
}

// ValidateAmount reports whether d's canonical spelling fits MaxDecimalLen.
func ValidateAmount(d decimal.Decimal) error {
	if fe := checkDecimal("", d, signAny); fe != nil {
		return errors.New(fe.reason)
	}
	return nil
}

type encoder struct{ buf []byte }

func (w *encoder) key(k string, first bool) {
	if first {
		w.buf = append(w.buf, '{')
	} else {
		w.buf = append(w.buf, ',')
	}
	w.buf = append(w.buf, '"')
	w.buf = append(w.buf, k...)
	w.buf = append(w.buf, '"', ':')
}

// str writes a JSON string. validateEvent has refused control characters and
// invalid UTF-8, so only '"' and '\' need escaping; everything else is literal.
func (w *encoder) str(k, v string, first bool) {
	w.key(k, first)
	w.buf = append(w.buf, '"')
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '"' || c == '\\' {
			w.buf = append(w.buf, '\\')
		}
		w.buf = append(w.buf, c)
	}
	w.buf = append(w.buf, '"')
}

func (w *encoder) int(k string, v int64) {
	w.key(k, false)
	w.buf = strconv.AppendInt(w.buf, v, 10)
}

// dec writes an amount as a JSON string, never a JSON number: a float64 on the
// consumer side would silently round it.
func (w *encoder) dec(k string, d decimal.Decimal) {
	w.key(k, false)
	w.buf = append(w.buf, '"')
	w.buf = append(w.buf, FormatDecimal(d)...)
	w.buf = append(w.buf, '"')
}

type fieldErr struct {
	field, reason string
	err           error
}

func validateEvent(e Event) *fieldErr {
	set := 0
	for _, p := range []bool{e.Opening != nil, e.Order != nil, e.Trade != nil} {
		if p {
			set++
		}
	}
	if set != 1 {
		return &fieldErr{"", "exactly one of Opening, Order, Trade must be set", nil}
	}
	switch e.Type {
	case TypeOpening:
		if e.Opening == nil {
			return &fieldErr{"type", "type opening without Opening", nil}
		}
		o := e.Opening
		return firstErr(
			checkSeq("seq", o.Seq),
			checkString("account", o.Account),
			checkString("instrument", o.Instrument),
			checkDecimal("quantity", o.Quantity, signAny),
			checkDecimal("avgCost", o.AvgCost, signNonNegative),
		)
	case TypeOrder:
		if e.Order == nil {
			return &fieldErr{"type", "type order without Order", nil}
		}
		o := e.Order
		if err := firstErr(
			checkSeq("seq", o.Seq),
			checkString("orderId", o.OrderID),
			checkSeq("version", o.Version),
			checkString("account", o.Account),
			checkString("instrument", o.Instrument),
			checkSide(o.Side),
			checkDecimal("price", o.Price, signPositive),
			checkDecimal("quantity", o.Quantity, signPositive),
			checkDecimal("remaining", o.Remaining, signNonNegative),
			checkStatus(o.Status),
			checkTime("ts", o.TS),
		); err != nil {
			return err
		}
		if o.Remaining.Cmp(o.Quantity) > 0 {
			return &fieldErr{"remaining", "exceeds quantity", nil}
		}
		return nil
	case TypeTrade:
		if e.Trade == nil {
			return &fieldErr{"type", "type trade without Trade", nil}
		}
		t := e.Trade
		return firstErr(
			checkSeq("seq", t.Seq),
			checkString("tradeId", t.TradeID),
			checkSeq("tradeSeq", t.TradeSeq),
			checkString("instrument", t.Instrument),
			checkDecimal("price", t.Price, signPositive),
			checkDecimal("quantity", t.Quantity, signPositive),
			checkString("buyOrderId", t.BuyOrderID),
			checkString("sellOrderId", t.SellOrderID),
			checkString("buyAccount", t.BuyAccount),
			checkString("sellAccount", t.SellAccount),
			checkTime("ts", t.TS),
		)
	}
	return &fieldErr{"type", strconv.Quote(string(e.Type)), ErrUnknownType}
}

func firstErr(errs ...*fieldErr) *fieldErr {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func checkSeq(f string, v int64) *fieldErr {
	if v < 1 {
		return &fieldErr{f, "must be >= 1", nil}
	}
	return nil
}

func checkString(f, v string) *fieldErr {
	switch {
	case v == "":
		return &fieldErr{f, "must not be empty", nil}
	case len(v) > MaxStringLen:
		return &fieldErr{f, "longer than " + strconv.Itoa(MaxStringLen) + " bytes", nil}
	case !utf8.ValidString(v):
		return &fieldErr{f, "not valid UTF-8", nil}
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return &fieldErr{f, "contains a control character", nil}
		}
	}
	return nil
}

type signRule int

const (
	signAny signRule = iota
	signNonNegative
	signPositive
)

func checkDecimal(f string, d decimal.Decimal, rule signRule) *fieldErr {
	if canonicalLen(d) > MaxDecimalLen {
		return &fieldErr{f, "longer than " + strconv.Itoa(MaxDecimalLen) + " characters", nil}
	}
	switch {
	case rule == signNonNegative && d.Sign() < 0:
		return &fieldErr{f, "must not be negative", nil}
	case rule == signPositive && d.Sign() <= 0:
		return &fieldErr{f, "must be positive", nil}
	}
	return nil
}

func checkSide(s Side) *fieldErr {
	if s != SideBuy && s != SideSell {
		return &fieldErr{"side", "must be BUY or SELL", nil}
	}
	return nil
}

func checkStatus(s OrderStatus) *fieldErr {
	switch s {
	case StatusNew, StatusPartiallyFilled, StatusFilled, StatusCancelled:
		return nil
	}
	return &fieldErr{"status", "must be NEW, PARTIALLY_FILLED, FILLED or CANCELLED", nil}
}

func checkTime(f string, t time.Time) *fieldErr {
	if t.IsZero() {
		return &fieldErr{f, "missing", nil}
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return &fieldErr{f, "year outside 0001..9999", nil}
	}
	return nil
}
