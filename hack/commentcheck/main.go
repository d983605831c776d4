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

// Command commentcheck fails on Go comments that carry history or essays
// instead of the invariant (docs/design/comments.md): an issue reference, a
// pointer at the design document that is not in the repository, and, in
// non-test, non-generated files, a comment block over maxLines lines unless
// allowLong lists it. hack/verify-docs.sh runs it on the module root.
//
// Usage: go run ./hack/commentcheck DIR...
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// maxLines is the longest comment block allowed: the invariant and what
// breaks without it fit; reasoning and figures go to docs/.
const maxLines = 15

// allowLong lists blocks that may stay long, as "path:function-or-type":
// the package documentation of a package whose doc.go is its reference.
var allowLong = map[string]string{
	"internal/recon/doc.go:package": "the reconciliation engine's package documentation (go doc) is its overview",
}

var (
	issueRef  = regexp.MustCompile(`\b[Ii]ssues? #?[0-9]+`)
	designRef = regexp.MustCompile(`DESIGN` + `\.md`)
	generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)
)

func main() {
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: commentcheck DIR...")
		os.Exit(2)
	}
	var bad []string
	for _, dir := range flag.Args() {
		found, err := walk(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "commentcheck:", err)
			os.Exit(2)
		}
		bad = append(bad, found...)
	}
	for _, b := range bad {
		fmt.Fprintln(os.Stderr, "commentcheck:", b)
	}
	if len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "commentcheck: %d comment(s) to fix: state the invariant and what breaks without it in a few lines, and move reasoning, figures and history to docs/ (link the page by its path)\n", len(bad))
		os.Exit(1)
	}
}

// walk returns the findings of every Go file under dir, skipping vendor,
// testdata and hidden directories and any directory below dir holding its own
// go.mod: walking the module root then checks the module's code and nothing
// else (a module cache or a tool's sources under bin/ are not ours).
func walk(dir string) ([]string, error) {
	var bad []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == dir {
				return nil
			}
			if n := d.Name(); n == "vendor" || n == "testdata" || strings.HasPrefix(n, ".") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		found, err := check(path)
		bad = append(bad, found...)
		return err
	})
	return bad, err
}

// check returns the findings of one file.
func check(path string) ([]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	long := !strings.HasSuffix(path, "_test.go") && !generated.Match(src)
	var out []string
	for _, g := range f.Comments {
		pos := fset.Position(g.Pos())
		text := g.Text()
		if m := issueRef.FindString(text); m != "" {
			out = append(out, fmt.Sprintf("%s:%d: %q: no issue references in comments", path, pos.Line, m))
		}
		if designRef.MatchString(text) {
			out = append(out, fmt.Sprintf("%s:%d: the design document it points at is not in the repository: link the docs/ page", path, pos.Line))
		}
		if !long || isLicense(f, g) {
			continue
		}
		if n := proseLines(g); n > maxLines {
			if _, ok := allowLong[filepath.ToSlash(path)+":"+owner(f, g)]; ok {
				continue
			}
			out = append(out, fmt.Sprintf("%s:%d: a comment block of %d lines (at most %d)", path, pos.Line, n, maxLines))
		}
	}
	return out, nil
}

// proseLines counts the lines of g, less the marker lines ("// +optional",
// "// +kubebuilder:..."): those are directives to controller-gen that must sit
// in the doc comment, and a CRD type's printer columns would otherwise make
// its two-line description an essay.
func proseLines(g *ast.CommentGroup) int {
	n := 0
	for _, c := range g.List {
		if t, ok := strings.CutPrefix(c.Text, "//"); ok {
			if !strings.HasPrefix(strings.TrimPrefix(t, " "), "+") {
				n++
			}
			continue
		}
		n += strings.Count(c.Text, "\n") + 1
	}
	return n
}

// isLicense reports whether g is the file's license header.
func isLicense(f *ast.File, g *ast.CommentGroup) bool {
	return g.End() < f.Package && strings.Contains(g.Text(), "Licensed under")
}

// owner names what g documents: "package", a function, type, or "" when
// it documents nothing.
func owner(f *ast.File, g *ast.CommentGroup) string {
	if f.Doc == g {
		return "package"
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Doc == g {
				return d.Name.Name
			}
		case *ast.GenDecl:
			if d.Doc == g {
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						return s.Name.Name
					case *ast.ValueSpec:
						return s.Names[0].Name
					}
				}
			}
		}
	}
	return ""
}
