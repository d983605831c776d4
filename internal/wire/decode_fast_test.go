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

package wire_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// engineWire returns the wire bytes of the first n events the reference
// engine emits for a seeded workload (openings, order versions, trades).
func engineWire(tb testing.TB, seed uint64, n int) [][]byte {
	tb.Helper()
	w, err := engine.NewWorkload(seed, engine.WorkloadConfig{Accounts: 50, Instruments: []string{"BTC-USD", "ETH-USD"}, Openings: true})
	if err != nil {
		tb.Fatal(err)
	}
	e := engine.New(engine.TestDescriptor("wire-test"))
	var out [][]byte
	for len(out) < n {
		c := w.Next()
		c.Seq = e.LastSeq() + 1
		outs, err := e.Apply(c)
		if err != nil {
			tb.Fatal(err)
		}
		for _, o := range outs {
			out = append(out, o.Wire)
		}
	}
	return out[:n]
}

// fuzzCorpus reads the byte inputs of a `go test fuzz v1` corpus directory.
func fuzzCorpus(tb testing.TB, dir string) [][]byte {
	tb.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	for _, ent := range ents {
		raw, err := os.ReadFile(filepath.Join(dir, ent.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if q, ok := strings.CutPrefix(line, "[]byte("); ok && strings.HasSuffix(q, ")") {
				s, err := strconv.Unquote(strings.TrimSuffix(q, ")"))
				if err != nil {
					tb.Fatalf("%s: %v", ent.Name(), err)
				}
				out = append(out, []byte(s))
			}
		}
	}
	return out
}

const goodTrade = `{"type":"trade","seq":3,"tradeId":"t-1","tradeSeq":1,"instrument":"BTC-USD","price":"101","quantity":"0.0001","buyOrderId":"o-1","sellOrderId":"o-2","buyAccount":"acct-1","sellAccount":"acct-2","ts":"2026-03-04T05:06:07.000000890Z"}`
const goodOrder = `{"type":"order","seq":2,"orderId":"o-1","version":1,"account":"acct-1","instrument":"BTC-USD","side":"BUY","price":"101","quantity":"3","remaining":"3","status":"NEW","ts":"2026-03-04T05:06:07.000000890Z"}`
const goodOpening = `{"type":"opening","seq":1,"account":"acct-1","instrument":"BTC-USD","quantity":"-2.5","avgCost":"100.125"}`

// edgeInputs are canonical events at the edges of the fast path's grammar and
// near misses of each; the differential check decides them all.
func edgeInputs() []string {
	r := strings.Replace
	var out []string
	add := func(base string, pairs ...string) {
		for i := 0; i+1 < len(pairs); i += 2 {
			out = append(out, r(base, pairs[i], pairs[i+1], 1))
		}
	}
	out = append(out, goodTrade, goodOrder, goodOpening)
	add(goodTrade,
		`"seq":3`, `"seq":9223372036854775807`, `"seq":3`, `"seq":9223372036854775808`, `"seq":3`, `"seq":10000000000000000000`,
		`"seq":3`, `"seq":03`, `"seq":3`, `"seq":-3`, `"seq":3`, `"seq":0`, `"seq":3`, `"seq":3.0`, `"seq":3`, `"seq":3e0`,
		`"t-1"`, `"t\"1"`, `"t-1"`, `"t\\1"`, `"t-1"`, `"t\/1"`, `"t-1"`, `"t\u002d1"`, `"t-1"`, `"t\n1"`, `"t-1"`, "\"t\x7f1\"",
		`"t-1"`, "\"t\x011\"", `"t-1"`, `"ü€𝄞"`, `"t-1"`, "\"t\xff1\"", `"t-1"`, "\"t\xed\xa0\x80\"", `"t-1"`, `""`,
		`"t-1"`, `"`+strings.Repeat("x", 256)+`"`, `"t-1"`, `"`+strings.Repeat("x", 257)+`"`,
		`"t-1"`, `"`+strings.Repeat(`\"`, 256)+`"`, `"t-1"`, `"`+strings.Repeat(`\\`, 257)+`"`, `"t-1"`, "\"\u2028\"",
		`"101"`, `"123456789012345678"`, `"101"`, `"12345678901234567.8"`, `"101"`, `"1234567890123456789"`,
		`"101"`, `"123456789012345678.9"`, `"101"`, `"0.`+strings.Repeat("0", 61)+`1"`, `"101"`, `"0.`+strings.Repeat("0", 62)+`1"`,
		`"101"`, `"`+strings.Repeat("9", 64)+`"`, `"101"`, `"`+strings.Repeat("9", 65)+`"`, `"101"`, `"0"`, `"101"`, `"-1"`,
		`"101"`, `"1.0"`, `"101"`, `"01"`, `"101"`, `".1"`, `"101"`, `"1."`, `"101"`, `"1e2"`, `"101"`, `"+1"`, `"101"`, `"1\u0030"`,
		`"101"`, `101`, `"101"`, `"0.5"`, `"101"`, `"0.05"`, `"101"`, `"10.05"`, `"101"`, `"9223372036854775807"`,
		`2026-03-04T05:06:07.000000890Z`, `0001-01-01T00:00:00.000000000Z`, `2026-03-04T05:06:07.000000890Z`, `0001-01-01T00:00:00.000000001Z`,
		`2026-03-04T05:06:07.000000890Z`, `0000-06-01T00:00:00.000000000Z`, `2026-03-04T05:06:07.000000890Z`, `9999-12-31T23:59:59.999999999Z`,
		`2026-03-04T05:06:07.000000890Z`, `2024-02-29T00:00:00.000000000Z`, `2026-03-04T05:06:07.000000890Z`, `2023-02-29T00:00:00.000000000Z`,
		`2026-03-04T05:06:07.000000890Z`, `2000-02-29T00:00:00.000000000Z`, `2026-03-04T05:06:07.000000890Z`, `1900-02-29T00:00:00.000000000Z`,
		`2026-03-04T05:06:07.000000890Z`, `2026-04-31T00:00:00.000000000Z`, `2026-03-04T05:06:07.000000890Z`, `2026-13-01T00:00:00.000000000Z`,
		`2026-03-04T05:06:07.000000890Z`, `2026-00-01T00:00:00.000000000Z`, `2026-03-04T05:06:07.000000890Z`, `2026-01-00T00:00:00.000000000Z`,
		`2026-03-04T05:06:07.000000890Z`, `2026-01-01T24:00:00.000000000Z`, `2026-03-04T05:06:07.000000890Z`, `2026-01-01T23:60:00.000000000Z`,
		`2026-03-04T05:06:07.000000890Z`, `2026-01-01T23:59:60.000000000Z`, `2026-03-04T05:06:07.000000890Z`, `2026-01-01T23:59:59.00000000Z`,
		`2026-03-04T05:06:07.000000890Z`, `2026-01-01t23:59:59.000000000Z`, `2026-03-04T05:06:07.000000890Z`, `2026-01-01T23:59:59.000000000z`,
		`2026-03-04T05:06:07.000000890Z`, `+026-01-01T23:59:59.000000000Z`, `2026-03-04T05:06:07.000000890Z`, `2026-1-01T23:59:59.0000000000Z`,
		`"tradeSeq":1`, `"tradeSeq":1,"tradeSeq":1`, `}`, `} `, `{"type"`, ` {"type"`, `}`, `}}`,
	)
	add(goodOrder,
		`"BUY"`, `"SELL"`, `"BUY"`, `"buy"`, `"BUY"`, `"BU\u0059"`, `"NEW"`, `"FILLED"`, `"NEW"`, `"PARTIALLY_FILLED"`, `"NEW"`, `"CANCELLED"`,
		`"NEW"`, `"CANCELED"`, `"remaining":"3"`, `"remaining":"0"`, `"remaining":"3"`, `"remaining":"3.0000001"`, `"remaining":"3"`, `"remaining":"2.9999"`,
		`"remaining":"3"`, `"remaining":"-1"`, `"version":1`, `"version":0`,
	)
	add(goodOpening,
		`"-2.5"`, `"0"`, `"-2.5"`, `"-0"`, `"-2.5"`, `"-0.0"`, `"-2.5"`, `"-12345678901234567"`, `"-2.5"`, `"-123456789012345678"`,
		`"-2.5"`, `"-1234567890123456.7"`, `"-2.5"`, `"-12345678901234567.8"`, `"100.125"`, `"0"`, `"100.125"`, `"-1"`,
		`"opening"`, `"trade"`, `"opening"`, `"Opening"`,
	)
	return out
}

// checkFastMatchesReference is the differential property: Decode (fast path
// then fallback) answers exactly as decodeReference, and the fast path alone
// accepts only what the reference accepts, with a deeply equal event.
func checkFastMatchesReference(t *testing.T, b []byte) {
	t.Helper()
	in := bytes.Clone(b)
	ref, refErr := wire.DecodeReference(b)
	fast, fastOK := wire.DecodeFast(b)
	got, gotErr := wire.Decode(b)
	if !bytes.Equal(in, b) {
		t.Fatalf("input modified")
	}
	if fastOK && refErr != nil {
		t.Fatalf("fast path accepted what the reference refuses (%v):\n%q", refErr, b)
	}
	if (gotErr == nil) != (refErr == nil) {
		t.Fatalf("accept/reject differs: Decode %v, reference %v:\n%q", gotErr, refErr, b)
	}
	if refErr != nil {
		if gotErr.Error() != refErr.Error() || !reflect.DeepEqual(gotErr, refErr) {
			t.Fatalf("error differs:\n Decode    %#v\n reference %#v", gotErr, refErr)
		}
		for _, s := range []error{wire.ErrNonCanonical, wire.ErrUnknownType} {
			if errors.Is(gotErr, s) != errors.Is(refErr, s) {
				t.Fatalf("sentinel %v differs: %v vs %v", s, gotErr, refErr)
			}
		}
		return
	}
	// Deep equality includes the decimals' coefficient and exponent and the
	// times' wall, ext and location.
	if !reflect.DeepEqual(got, ref) {
		t.Fatalf("event differs:\n Decode    %+v\n reference %+v\n%q", got, ref, b)
	}
	if fastOK && !reflect.DeepEqual(fast, ref) {
		t.Fatalf("fast event differs:\n fast      %+v\n reference %+v\n%q", fast, ref, b)
	}
	for _, e := range []wire.Event{got, ref} {
		enc, err := wire.Encode(e)
		if err != nil || !bytes.Equal(enc, b) {
			t.Fatalf("Encode(decoded) = %q, %v; want the input %q", enc, err, b)
		}
	}
}

func TestWireFast_MatchesReferenceOnEdges(t *testing.T) {
	accepted := 0
	for _, s := range edgeInputs() {
		checkFastMatchesReference(t, []byte(s))
		_, ok := wire.DecodeFast([]byte(s))
		if ok {
			accepted++
		} else if _, err := wire.DecodeReference([]byte(s)); err == nil {
			t.Errorf("fast path declined a canonical event: %s", s)
		}
	}
	if accepted < 30 {
		t.Fatalf("fast path accepted only %d edge inputs; is it declining canonical events?", accepted)
	}
}

// Every engine event must take the fast path (that is where the speed is).
func TestWireFast_AcceptsEngineEvents(t *testing.T) {
	for _, b := range engineWire(t, 7, 5000) {
		if _, ok := wire.DecodeFast(b); !ok {
			t.Fatalf("fast path declined an engine event: %s", b)
		}
		checkFastMatchesReference(t, b)
	}
}

// The package-level decimal knob NewFromString honours is honoured too.
func TestWireFast_HonoursMaxDecodeExponent(t *testing.T) {
	old := decimal.MaxDecodeExponent
	defer func() { decimal.MaxDecodeExponent = old }()
	for _, m := range []int{3, 4, 0, -1} {
		decimal.MaxDecodeExponent = m
		for _, s := range edgeInputs() {
			checkFastMatchesReference(t, []byte(s))
		}
	}
}

// Strings of one event share one allocation, copied from the input: reusing
// the input buffer must not change the event.
func TestWireFast_DoesNotAliasInput(t *testing.T) {
	b := []byte(goodTrade)
	e, err := wire.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 'x'
	}
	if e.Trade.TradeID != "t-1" || e.Trade.SellAccount != "acct-2" {
		t.Fatalf("event aliases the input: %+v", e.Trade)
	}
}

