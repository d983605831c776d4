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

// Package troubleshoot names the entry of docs/troubleshooting.md that
// explains a code: a refusal code (status.reason), a condition or Event
// reason, or a reconciliation result (status.outcome.result). The page has
// one heading per code, and a heading's anchor is GitHub's slug of it, so
// the links the plugin prints and the ones the docs and alerts carry are
// computed here, once; controllers' TestTroubleshooting_* checks that every
// code has its heading.
package troubleshoot

import "strings"

// DocURL is the troubleshooting page of the project's documentation.
const DocURL = "https://github.com/projection-recovery/projection-recovery/blob/main/docs/troubleshooting.md"

// resultPrefix starts the heading of a reconciliation result: results are
// lower_snake_case and two of them (internal, refused) would otherwise have
// the anchor of a refusal code or a condition reason (INTERNAL, Refused).
const resultPrefix = "Result: "

// CodeHeading is the heading of a refusal code's or a reason's entry: the
// code itself.
func CodeHeading(code string) string { return code }

// ResultHeading is the heading of a reconciliation result's entry.
func ResultHeading(result string) string { return resultPrefix + result }

// ResultOf returns the result a heading names, if it is a result's.
func ResultOf(heading string) (string, bool) { return strings.CutPrefix(heading, resultPrefix) }

// Anchor is GitHub's anchor of a Markdown heading: lower case, every
// character but letters, digits, '-' and '_' dropped, spaces turned to '-'.
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// CodeURL is the entry of a refusal code or a condition or Event reason.
func CodeURL(code string) string { return DocURL + "#" + Anchor(CodeHeading(code)) }

// ResultURL is the entry of a reconciliation result.
func ResultURL(result string) string { return DocURL + "#" + Anchor(ResultHeading(result)) }
