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

package source

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/chain"
)

// pageBodies are pages as a member sends them (json.Marshal of Page), with
// events whose wire bytes are arbitrary (the fast decoder does not read
// them), in the spellings the fast path accepts and some it declines.
func pageBodies(t testing.TB) [][]byte {
	rng := rand.New(rand.NewSource(5))
	var out [][]byte
	for _, n := range []int{0, 1, 3, 40} {
		p := Page{ProtocolVersion: 1, DescriptorHash: strings.Repeat("d", 64), BoundarySeq: 900, AfterSeq: 10, ThroughSeq: 10 + int64(n),
			DigestAfter: chain.Genesis, DigestThrough: chain.Next(chain.Genesis, []byte("x")), Idle: n == 0, Events: []Event{}}
		for i := 0; i < n; i++ {
			w := make([]byte, rng.Intn(300))
			rng.Read(w)
			p.Events = append(p.Events, Event{Seq: 11 + int64(i), Wire: w})
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		indented, err := json.MarshalIndent(p, " ", "\t")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b, indented)
	}
	return append(out,
		[]byte(`{}`), []byte(` { "events" : [ ] , "idle" : false } `),
		[]byte(`{"events":[{"wire":"AAEC","seq":-0}]}`),
		// Declined: encoding/json decides.
		[]byte(`{"Idle":true}`), []byte(`{"idle":true,"idle":false}`), []byte(`{"idle":null}`),
		[]byte(`{"afterSeq":1.0}`), []byte(`{"afterSeq":1e3}`), []byte(`{"afterSeq":01}`),
		[]byte(`{"afterSeq":99999999999999999999}`), []byte(`{"descriptorHash":"a\u0062"}`),
		[]byte(`{"events":[{"seq":1,"wire":"AA=="}],"x":1}`), []byte(`{"events":[{"seq":1,"wire":"A"}]}`),
		[]byte(`{"events":[{"seq":1}]}`), []byte(`{"events":[{"seq":1,"wire":"AA","seq":2}]}`),
		[]byte(`{"idle":true} x`), []byte(`{"idle":true,}`), []byte("{\"descriptorHash\":\"\xc3\xa9\"}"),
	)
}

// TestDecodePageFast: a member's page (json.Marshal of Page, compact or
// indented) takes the fast path, and whatever it accepts decodes to exactly
// what json.Unmarshal gives; what it declines, encoding/json decides.
func TestDecodePageFast(t *testing.T) {
	bodies := pageBodies(t)
	for i, b := range bodies[:8] {
		if _, ok := decodePageFast(b); !ok {
			t.Fatalf("page %d as a member sends it was declined: %.200s", i, b)
		}
	}
	declined := 0
	for _, b := range bodies {
		t.Run(string(b[:min(len(b), 40)]), func(t *testing.T) {
			if !sameAsEncodingJSON(t, b) {
				declined++
			}
		})
	}
	if declined < 14 {
		t.Fatalf("only %d bodies declined: the declining cases no longer reach encoding/json", declined)
	}
	t.Run("the wires do not share their buffer's capacity", func(t *testing.T) {
		got, ok := decodePageFast(bodies[4])
		if !ok {
			t.Fatal("declined")
		}
		items := *got.Events
		next := bytes.Clone(items[1].Wire)
		_ = append(items[0].Wire, 0xff)
		if !bytes.Equal(items[1].Wire, next) {
			t.Fatal("appending to one wire overwrote the next")
		}
	})
}

// sameAsEncodingJSON fails t unless decodePageFast declines b or decodes it
// to json.Unmarshal's value; it reports whether it accepted.
func sameAsEncodingJSON(t *testing.T, b []byte) bool {
	t.Helper()
	fast, ok := decodePageFast(b)
	if !ok {
		return false
	}
	var ref pageBody
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatalf("accepted %q, which encoding/json refuses: %v", b, err)
	}
	if !reflect.DeepEqual(fast, ref) {
		t.Fatalf("decoded %q differently from encoding/json:\nfast %s\nref  %s", b, dump(fast), dump(ref))
	}
	return true
}

func dump(b pageBody) string {
	s, _ := json.Marshal(b)
	return string(s)
}

// FuzzDecodePageFast: whatever the body, the fast page decoder either
// declines it or agrees with encoding/json exactly (nil and empty told
// apart). Seeds: pageBodies.
func FuzzDecodePageFast(f *testing.F) {
	for _, b := range pageBodies(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sameAsEncodingJSON(t, b)
	})
}

// BenchmarkDecodePage: a page of 400 events of 250-byte wires, through the
// fast path and through encoding/json (the ratio is the figure).
func BenchmarkDecodePage(b *testing.B) {
	rng := rand.New(rand.NewSource(9))
	p := Page{ProtocolVersion: 1, DescriptorHash: strings.Repeat("d", 64), BoundarySeq: 9000, AfterSeq: 10, ThroughSeq: 410,
		DigestAfter: chain.Genesis, DigestThrough: chain.Genesis}
	for i := 0; i < 400; i++ {
		w := make([]byte, 250)
		rng.Read(w)
		p.Events = append(p.Events, Event{Seq: 11 + int64(i), Wire: w})
	}
	body, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		dec  func([]byte) bool
	}{
		{"fast", func(body []byte) bool { _, ok := decodePageFast(body); return ok }},
		{"encoding_json", func(body []byte) bool { var v pageBody; return json.Unmarshal(body, &v) == nil }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for i := 0; i < b.N; i++ {
				if !c.dec(body) {
					b.Fatal("not decoded")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*400), "ns/event")
		})
	}
}