// FuzzDecodeFastMatchesReference: for every input, Decode (fast path with
// fallback) and decodeReference agree on accept/reject, return deeply equal
// events on accept (both encoding back to the input) and equal errors on
// reject; the fast path never accepts what the reference refuses.
func FuzzDecodeFastMatchesReference(f *testing.F) {
	for _, b := range fuzzCorpus(f, filepath.Join("testdata", "fuzz", "FuzzDecode")) {
		f.Add(b)
	}
	for _, b := range engineWire(f, 1, 60) {
		f.Add(b)
	}
	for _, s := range edgeInputs() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFastMatchesReference(t, b)
	})
}

// BenchmarkDecode: the reference decoder vs Decode (fast path), per event
// type, on engine-generated events.
func BenchmarkDecode(b *testing.B) {
	byType := map[string][][]byte{}
	for _, w := range engineWire(b, 3, 3000) {
		e, err := wire.Decode(w)
		if err != nil {
			b.Fatal(err)
		}
		byType[string(e.Type)] = append(byType[string(e.Type)], w)
	}
	impls := []struct {
		name string
		fn   func([]byte) (wire.Event, error)
	}{{"reference", wire.DecodeReference}, {"fast", wire.Decode}}
	for _, typ := range []string{"opening", "order", "trade"} {
		evs := byType[typ]
		if len(evs) == 0 {
			b.Fatalf("no %s events", typ)
		}
		for _, impl := range impls {
			b.Run(typ+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				n := 0
				for b.Loop() {
					if _, err := impl.fn(evs[n%len(evs)]); err != nil {
						b.Fatal(err)
					}
					n++
				}
			})
		}
	}
}

