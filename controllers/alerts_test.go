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
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"
)

// alertRules is the rule file the chart ships (a plain Prometheus rule file,
// and the spec of its PrometheusRule).
const alertRules = "../charts/projection-recovery/alerts/projection-recovery.rules.yaml"

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Record      string            `json:"record"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

var (
	stateMatcher = regexp.MustCompile(`state\s*=~?\s*"([^"]*)"`)
	byClause     = regexp.MustCompile(`\bby\s*\(([^)]*)\)`)
)

// TestAlerts_RulesQueryOnlyExportedMetrics: every alert the chart ships
// queries only series the manager exports (a renamed metric fails here, not
// as an alert that can never fire), matches only states that exist,
// aggregates by namespace, name and scope (a scope watched by several
// managers fires once), has a severity, a summary, a description and a
// runbook section in docs/alerts.md, and a valid `for`.
func TestAlerts_RulesQueryOnlyExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		t.Fatalf("%s: %v", alertRules, err)
	}
	doc, err := os.ReadFile("../docs/alerts.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			sections[strings.ToLower(strings.TrimSpace(h))] = true
		}
	}
	exported := exportedFamilies(t)
	states := map[string]bool{}
	for _, s := range recoveryStates {
		states[string(s)] = true
	}

	seen := map[string]bool{}
	for _, g := range f.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: needs a name and rules", g.Name)
		}
		for _, r := range g.Rules {
			t.Run(r.Alert, func(t *testing.T) {
				if r.Alert == "" || r.Record != "" {
					t.Fatalf("rule %q: only alerts are shipped", r.Expr)
				}
				if seen[r.Alert] {
					t.Errorf("alert %s repeats", r.Alert)
				}
				seen[r.Alert] = true
				names := metricNames(r.Expr)
				if len(names) == 0 {
					t.Errorf("expr %q selects no series", r.Expr)
				}
				for _, n := range names {
					if !exported[n] {
						t.Errorf("expr %q uses %s, which the manager does not export", r.Expr, n)
					}
				}
				for _, m := range stateMatcher.FindAllStringSubmatch(r.Expr, -1) {
					if !states[m[1]] {
						t.Errorf("expr %q matches state %q, which is none of %v", r.Expr, m[1], recoveryStates)
					}
				}
				for _, m := range byClause.FindAllStringSubmatch(r.Expr, -1) {
					var labels []string
					for _, l := range strings.Split(m[1], ",") {
						labels = append(labels, strings.TrimSpace(l))
					}
					for _, want := range []string{"namespace", "name", "scope"} {
						if !slices.Contains(labels, want) {
							t.Errorf("expr %q aggregates by (%s) without %s", r.Expr, m[1], want)
						}
					}
				}
				if !strings.HasPrefix(strings.TrimSpace(r.Expr), "absent(") && !byClause.MatchString(r.Expr) {
					t.Errorf("expr %q does not aggregate by scope: several managers would fire it once each", r.Expr)
				}
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("for %q: %v", r.For, err)
				}
				if s := r.Labels["severity"]; s != "critical" && s != "warning" {
					t.Errorf("severity %q, want critical or warning", s)
				}
				if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
					t.Errorf("needs a summary and a description")
				}
				anchor := strings.ToLower(r.Alert)
				if !strings.HasSuffix(r.Annotations["runbook_url"], "/docs/alerts.md#"+anchor) {
					t.Errorf("runbook_url %q, want it to end in /docs/alerts.md#%s", r.Annotations["runbook_url"], anchor)
				}
				if !sections[anchor] {
					t.Errorf("docs/alerts.md has no section ## %s", r.Alert)
				}
			})
		}
	}
	if len(seen) < 5 {
		t.Fatalf("%d alerts in %s", len(seen), alertRules)
	}
}

var (
	// codeToken is how a refusal code or a state is spelled
	// (UPPER_SNAKE_CASE with at least one underscore, or one of the
	// one-word states).
	codeToken      = regexp.MustCompile(`\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\b(?:CURRENT|RETRYING|BLOCKED)\b`)
	reasonMatcher  = regexp.MustCompile(`\breason\s*=~?\s*"([^"]*)"`)
	typeMatcher    = regexp.MustCompile(`\btype\s*=~?\s*"([^"]*)"`)
	codeLabelMatch = regexp.MustCompile(`\bcode\s*=~?\s*"([^"]*)"`)
)

// TestAlerts_CiteOnlyExistingCodes: every refusal code or state the rule
// file names, in an expression, an annotation or a comment, exists, and
// every condition type and reason an expression matches is one the manager
// sets. An alert citing a code that does not exist sends whoever reads it
// looking for something no status, event or log will ever show; one that
// matches a reason nobody sets never fires.
func TestAlerts_CiteOnlyExistingCodes(t *testing.T) {
	raw, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	known := refusalCodes()
	for _, s := range recoveryStates {
		known[string(s)] = true
	}
	for _, tok := range codeToken.FindAllString(string(raw), -1) {
		if !known[tok] {
			t.Errorf("%s cites %s, which is neither a refusal code (internal/codes) nor a state", alertRules, tok)
		}
	}
	reasons := conditionReasons(t)
	for _, m := range reasonMatcher.FindAllStringSubmatch(string(raw), -1) {
		if !reasons[m[1]] {
			t.Errorf("%s matches reason %q, which no condition carries", alertRules, m[1])
		}
	}
	for _, m := range typeMatcher.FindAllStringSubmatch(string(raw), -1) {
		if !slices.Contains(conditionTypes, m[1]) {
			t.Errorf("%s matches condition type %q, want one of %v", alertRules, m[1], conditionTypes)
		}
	}
	for _, m := range codeLabelMatch.FindAllStringSubmatch(string(raw), -1) {
		if !known[m[1]] {
			t.Errorf("%s matches code %q, which is not a refusal code", alertRules, m[1])
		}
	}
}
