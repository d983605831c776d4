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
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
)

// esc renders one field that comes from outside the plugin (anything read
// from the API server: status written from SQL rows and member answers,
// plan and action ids, reasons, messages, names; the user a
// SelfSubjectReview names) for a terminal. Every rune unsafeRune reports,
// tab and line feed included (a field stays one cell of one line), is
// written as a visible escape: \x1b for C0 and DEL, \u202e for C1 and the
// bidirectional controls, \xff for a byte that is not UTF-8. Every human
// output of the plugin passes such strings through it: without it an ESC
// sequence in a plan could erase or rewrite what the approver reads, a
// U+202E could reverse an action id, a line feed could forge a line.
func esc(s string) string { return escape(s, false) }

// escText is esc for a block of text printed whole (an error message, with
// cobra's suggestions or the API server's wording): line feed and tab keep
// their layout, everything else is escaped as esc does. Fields the plugin
// formats into its own messages go through esc first, so a line break in
// such a message never comes from the object.
func escText(s string) string { return escape(s, true) }

func escape(s string, keepLayout bool) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLayout && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r < 0x80 && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unsafeRune reports the runes a terminal acts on instead of showing: C0
// controls (U+0000–U+001F), DEL, C1 controls (U+0080–U+009F, CSI among
// them), the bidirectional marks, embeddings, overrides and isolates
// (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), and the Unicode
// line and paragraph separators (U+2028, U+2029), which some terminals
// break lines on.
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// encodedPrinter is the -o json|yaml printer: no unsafe rune reaches the
// terminal raw and no object is hidden (the YAML printer fails on DEL and
// C1). JSON gets them as \uXXXX (the same data); YAML, which cannot escape
// them in a plain scalar, prints such an object as that JSON under a comment.
// Objects without one print as the encoders write them (docs/security.md).
type encodedPrinter struct {
	enc  printers.ResourcePrinter // the json or yaml printer
	json printers.ResourcePrinter // the json printer, for yaml output
	yaml bool
}

// yamlAsJSON starts a YAML output printed as escaped JSON.
const yamlAsJSON = "# kubectl projection: this object holds control or bidirectional characters; shown as JSON (valid YAML) with them escaped\n"

func (p *encodedPrinter) PrintObj(obj runtime.Object, w io.Writer) error {
	render := func(pr printers.ResourcePrinter) ([]byte, error) {
		var buf bytes.Buffer
		err := pr.PrintObj(obj, &buf)
		return buf.Bytes(), err
	}
	if !p.yaml {
		out, err := render(p.enc)
		if err != nil {
			return err
		}
		_, err = io.WriteString(w, escapeJSON(out))
		return err
	}
	// YAML is derived from the JSON: check the JSON first, then what the
	// emitter made of it.
	js, err := render(p.json)
	if err != nil {
		return err
	}
	if !encodedUnsafe(js) {
		y, err := render(p.enc)
		if err != nil {
			return err
		}
		if !encodedUnsafe(y) {
			_, err = w.Write(y)
			return err
		}
	}
	_, err = io.WriteString(w, yamlAsJSON+escapeJSON(js))
	return err
}

// encodedUnsafe reports an unsafe rune in encoder output, other than the
// line feeds of its layout, or a byte that is not UTF-8.
func encodedUnsafe(b []byte) bool {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if (r == utf8.RuneError && n == 1) || (r != '\n' && unsafeRune(r)) {
			return true
		}
		i += n
	}
	return false
}

// escapeJSON writes every unsafe rune of an encoded JSON document, other
// than the line feeds of its layout, as \uXXXX (the encoder writes them
// only inside strings) and a byte that is not UTF-8 as \ufffd, which is
// what encoding/json decodes it to.
func escapeJSON(b []byte) string {
	var s strings.Builder
	s.Grow(len(b) + 32)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			s.WriteString(`\ufffd`)
		case r != '\n' && unsafeRune(r):
			fmt.Fprintf(&s, `\u%04x`, r)
		default:
			s.Write(b[i : i+n])
		}
		i += n
	}
	return s.String()
}
