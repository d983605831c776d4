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

package arch

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// deps is what `go list -deps` says the packages link (their production
// code: test files are not followed), module packages only, with the
// module path cut off ("internal/store", "cmd/manager").
func deps(t *testing.T, patterns ...string) (module string, linked map[string]bool) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	module = strings.TrimSpace(string(out))
	var stderr bytes.Buffer
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, patterns...)...)
	cmd.Dir = "../.."
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %v: %v\n%s", patterns, err, stderr.String())
	}
	linked = map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		if rel, ok := strings.CutPrefix(p, module+"/"); ok {
			linked[rel] = true
		}
	}
	return module, linked
}

// TestImportArrows: the rules below are the layering the code relies on.
//   - The manager never links the reference member (internal/reference/...):
//     it is a test fixture and a demo, and shipping its matching engine in
//     the operator's image would put unreviewed code on the production path.
//     Nor the reference generator (internal/docgen) or anything under hack/:
//     tools, not the operator.
//   - The store (internal/store/...) does not import the reference engine:
//     store is below everything that drives it, and test support needing the
//     engine lives outside store's tree (internal/reference/enginetest).
//   - internal/codes is a leaf: every layer maps its own errors to codes
//     (the source client's errors carry their code), so codes imports
//     nothing of the module and any package may import it without a cycle.
//   - The kubectl plugin reads through the API server only: it never links
//     the store (and so never a database driver).
//   - The catch-up engine (internal/catchup) knows nothing of Kubernetes: it
//     links neither the controllers nor the API types; the controller
//     translates at the boundary (spec values in, a Result out).
func TestImportArrows(t *testing.T) {
	cases := []struct {
		name     string
		patterns []string
		refused  func(pkg string) bool
		why      string
	}{
		{"manager does not link the reference member, the generator or hack/", []string{"./cmd/manager"},
			func(p string) bool {
				for _, tree := range []string{"internal/reference", "internal/docgen", "hack"} {
					if p == tree || strings.HasPrefix(p, tree+"/") {
						return true
					}
				}
				return false
			},
			"the reference member is a test fixture; the generator and hack/ are tools"},
		{"store does not import the reference engine", []string{"./internal/store/..."},
			func(p string) bool { return p == "internal/reference" || strings.HasPrefix(p, "internal/reference/") },
			"test support needing the engine belongs outside store's tree"},
		{"codes is a leaf", []string{"./internal/codes"},
			func(p string) bool { return p != "internal/codes" },
			"callers map their errors to codes, not codes to theirs"},
		{"plugin does not link the store", []string{"./cmd/kubectl-projection"},
			func(p string) bool { return p == "internal/store" || strings.HasPrefix(p, "internal/store/") },
			"the plugin reads status through the API server"},
		{"catch-up engine does not link Kubernetes", []string{"./internal/catchup"},
			func(p string) bool { return p == "controllers" || p == "api" || strings.HasPrefix(p, "api/") },
			"the controller translates the resource into the engine's input and its Result into status"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			module, linked := deps(t, tc.patterns...)
			if len(linked) == 0 {
				t.Fatalf("go list -deps %v names no package of %s: the rule checks nothing", tc.patterns, module)
			}
			for p := range linked {
				if tc.refused(p) {
					t.Errorf("%v links %s/%s: %s", tc.patterns, module, p, tc.why)
				}
			}
		})
	}
}
