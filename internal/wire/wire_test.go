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
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

var ts = time.Date(2026, 3, 4, 5, 6, 7, 890, time.UTC)

func sampleEvents() []Event {
	d := decimal.RequireFromString
	return []Event{
		{Type: TypeOpening, Opening: &Opening{Seq: 1, Account: "acct-1", Instrument: "BTC-USD", Quantity: d("-2.50"), AvgCost: d("100.125")}},
		{Type: TypeOrder, Order: &Order{Seq: 2, OrderID: "o-1", Version: 1, Account: "acct-1", Instrument: "BTC-USD", Side: SideBuy,
			Price: d("101"), Quantity: d("3"), Remaining: d("3"), Status: StatusNew, TS: ts}},
		{Type: TypeTrade, Trade: &Trade{Seq: 3, TradeID: "t-1", TradeSeq: 1, Instrument: "BTC-USD", Price: d("101.000"), Quantity: d("0.0001"),
			BuyOrderID: "o-1", SellOrderID: "o-2", BuyAccount: "acct-1", SellAccount: "acct-2", TS: ts}},
	}
}

// The exact bytes are part of protocol v1: other implementations hash them (FR-APR03).
func TestWire_EncodeGoldenBytes(t *testing.T) {
	want := []string{
		`{"type":"opening","seq":1,"account":"acct-1","instrument":"BTC-USD","quantity":"-2.5","avgCost":"100.125"}`,
		`{"type":"order","seq":2,"orderId":"o-1","version":1,"account":"acct-1","instrument":"BTC-USD","side":"BUY","price":"101","quantity":"3","remaining":"3","status":"NEW","ts":"2026-03-04T05:06:07.000000890Z"}`,
		`{"type":"trade","seq":3,"tradeId":"t-1","tradeSeq":1,"instrument":"BTC-USD","price":"101","quantity":"0.0001","buyOrderId":"o-1","sellOrderId":"o-2","buyAccount":"acct-1","sellAccount":"acct-2","ts":"2026-03-04T05:06:07.000000890Z"}`,
	}
	for i, e := range sampleEvents() {
		t.Run(string(e.Type), func(t *testing.T) {
			got, err := Encode(e)
			if err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
			if string(got) != want[i] {
				t.Errorf("event %d:\n got %s\nwant %s", i, got, want[i])
			}
		})
	}
}

func TestWire_RoundTripAndDeterminism(t *testing.T) {
	for i, e := range sampleEvents() {
		t.Run(string(e.Type), func(t *testing.T) {
			b1, err := Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(b1)
			if err != nil {
				t.Fatalf("event %d: decode own encoding: %v", i, err)
			}
			if got.Type != e.Type || got.Seq() != e.Seq() {
				t.Fatalf("event %d: type/seq changed: %+v", i, got)
			}
			b2, err := Encode(got)
			if err != nil || !bytes.Equal(b1, b2) {
				t.Fatalf("event %d: re-encode differs (%v):\n%s\n%s", i, err, b1, b2)
			}
		})
	}
	// A non-UTC timestamp with the same instant encodes to the same bytes.
	e := sampleEvents()[1]
	o := *e.Order
	o.TS = ts.In(time.FixedZone("X", 3600))
	b1, _ := Encode(e)
	b2, _ := Encode(Event{Type: TypeOrder, Order: &o})
	if !bytes.Equal(b1, b2) {
		t.Fatalf("time zone leaked into the encoding:\n%s\n%s", b1, b2)
	}
}

func TestWire_FormatDecimalIgnoresPackageKnobs(t *testing.T) {
	cases := map[string]string{"1.50": "1.5", "-0.0": "0", "100": "100", "1e3": "1000", "0.000100": "0.0001", "-12.340": "-12.34", "1200e-2": "12"}
	for in, want := range cases {
		t.Run(in, func(t *testing.T) {
			if got := FormatDecimal(decimal.RequireFromString(in)); got != want {
				t.Errorf("FormatDecimal(%s) = %s, want %s", in, got, want)
			}
		})
	}
	old := decimal.UseScientificNotation
	decimal.UseScientificNotation = true
	defer func() { decimal.UseScientificNotation = old }()
	if got := FormatDecimal(decimal.New(5, 3)); got != "5000" {
		t.Errorf("with UseScientificNotation: %s", got)
	}
}

