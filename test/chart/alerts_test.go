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

package chart

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestChart_AlertsRenderWhenEnabled: metrics.prometheusRule.enabled renders a
// PrometheusRule whose groups are the shipped rule file's, rule for rule, in
// the override namespace with the extra labels; runbookBaseURL re-points
// every alert's runbook_url and changes nothing else; disabled (the default)
// renders none; the values schema refuses a runbook base that is no URL.
func TestChart_AlertsRenderWhenEnabled(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir(t), "alerts", "projection-recovery.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if find(render(t, "a", "ops"), "PrometheusRule", "a-projection-recovery") != nil {
		t.Fatal("a PrometheusRule renders with metrics.prometheusRule.enabled=false")
	}

	pr := find(render(t, "a", "ops", "--set", "metrics.prometheusRule.enabled=true",
		"--set", "metrics.prometheusRule.namespace=monitoring", "--set", "metrics.prometheusRule.labels.release=kube-prometheus"),
		"PrometheusRule", "a-projection-recovery")
	if pr == nil || pr.GetNamespace() != "monitoring" || pr.GetLabels()["release"] != "kube-prometheus" {
		t.Fatalf("PrometheusRule %v: want it in monitoring with release=kube-prometheus", pr)
	}
	spec, _, _ := unstructured.NestedMap(pr.Object, "spec")
	if !reflect.DeepEqual(spec, file) {
		t.Fatalf("the PrometheusRule's spec is not the rule file:\n got %v\nwant %v", spec, file)
	}
	if alerts := alertNames(t, spec); len(alerts) < 5 {
		t.Fatalf("%d alerts rendered: %v", len(alerts), alerts)
	}

	const base = "https://runbooks.example.net/projection-recovery/alerts"
	moved := find(render(t, "a", "ops", "--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.prometheusRule.runbookBaseURL="+base),
		"PrometheusRule", "a-projection-recovery")
	movedSpec, _, _ := unstructured.NestedMap(moved.Object, "spec")
	for _, g := range movedSpec["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			ann := rule["annotations"].(map[string]any)
			if want := base + "#" + strings.ToLower(rule["alert"].(string)); ann["runbook_url"] != want {
				t.Errorf("%s: runbook_url %v, want %s", rule["alert"], ann["runbook_url"], want)
			}
			ann["runbook_url"] = "" // the rest must be the file's
		}
	}
	for _, g := range file["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			r.(map[string]any)["annotations"].(map[string]any)["runbook_url"] = ""
		}
	}
	if !reflect.DeepEqual(movedSpec, file) {
		t.Fatal("runbookBaseURL changed more than the runbook URLs")
	}
	if _, err := helmErr(t, "template", "a", chartDir(t), "--kube-version", kubeVersion, "--set", "metrics.prometheusRule.runbookBaseURL=wiki/alerts"); err == nil ||
		!strings.Contains(err.Error(), "runbookBaseURL") {
		t.Fatalf("runbookBaseURL=wiki/alerts rendered (%v), want the values schema to refuse it", err)
	}
}

func alertNames(t *testing.T, spec map[string]any) []string {
	t.Helper()
	var out []string
	groups, _ := spec["groups"].([]any)
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			if a, _ := r.(map[string]any)["alert"].(string); a != "" {
				out = append(out, a)
			}
		}
	}
	return out
}
