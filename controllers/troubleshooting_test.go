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

package controllers

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/projection-recovery/projection-recovery/internal/troubleshoot"
)

const troubleshootingDoc = "../docs/troubleshooting.md"

// entryParts are what every entry says, each as a bold lead-in.
var entryParts = []string{"**Means:**", "**State:**", "**Check:**", "**Do:**"}

// troubleshootingEntry is one "### " heading of the page and its text.
type troubleshootingEntry struct{ heading, body string }

// readTroubleshooting returns the page's entries by anchor and the anchors
// of every heading (sections included).
func readTroubleshooting(t *testing.T) (map[string]troubleshootingEntry, map[string]bool) {
	t.Helper()
	raw, err := os.ReadFile(troubleshootingDoc)
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]troubleshootingEntry{}
	anchors := map[string]bool{}
	var cur *troubleshootingEntry
	var curAnchor string
	flush := func() {
		if cur != nil {
			entries[curAnchor] = *cur
		}
		cur = nil
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			flush()
			a := troubleshoot.Anchor(h)
			if anchors[a] {
				t.Errorf("%s: heading %q repeats anchor #%s", troubleshootingDoc, h, a)
			}
			anchors[a] = true
			cur, curAnchor = &troubleshootingEntry{heading: strings.TrimSpace(h)}, a
			continue
		}
		if h, ok := strings.CutPrefix(line, "## "); ok {
			flush()
			anchors[troubleshoot.Anchor(h)] = true
			continue
		}
		if cur != nil {
			cur.body += line + "\n"
		}
	}
	flush()
	return entries, anchors
}

var localLink = regexp.MustCompile(`\]\(#([^)]*)\)`)

// TestTroubleshooting_EveryCodeHasAnEntry: docs/troubleshooting.md has one
// entry per refusal code, condition or Event reason and reconciliation
// result the source defines (read from the source by catalog_test.go, so a
// new code fails here until it is documented), each saying what it means,
// the state it leaves, what to check and what to do; no entry names a code
// that does not exist, and every link within the page lands on a heading.
// kubectl projection status and docs/alerts.md link to these anchors.
func TestTroubleshooting_EveryCodeHasAnEntry(t *testing.T) {
	entries, anchors := readTroubleshooting(t)
	codesAndReasons := refusalCodes()
	for r := range conditionReasons(t) {
		codesAndReasons[r] = true
	}
	results := resultCodes(t)

	for c := range codesAndReasons {
		if _, ok := entries[troubleshoot.Anchor(troubleshoot.CodeHeading(c))]; !ok {
			t.Errorf("%s has no entry ### %s", troubleshootingDoc, troubleshoot.CodeHeading(c))
		}
	}
	for r := range results {
		if _, ok := entries[troubleshoot.Anchor(troubleshoot.ResultHeading(r))]; !ok {
			t.Errorf("%s has no entry ### %s", troubleshootingDoc, troubleshoot.ResultHeading(r))
		}
	}
	for a, e := range entries {
		if r, ok := troubleshoot.ResultOf(e.heading); ok {
			if !results[r] {
				t.Errorf("%s: entry %q names result %q, which the source does not define", troubleshootingDoc, e.heading, r)
			}
		} else if !codesAndReasons[e.heading] {
			t.Errorf("%s: entry %q is neither a refusal code nor a condition or Event reason the source defines", troubleshootingDoc, e.heading)
		}
		for _, p := range entryParts {
			if !strings.Contains(e.body, p) {
				t.Errorf("%s: entry #%s lacks %s", troubleshootingDoc, a, p)
			}
		}
	}
	raw, _ := os.ReadFile(troubleshootingDoc)
	for _, m := range localLink.FindAllStringSubmatch(string(raw), -1) {
		if !anchors[m[1]] {
			t.Errorf("%s links #%s, which no heading has", troubleshootingDoc, m[1])
		}
	}
}

var troubleshootingLink = regexp.MustCompile(`troubleshooting\.md#([A-Za-z0-9_-]+)`)

// TestTroubleshooting_AlertsLinkTheirEntries: every alert's section of
// docs/alerts.md (its runbook_url) links the troubleshooting entry of what
// it fires on, and every such link, there and in the rule file, lands on an
// entry.
func TestTroubleshooting_AlertsLinkTheirEntries(t *testing.T) {
	_, anchors := readTroubleshooting(t)
	doc, err := os.ReadFile("../docs/alerts.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	var cur string
	for _, line := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			cur = strings.TrimSpace(h)
			sections[cur] = ""
			continue
		}
		if cur != "" {
			sections[cur] += line + "\n"
		}
	}
	rules, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(rules, &f); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			n++
			if strings.HasPrefix(strings.TrimSpace(r.Expr), "absent(") {
				continue // about the manager's scrape, not a resource's code
			}
			body, ok := sections[r.Alert]
			if !ok {
				t.Errorf("docs/alerts.md has no section ## %s", r.Alert)
				continue
			}
			if !troubleshootingLink.MatchString(body) {
				t.Errorf("docs/alerts.md, ## %s: no link to its entry in troubleshooting.md", r.Alert)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no alert in %s", alertRules)
	}
	for _, src := range [][]byte{doc, rules} {
		for _, m := range troubleshootingLink.FindAllStringSubmatch(string(src), -1) {
			if !anchors[m[1]] {
				t.Errorf("link troubleshooting.md#%s lands on no entry", m[1])
			}
		}
	}
}