func TestWire_DecodeRefusals(t *testing.T) {
	good := `{"type":"trade","seq":3,"tradeId":"t-1","tradeSeq":1,"instrument":"BTC-USD","price":"101","quantity":"0.0001","buyOrderId":"o-1","sellOrderId":"o-2","buyAccount":"acct-1","sellAccount":"acct-2","ts":"2026-03-04T05:06:07.000000890Z"}`
	if _, err := Decode([]byte(good)); err != nil {
		t.Fatalf("good: %v", err)
	}
	cases := []struct {
		name, from, to, field string
		sentinel              error
	}{
		{"float amount", `"price":"101"`, `"price":101`, "price", nil},
		{"float amount with fraction", `"price":"101"`, `"price":101.5`, "price", nil},
		{"exponent", `"price":"101"`, `"price":"1.01e2"`, "price", nil},
		{"NaN", `"price":"101"`, `"price":"NaN"`, "price", nil},
		{"Infinity", `"price":"101"`, `"price":"Infinity"`, "price", nil},
		{"plus sign", `"price":"101"`, `"price":"+101"`, "price", nil},
		{"trailing zero", `"price":"101"`, `"price":"101.0"`, "price", nil},
		{"leading zero", `"price":"101"`, `"price":"0101"`, "price", nil},
		{"bare point", `"quantity":"0.0001"`, `"quantity":".0001"`, "quantity", nil},
		{"zero price", `"price":"101"`, `"price":"0"`, "price", nil},
		{"negative quantity", `"quantity":"0.0001"`, `"quantity":"-0.0001"`, "quantity", nil},
		{"seq as string", `"seq":3`, `"seq":"3"`, "seq", nil},
		{"seq zero", `"seq":3`, `"seq":0`, "seq", nil},
		{"seq float", `"seq":3`, `"seq":3.0`, "seq", nil},
		{"seq overflow", `"seq":3`, `"seq":99999999999999999999`, "seq", nil},
		{"millisecond ts", `.000000890Z`, `.000Z`, "ts", nil},
		{"offset ts", `.000000890Z`, `.000000890+00:00`, "ts", nil},
		{"unknown type", `"type":"trade"`, `"type":"fill"`, "type", ErrUnknownType},
		{"unknown field", `"tradeSeq":1,`, `"tradeSeq":1,"extra":1,`, "extra", nil},
		{"missing field", `"tradeSeq":1,`, ``, "tradeSeq", nil},
		{"empty id", `"tradeId":"t-1"`, `"tradeId":""`, "tradeId", nil},
		{"whitespace", `"seq":3,`, `"seq": 3,`, "", ErrNonCanonical},
		{"key order", `"tradeId":"t-1","tradeSeq":1,`, `"tradeSeq":1,"tradeId":"t-1",`, "", ErrNonCanonical},
		{"needless escape", `"tradeId":"t-1"`, `"tradeId":"t\u002d1"`, "", ErrNonCanonical},
		{"duplicate key", `"seq":3,`, `"seq":3,"seq":3,`, "", ErrNonCanonical},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := strings.Replace(good, c.from, c.to, 1)
			if in == good {
				t.Fatalf("replacement %q did not apply", c.from)
			}
			_, err := Decode([]byte(in))
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("want *DecodeError, got %v", err)
			}
			if de.Field != c.field {
				t.Errorf("field = %q, want %q (%v)", de.Field, c.field, err)
			}
			if c.sentinel != nil && !errors.Is(err, c.sentinel) {
				t.Errorf("want errors.Is %v, got %v", c.sentinel, err)
			}
		})
	}
	for _, tc := range []struct {
		name, junk string
	}{
		{"junk: empty", ""},
		{"junk: null", "null"},
		{"junk: array", "[]"},
		{"junk: string", `"x"`},
		{"junk: unterminated object", "{"},
		{"junk: numeric type", `{"type":1}`},
		{"junk: longer than MaxEventBytes", strings.Repeat(" ", MaxEventBytes+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var de *DecodeError
			if _, err := Decode([]byte(tc.junk)); !errors.As(err, &de) {
				t.Errorf("Decode(%q) = %v, want *DecodeError", tc.junk, err)
			}
		})
	}
}