// FuzzDecodeFastEncoded drives the fast path from the other side: every event
// Encode accepts must take the fast path (no silent fallback that would hide a
// slow path in production) and decode deeply equal to the reference.
func FuzzDecodeFastEncoded(f *testing.F) {
	f.Add(uint8(0), int64(1), "acct-1", "BTC-USD", "-1.5", "100.25", int64(0))
	f.Add(uint8(1), int64(7), "o-1", "x\"y\\z", "3", "0.000001", int64(1767225600123456789))
	f.Add(uint8(2), int64(9), "ü", "<&>", "12e3", "12345678901234567890.5", int64(-1))
	f.Fuzz(func(t *testing.T, kind uint8, seq int64, s1, s2, d1, d2 string, nanos int64) {
		a, err1 := decimal.NewFromString(d1)
		b, err2 := decimal.NewFromString(d2)
		if err1 != nil || err2 != nil || a.Exponent() < -100 || a.Exponent() > 100 || b.Exponent() < -100 || b.Exponent() > 100 {
			return
		}
		ts := time.Unix(0, nanos).Add(time.Duration(kind) * 24 * time.Hour)
		sides := []wire.Side{wire.SideBuy, wire.SideSell}
		statuses := []wire.OrderStatus{wire.StatusNew, wire.StatusPartiallyFilled, wire.StatusFilled, wire.StatusCancelled}
		var e wire.Event
		switch kind % 3 {
		case 0:
			e = wire.Event{Type: wire.TypeOpening, Opening: &wire.Opening{Seq: seq, Account: s1, Instrument: s2, Quantity: a, AvgCost: b}}
		case 1:
			e = wire.Event{Type: wire.TypeOrder, Order: &wire.Order{Seq: seq, OrderID: s1, Version: seq/2 + 1, Account: s2, Instrument: s1,
				Side: sides[kind/3%2], Price: b, Quantity: a, Remaining: a.Div(decimal.NewFromInt(4)), Status: statuses[kind/6%4], TS: ts}}
		case 2:
			e = wire.Event{Type: wire.TypeTrade, Trade: &wire.Trade{Seq: seq, TradeID: s1, TradeSeq: seq/3 + 1, Instrument: s2, Price: a, Quantity: b,
				BuyOrderID: s1 + s2, SellOrderID: s2, BuyAccount: s2 + "b", SellAccount: s1, TS: ts}}
		}
		enc, err := wire.Encode(e)
		if err != nil {
			return
		}
		if _, ok := wire.DecodeFast(enc); !ok {
			t.Fatalf("fast path declined Encode output %q", enc)
		}
		checkFastMatchesReference(t, enc)
	})
}

// Timestamps: every month of leap and non-leap years (including the century
// rules and the range ends) with days 0..32 and out-of-range clock fields.
func TestWireFast_TimestampsMatchReference(t *testing.T) {
	years := []string{"0000", "0001", "0002", "0004", "0100", "0400", "1600", "1900", "2000", "2023", "2024", "2100", "9996", "9999"}
	clocks := []string{"00:00:00.000000000", "23:59:59.999999999", "24:00:00.000000000", "12:60:00.000000000", "12:00:60.000000000", "12:00:00.000000001"}
	base := goodTrade
	for _, y := range years {
		for m := 0; m <= 13; m++ {
			for d := 0; d <= 32; d++ {
				for _, c := range clocks {
					stamp := y + "-" + pad2(m) + "-" + pad2(d) + "T" + c + "Z"
					checkFastMatchesReference(t, []byte(strings.Replace(base, "2026-03-04T05:06:07.000000890Z", stamp, 1)))
				}
			}
		}
	}
}

func pad2(v int) string {
	if v < 10 {
		return "0" + strconv.Itoa(v)
	}
	return strconv.Itoa(v)
}
