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

package recon

import (
	"regexp"
	"strings"
)

// Redacted replaces a scrubbed secret.
const Redacted = "[REDACTED]"

// secretPatterns match what looks like a credential pasted into a value: a
// URL or DSN with a password, a bearer (or basic) authorization, a
// key=value / key: value pair whose key names a password, token, secret or
// API key, a libpq keyword DSN's password, and JWT-shaped tokens. Each keeps
// its non-secret prefix so the report still says what was there.
var secretPatterns = []struct {
	re   *regexp.Regexp
	repl string
}{
	// scheme://user:password@host
	{regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)[^@\s]+@`), "${1}" + Redacted + "@"},
	// Authorization: Bearer xxx / Basic xxx
	{regexp.MustCompile(`(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}`), "${1} " + Redacted},
	{regexp.MustCompile(`\b(Basic)\s+[A-Za-z0-9+/]{16,}={0,2}`), "${1} " + Redacted},
	// JWT: three base64url segments, the first a JSON header.
	{regexp.MustCompile(`eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}`), Redacted},
}

// keyValueSecret: password=..., api_key: ..., "token": "...". Group 1 is
// the key and separator (kept), group 2 the value (replaced unless it is
// already the marker, so scrubbing is idempotent and never eats what follows
// a previous replacement).
var keyValueSecret = regexp.MustCompile(`(?i)([A-Za-z0-9_.-]*(?:password|passwd|pwd|token|secret|api[_-]?key|access[_-]?key|private[_-]?key|credential)[A-Za-z0-9_.-]*["']?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s&;,]+)`)

// Scrub replaces everything that looks like a secret in s. It reports
// whether anything was replaced.
func Scrub(s string) (string, bool) {
	out := s
	for _, p := range secretPatterns {
		out = p.re.ReplaceAllString(out, p.repl)
	}
	if m := keyValueSecret.FindAllStringSubmatchIndex(out, -1); len(m) > 0 {
		var b strings.Builder
		last := 0
		for _, loc := range m {
			v := out[loc[4]:loc[5]]
			b.WriteString(out[last:loc[4]])
			if strings.HasPrefix(v, Redacted) {
				b.WriteString(v)
			} else {
				b.WriteString(Redacted)
			}
			last = loc[5]
		}
		b.WriteString(out[last:])
		out = b.String()
	}
	return out, out != s
}

// scrubFields scrubs every key and value of f in place (f is the finding's
// own map, never the snapshot's) and reports whether anything changed.
func scrubFields(f Fields) bool {
	changed := false
	for k, v := range f {
		sv, c := Scrub(v)
		sk, ck := Scrub(k)
		if c || ck {
			changed = true
			delete(f, k)
			f[sk] = sv
		}
	}
	return changed
}

// scrubFinding scrubs a finding before the report is built: identity, before,
// expected, detail, hint and evidence. A redacted identity marks the finding
// Redacted (always manual); redacted values mark it ValuesRedacted.
func scrubFinding(f *Finding) {
	f.Redacted = scrubFields(f.Record.Identity)
	vb := scrubFields(f.Before)
	ve := scrubFields(f.Expected)
	f.ValuesRedacted = vb || ve
	f.Detail, _ = Scrub(f.Detail)
	scrubCause(&f.RootCause)
}

// scrubCause scrubs a cause's hint and evidence (a copy of the evidence).
func scrubCause(c *RootCause) {
	c.Hint, _ = Scrub(c.Hint)
	if len(c.Evidence) > 0 {
		ev := make([]string, len(c.Evidence))
		for i, e := range c.Evidence {
			ev[i], _ = Scrub(e)
		}
		c.Evidence = ev
	}
}
