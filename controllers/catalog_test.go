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
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/codes"
)

// The catalogue of every code and reason a user can meet, read from the
// source rather than listed by hand, so that a code added tomorrow is held
// to the same checks (an alert may only cite an existing one; the
// troubleshooting page needs an entry for each) without anyone remembering
// to extend a list.

// refusalCodes are internal/codes' stable refusal codes (status.reason of a
// RETRYING or BLOCKED scope, SCHEMA_MISSING included).
func refusalCodes() map[string]bool {
	out := map[string]bool{}
	for _, c := range codes.All {
		out[string(c)] = true
	}
	return out
}

// conditionReasons are the Reason* string constants of api/v1alpha1 and of
// this package: the reasons of the conditions and Events of both resources.
func conditionReasons(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, dir := range []string{filepath.Join("..", "api", "v1alpha1"), "."} {
		for _, v := range stringConsts(t, dir, func(name string, _ ast.Expr) bool { return strings.HasPrefix(name, "Reason") }) {
			out[v] = true
		}
	}
	return out
}

// resultCodes are the results a reconciliation's dry run, apply or rollback
// ends with (status.outcome.result): internal/recon's and
// internal/reconstore's ResultCode constants and the result* constants of
// this package's guards and decisions.
func resultCodes(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	isResult := func(_ string, typ ast.Expr) bool {
		switch x := typ.(type) {
		case *ast.Ident:
			return x.Name == "ResultCode"
		case *ast.SelectorExpr:
			return x.Sel.Name == "ResultCode"
		}
		return false
	}
	for _, dir := range []string{filepath.Join("..", "internal", "recon"), filepath.Join("..", "internal", "reconstore")} {
		for _, v := range stringConsts(t, dir, isResult) {
			out[v] = true
		}
	}
	for _, v := range stringConsts(t, ".", func(name string, _ ast.Expr) bool { return strings.HasPrefix(name, "result") }) {
		out[v] = true
	}
	return out
}

// stringConsts parses the non-test Go files of dir and returns the string
// literal value of every constant keep accepts (by name and declared type),
// keyed by constant name. A constant spelled from another constant (not a
// literal) is skipped: the one it copies is found where it is declared.
func stringConsts(t *testing.T, dir string, keep func(name string, typ ast.Expr) bool) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i >= len(vs.Values) || !keep(n.Name, vs.Type) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[n.Name] = v
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no constant found in %s: the catalogue reads the wrong place", dir)
	}
	return out
}

// TestCatalog_FindsTheKnownCodes: the catalogue is read from the right
// places (a rename of a file or a type would otherwise empty it and every
// check built on it would pass on nothing).
func TestCatalog_FindsTheKnownCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  map[string]bool
		want []string
	}{
		{"refusal codes", refusalCodes(), []string{"ORPHAN_TRADE", "SCHEMA_MISSING", "SOURCE_UNAVAILABLE"}},
		{"condition reasons", conditionReasons(t), []string{"SchemaMissing", "SecretNotFound", "AutoRecoveryDisabled", "DuplicateScope", "ApprovalUnbound", "RecoveryNotFound"}},
		{"result codes", resultCodes(t), []string{"ok", "repair_denied", "records_untrusted", "waiting_for_lease", "approval_policy_missing", "plan_not_shown", "partial"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, w := range tc.want {
				if !tc.set[w] {
					t.Errorf("%s lacks %s: %v", tc.name, w, sortedKeys(tc.set))
				}
			}
		})
	}
}
