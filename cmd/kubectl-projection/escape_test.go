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

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// terminalHazard returns the first thing in s a terminal would act on
// instead of showing, with lineFeeds allowed or not: C0 controls, DEL, C1,
// the bidirectional controls, the line and paragraph separators, a byte
// that is not UTF-8. Spelled out here, not through unsafeRune, so the
// tests check the plugin against the list rather than against itself.
func terminalHazard(s string, lineFeeds bool) (string, bool) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return fmt.Sprintf("byte %#x at %d", s[i], i), true
		case r == '\n' && lineFeeds:
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f,
			r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069,
			r == 0x2028, r == 0x2029:
			return fmt.Sprintf("%U at %d", r, i), true
		}
		i += n
	}
	return "", false
}

func TestEsc(t *testing.T) {
	cases := []struct {
		name, in, want string
		text           string // escText's answer when it differs from esc's
	}{
		{name: "empty", in: "", want: ""},
		{name: "printable ASCII unchanged", in: "insert-trade:t-17 ~!@#$%^&*()\\", want: "insert-trade:t-17 ~!@#$%^&*()\\"},
		{name: "other Unicode unchanged", in: "café 日本 🙂 \u00a0 \ufffd \u200b", want: "café 日本 🙂 \u00a0 \ufffd \u200b"},
		{name: "ESC sequences", in: "plan-1\x1b[2J\x1b]0;title\x07", want: `plan-1\x1b[2J\x1b]0;title\x07`},
		{name: "NUL and CR", in: "a\x00b\rc", want: `a\x00b\x0dc`},
		{name: "tab and line feed inside a field", in: "ok\tcol\nFORGED", want: `ok\x09col\x0aFORGED`, text: "ok\tcol\nFORGED"},
		{name: "DEL", in: "a\x7fb", want: `a\x7fb`},
		{name: "C1 as characters", in: "\u0080x\u0085y\u009b31m\u009f", want: `\u0080x\u0085y\u009b31m\u009f`},
		{name: "C1 as raw bytes (not UTF-8)", in: "\x9b31m", want: `\x9b31m`},
		{name: "bidi override", in: "act-\u202egnp.exe", want: `act-\u202egnp.exe`},
		{name: "bidi embeddings", in: "\u202a\u202b\u202c\u202d", want: `\u202a\u202b\u202c\u202d`},
		{name: "bidi isolates", in: "\u2066\u2067\u2068\u2069", want: `\u2066\u2067\u2068\u2069`},
		{name: "bidi marks", in: "\u200e\u200f\u061c", want: `\u200e\u200f\u061c`},
		{name: "line and paragraph separators", in: "a\u2028b\u2029c", want: `a\u2028b\u2029c`},
		{name: "invalid UTF-8", in: "a\xffb\xc3", want: `a\xffb\xc3`},
		{name: "truncated rune", in: "\xe2\x80", want: `\xe2\x80`},
		{name: "surrogate half", in: "\xed\xa0\x80", want: `\xed\xa0\x80`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := esc(tc.in); got != tc.want {
				t.Errorf("esc(%q) = %q, want %q", tc.in, got, tc.want)
			}
			text := tc.text
			if text == "" {
				text = tc.want
			}
			if got := escText(tc.in); got != text {
				t.Errorf("escText(%q) = %q, want %q", tc.in, got, text)
			}
		})
	}
	// Every rune: esc leaves nothing a terminal acts on and changes
	// nothing else.
	for r := rune(0); r <= utf8.MaxRune; r++ {
		s := "x" + string(r) + "y"
		got := esc(s)
		if what, bad := terminalHazard(got, false); bad {
			t.Fatalf("esc(%q) = %q still holds %s", s, got, what)
		}
		if _, hazard := terminalHazard(s, false); !hazard && got != s && utf8.ValidRune(r) {
			t.Fatalf("esc(%q) = %q changed a harmless rune", s, got)
		}
	}
}

// TestEncodedOutput: -o json and -o yaml of an object whose strings hold
// what a terminal acts on print nothing raw, and a reader of either gets
// the same object back. An object without such strings prints as the
// encoders write it.
func TestEncodedOutput(t *testing.T) {
	decoders := map[string]func([]byte, any) error{
		"json": json.Unmarshal,
		"yaml": func(b []byte, v any) error { return yaml.Unmarshal(b, v) },
	}
	reasons := []struct{ name, reason string }{
		{"ESC, bidi, C1, DEL, tab, line feed", "ORPHAN\x1b[2J\u202eFORGED\u009b\x7f\u2066\ttab\nline"},
		{"bidi override only", "act-\u202egnp.exe"},
		{"C1 only", "a\u0085b"},
		{"line separator only", "a\u2028b"},
	}
	for _, format := range []string{"json", "yaml"} {
		p, err := printerFor(format)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range reasons {
			t.Run(format+"/"+tc.name, func(t *testing.T) {
				obj := &recoveryv1.ProjectionRecovery{
					ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "venue-a"},
					Spec:       recoveryv1.ProjectionRecoverySpec{Scope: "venue-a"},
					Status:     recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateBlocked, Reason: tc.reason, Message: "plain"},
				}
				var out bytes.Buffer
				if err := p.PrintObj(obj, &out); err != nil {
					t.Fatal(err)
				}
				if what, bad := terminalHazard(out.String(), true); bad {
					t.Fatalf("-o %s printed %s raw:\n%s", format, what, out.String())
				}
				var back recoveryv1.ProjectionRecovery
				if err := decoders[format](out.Bytes(), &back); err != nil {
					t.Fatalf("-o %s does not decode: %v\n%s", format, err, out.String())
				}
				if back.Status.Reason != tc.reason || back.Kind != "ProjectionRecovery" {
					t.Fatalf("-o %s decodes to reason %q kind %q, want %q and the kind", format, back.Status.Reason, back.Kind, tc.reason)
				}
			})
		}
		t.Run(format+"/harmless object", func(t *testing.T) {
			obj := &recoveryv1.ProjectionRecovery{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "venue-a"},
				Status: recoveryv1.ProjectionRecoveryStatus{Reason: "ORPHAN_TRADE", Message: "café: ok"}}
			var out bytes.Buffer
			if err := p.PrintObj(obj, &out); err != nil {
				t.Fatal(err)
			}
			want := `"reason": "ORPHAN_TRADE"`
			if format == "yaml" {
				want = "  reason: ORPHAN_TRADE\n"
			}
			if strings.HasPrefix(out.String(), "#") || !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "café: ok") {
				t.Fatalf("-o %s of a harmless object is not the encoder's output:\n%s", format, out.String())
			}
		})
	}
}
