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

package troubleshoot

import "testing"

// TestAnchor: the anchors GitHub gives the headings the page uses, so a
// printed link lands on its entry.
func TestAnchor(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"SCHEMA_MISSING", "schema_missing"},
		{"SecretNotFound", "secretnotfound"},
		{"Result: repair_denied", "result-repair_denied"},
		{"  Result: internal ", "result-internal"},
		{"What to check (first)", "what-to-check-first"},
		{"<script>", "script"},
	} {
		t.Run(tc.heading, func(t *testing.T) {
			if got := Anchor(tc.heading); got != tc.want {
				t.Fatalf("Anchor(%q) = %q, want %q", tc.heading, got, tc.want)
			}
		})
	}
	if got := CodeURL("ORPHAN_TRADE"); got != DocURL+"#orphan_trade" {
		t.Fatalf("CodeURL = %s", got)
	}
	if got := ResultURL("plan_stale"); got != DocURL+"#result-plan_stale" {
		t.Fatalf("ResultURL = %s", got)
	}
	if r, ok := ResultOf("Result: ok"); !ok || r != "ok" {
		t.Fatalf("ResultOf = %q %v", r, ok)
	}
}
