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

package docgen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"time"
)

// Field is one JSON field of a Go type, as encoding/json writes it.
type Field struct {
	// Path from the root object: "scopes[].completeness.lag".
	Path string
	// Type is the JSON type: string, integer, boolean, object, array of ...
	Type string
	// Omitted: absent from the JSON when empty (omitempty).
	Omitted bool
	// Doc is the Go field's doc comment.
	Doc string
}

// JSONFields lists the JSON fields of root and of every struct below it,
// depth first in declaration order, each with its doc comment read from the
// Go files of srcDir, the directory of root's package. The field set comes
// from the type itself (reflection), its meaning from the source: a field
// without a doc comment is an error, so an undocumented field cannot reach
// the API unnoticed.
func JSONFields(root reflect.Type, srcDir string) ([]Field, error) {
	docs, err := fieldDocs(srcDir)
	if err != nil {
		return nil, err
	}
	var out []Field
	if err := jsonFields(&out, "", root, root.PkgPath(), docs); err != nil {
		return nil, err
	}
	return out, nil
}

func jsonFields(out *[]Field, prefix string, t reflect.Type, pkg string, docs map[string]map[string]string) error {
	if t.PkgPath() != pkg {
		return fmt.Errorf("docgen: %s is declared outside %s: its fields have no doc comments here", t, pkg)
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		doc := docs[t.Name()][sf.Name]
		if doc == "" {
			return fmt.Errorf("docgen: %s.%s (%q) has no doc comment", t.Name(), sf.Name, prefix+name)
		}
		ft := sf.Type
		omitted := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		f := Field{Path: prefix + name, Type: jsonType(ft), Omitted: omitted, Doc: doc}
		*out = append(*out, f)
		switch {
		case ft.Kind() == reflect.Struct && ft != timeType:
			if err := jsonFields(out, f.Path+".", ft, pkg, docs); err != nil {
				return err
			}
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && ft.Elem() != timeType:
			if err := jsonFields(out, f.Path+"[].", ft.Elem(), pkg, docs); err != nil {
				return err
			}
		}
	}
	return nil
}

var timeType = reflect.TypeFor[time.Time]()

// jsonType is the JSON type encoding/json writes for t.
func jsonType(t reflect.Type) string {
	if t == timeType {
		return "string (RFC 3339 time)"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jsonType(t.Elem())
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		e := jsonType(t.Elem())
		if e == "object" {
			return "array of objects"
		}
		return "array of " + e + "s"
	}
	return t.Kind().String()
}

// fieldDocs reads the doc comment (or, without one, the line comment) of
// every struct field declared in dir's non-test Go files: type name ->
// field name -> text. Fields declared together share their comment.
func fieldDocs(dir string) (map[string]map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	docs := map[string]map[string]string{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("docgen: %w", err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			m := map[string]string{}
			for _, fld := range st.Fields.List {
				cg := fld.Doc
				if cg == nil {
					cg = fld.Comment
				}
				text := strings.TrimSpace(cg.Text())
				for _, id := range fld.Names {
					m[id.Name] = text
				}
			}
			docs[ts.Name.Name] = m
			return true
		})
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("docgen: no struct types in %s", dir)
	}
	return docs, nil
}

// FieldsTable renders fields as a Markdown table.
func FieldsTable(fields []Field) (string, error) {
	rows := make([][]string, 0, len(fields))
	for _, f := range fields {
		doc, err := Public(f.Doc)
		if err != nil {
			return "", fmt.Errorf("docgen: %s: %w", f.Path, err)
		}
		omitted := ""
		if f.Omitted {
			omitted = "when empty"
		}
		rows = append(rows, []string{Code(f.Path), f.Type, omitted, Cell(doc)})
	}
	return table([]string{"Field", "Type", "Omitted", "Meaning"}, rows), nil
}
