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
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/docgen"
)

const root = "../.."

// TestReference_PagesAreCurrent fails when a committed page under
// docs/reference/ differs from what the code generates, with the diff.
func TestReference_PagesAreCurrent(t *testing.T) {
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := docgen.Check(filepath.Join(root, ReferenceDir), pages); err != nil {
		t.Fatal(err)
	}
}

// TestChangelog_EveryMigrationHasAnEntry fails when a migration lands
// without its CHANGELOG.md entry.
func TestChangelog_EveryMigrationHasAnEntry(t *testing.T) {
	if err := CheckChangelog(root); err != nil {
		t.Fatal(err)
	}
}

func TestCheckEntries(t *testing.T) {
	names := []string{"00001_a.sql", "00002_b.sql"}
	for _, tc := range []struct {
		name, changelog, err string
	}{
		{name: "every entry", changelog: "# C\n### `00001_a.sql`: a\nGrants: x\n### `00002_b.sql`\n- **Grants:** none new\n"},
		{name: "grants as a role", changelog: "### `00001_a.sql`\nGrants (as the migrator):\n### `00002_b.sql`\n**Grants:** none\n"},
		{name: "an entry missing", changelog: "# C\n### `00001_a.sql`\nGrants: x\n", err: "no entry for migration 00002_b.sql"},
		{name: "named without a code span", changelog: "### `00001_a.sql`\nGrants: x\n### 00002_b.sql\nGrants: y\n", err: "no entry for migration 00002_b.sql"},
		{name: "an entry without grants", changelog: "### `00001_a.sql`\nGrants: x\n### `00002_b.sql`\nAdds a table.\n#### Grants\n", err: "00002_b.sql says nothing of grants"},
		{name: "grants under the next entry do not count", changelog: "### `00002_b.sql`\nAdds.\n### `00001_a.sql`\nGrants: x\n", err: "00002_b.sql says nothing of grants"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkEntries(tc.changelog, names)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("checkEntries = %v, want an error with %q", err, tc.err)
			}
		})
	}
}

// managerPackages lists the module's packages the manager links, with
// their non-test Go files.
func managerPackages(t *testing.T) map[string][]string {
	t.Helper()
	pkgs, err := listManagerPackages()
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

var listManagerPackages = sync.OnceValues(func() (map[string][]string, error) {
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if .Module}}{{if .Module.Main}}{{.ImportPath}} {{.Dir}} {{join .GoFiles ","}}{{end}}{{end}}`, "./cmd/manager")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w\n%s", err, stderr.String())
	}
	pkgs := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		var files []string
		if len(f) == 3 {
			for _, n := range strings.Split(f[2], ",") {
				files = append(files, filepath.Join(f[1], n))
			}
		}
		pkgs[f[0]] = files
	}
	if len(pkgs) == 0 {
		return nil, errors.New("go list named no package of the module")
	}
	return pkgs, nil
})

// TestMetricsReference_NamesEveryMetricTheManagerLinks reads the metric
// names declared in every package the manager links (the Name of a
// prometheus.*Opts literal) and fails on one the recorder did not see:
// a metric registered by a constructor RecordManagerMetrics does not call
// would otherwise be served and missing from the reference.
func TestMetricsReference_NamesEveryMetricTheManagerLinks(t *testing.T) {
	recorded, err := RecordManagerMetrics()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range recorded {
		seen[m.Name] = true
	}
	var declared []string
	fset := token.NewFileSet()
	for _, files := range managerPackages(t) {
		for _, path := range files {
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				sel, ok := lit.Type.(*ast.SelectorExpr)
				if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
					return true
				}
				for _, el := range lit.Elts {
					kv, ok := el.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					if k, ok := kv.Key.(*ast.Ident); !ok || k.Name != "Name" {
						continue
					}
					bl, ok := kv.Value.(*ast.BasicLit)
					if !ok {
						t.Errorf("%s: a metric name that is not a string literal: the reference check cannot read it", fset.Position(kv.Pos()))
						continue
					}
					name, err := strconv.Unquote(bl.Value)
					if err != nil {
						t.Fatal(err)
					}
					declared = append(declared, name)
				}
				return true
			})
		}
	}
	if len(declared) == 0 {
		t.Fatal("found no metric declared in the manager's packages: the scan is broken")
	}
	for _, name := range declared {
		if !seen[name] {
			t.Errorf("metric %s is declared in a package the manager links but RecordManagerMetrics did not record it: call its constructor there", name)
		}
	}
	slices.Sort(declared)
	t.Logf("declared and recorded: %v", declared)
}