func TestWire_EncodeRefusals(t *testing.T) {
	e := sampleEvents()[1]
	o := *e.Order
	o.Remaining = decimal.RequireFromString("4")
	o2 := *e.Order
	o2.Account = "a\nb"
	o3 := *e.Order
	o3.TS = time.Time{}
	bad := []struct {
		name string
		ev   Event
	}{
		{"empty event", Event{}},
		{"trade type carrying an order", Event{Type: TypeTrade, Order: e.Order}},
		{"unknown type", Event{Type: "fill", Order: e.Order}},
		{"order carrying a trade too", Event{Type: TypeOrder, Order: e.Order, Trade: sampleEvents()[2].Trade}},
		{"remaining above quantity", Event{Type: TypeOrder, Order: &o}},
		{"control character in a string", Event{Type: TypeOrder, Order: &o2}},
		{"zero timestamp", Event{Type: TypeOrder, Order: &o3}},
	}
	for i, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			var ee *EncodeError
			if _, err := Encode(b.ev); !errors.As(err, &ee) {
				t.Errorf("case %d: want *EncodeError, got %v", i, err)
			}
		})
	}
	if _, err := Encode(Event{Type: "fill", Order: e.Order}); !errors.Is(err, ErrUnknownType) {
		t.Errorf("unknown type: want ErrUnknownType, got %v", err)
	}
}

func TestWire_QuotesAndBackslashesRoundTrip(t *testing.T) {
	e := sampleEvents()[0]
	o := *e.Opening
	o.Account = `we"ird\acct ünï`
	b, err := Encode(Event{Type: TypeOpening, Opening: &o})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if got.Opening.Account != o.Account {
		t.Fatalf("account %q", got.Opening.Account)
	}
}

// FuzzDecode: Decode never panics, and whatever it accepts is exactly the
// canonical encoding of what it returned (one event, one byte string).
func FuzzDecode(f *testing.F) {
	for _, e := range sampleEvents() {
		b, _ := Encode(e)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error is not *DecodeError: %T %v", err, err)
			}
			return
		}
		out, err := Encode(e)
		if err != nil {
			t.Fatalf("accepted event does not encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("accepted non-canonical bytes:\n in %q\nout %q", b, out)
		}
		if e.Seq() < 1 {
			t.Fatalf("accepted seq %d", e.Seq())
		}
	})
}

func TestWire_CanonicalLenMatchesFormat(t *testing.T) {
	for _, s := range []string{"0", "1", "-1", "10", "1e5", "1.5", "-0.001", "123.456", "100.100", "1e-70", "-12e3", "0.1"} {
		t.Run(s, func(t *testing.T) {
			d := decimal.RequireFromString(s)
			if got, want := canonicalLen(d), int64(len(FormatDecimal(d))); got != want {
				t.Errorf("%s: canonicalLen %d, len(FormatDecimal) %d", s, got, want)
			}
		})
	}
	huge := decimal.New(1, 1<<30) // refused by length, never formatted
	if err := ValidateAmount(huge); err == nil {
		t.Fatal("1e(2^30) accepted")
	}
	if ValidateString("ok") != nil || ValidateString("") == nil || ValidateString("a\x00") == nil {
		t.Fatal("ValidateString")
	}
}
