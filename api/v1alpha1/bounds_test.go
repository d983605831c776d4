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

package v1alpha1

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestCRDs_EveryStringAndListIsBounded: every string of a spec or status
// carries a maxLength (or is an enum, or a date-time) and every list a
// maxItems, so that no object, written by a user or by the controller, can
// bloat etcd; the API server refuses an oversized one with a message that
// names the field. The generated CRDs are read, not the Go markers: what the
// API server enforces is what controller-gen wrote.
//
// Exempt are only the fields whose bounds the API server sets itself
// (metav1.Condition's fields carry their own; the conditions list is written
// by the controller alone, one entry per condition type).
func TestCRDs_EveryStringAndListIsBounded(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRD under config/crd/bases: %v", err)
	}
	exempt := map[string]bool{
		".status.conditions": true, // listType=map keyed by type: at most one entry per condition type the controller sets
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var crd map[string]any
			if err := yaml.Unmarshal(raw, &crd); err != nil {
				t.Fatal(err)
			}
			versions, _ := dig(crd, "spec", "versions").([]any)
			if len(versions) == 0 {
				t.Fatal("CRD has no versions")
			}
			var unbounded []string
			for _, v := range versions {
				schema, _ := dig(v.(map[string]any), "schema", "openAPIV3Schema").(map[string]any)
				for _, top := range []string{"spec", "status"} {
					sub, _ := dig(schema, "properties", top).(map[string]any)
					if sub == nil {
						t.Fatalf("schema has no %s", top)
					}
					walkBounds("."+top, sub, exempt, &unbounded)
				}
			}
			sort.Strings(unbounded)
			if len(unbounded) > 0 {
				t.Fatalf("fields without a size bound (add +kubebuilder:validation:MaxLength / MaxItems and run make manifests):\n  %s",
					strings.Join(unbounded, "\n  "))
			}
		})
	}
}

// walkBounds appends to out the path of every string without maxLength,
// enum or a date-time format, and of every array without maxItems.
func walkBounds(path string, node map[string]any, exempt map[string]bool, out *[]string) {
	if exempt[path] {
		return
	}
	switch node["type"] {
	case "string":
		_, hasMax := node["maxLength"]
		_, hasEnum := node["enum"]
		if !hasMax && !hasEnum && node["format"] != "date-time" {
			*out = append(*out, path)
		}
	case "array":
		if _, ok := node["maxItems"]; !ok {
			*out = append(*out, path)
		}
		if items, ok := node["items"].(map[string]any); ok {
			walkBounds(path+"[]", items, exempt, out)
		}
	case "object":
		props, _ := node["properties"].(map[string]any)
		for name, p := range props {
			walkBounds(path+"."+name, p.(map[string]any), exempt, out)
		}
		if ap, ok := node["additionalProperties"].(map[string]any); ok {
			walkBounds(path+"{}", ap, exempt, out)
		}
	}
}

func dig(m map[string]any, keys ...string) any {
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}
