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
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestPublic(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, err string
	}{
		{name: "no id", in: "Pages committed.", want: "Pages committed."},
		{name: "id alone in parentheses", in: "Probes never depend on it (FR-APR10).", want: "Probes never depend on it."},
		{name: "id with a clause", in: "published to it (FR-APR06 R2), and", want: "published to it, and"},
		{name: "two ids", in: "mirrors the cursor (FR-APR05,\nFR-APR11).", want: "mirrors the cursor."},
		{name: "id before words", in: "bounded (FR-APR10: cycles are bounded).", want: "bounded (cycles are bounded)."},
		{name: "non-functional id", in: "a replay (NFR-APR02): a member", want: "a replay: a member"},
		{name: "id in running text", in: "as FR-APR08 requires", err: "requirement id FR-APR08"},
		{name: "issue number", in: "fixed in issue 12", err: "issue reference"},
		{name: "issue hash", in: "see #12 for why", err: "issue reference"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Public(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Public(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Public(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestCell(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{name: "wrapped paragraph", in: "one\ntwo", want: "one two"},
		{name: "paragraphs", in: "one\n\ntwo", want: "one<br><br>two"},
		{name: "list items", in: "Either:\n- a\n- b", want: "Either:<br>- a<br>- b"},
		{name: "pipe everywhere", in: "a | b `c || d`", want: `a \| b ` + "`c \\|\\| d`"},
		{name: "angle brackets outside code only", in: "<recovery>-x `<y>`", want: "&lt;recovery&gt;-x `<y>`"},
		{name: "double backtick span", in: "``a`b<`` <c>", want: "``a`b<`` &lt;c&gt;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Cell(tc.in); got != tc.want {
				t.Fatalf("Cell(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

const sampleCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.io
spec:
  group: example.io
  names:
    kind: Widget
    listKind: WidgetList
    plural: widgets
    shortNames: [wd]
    singular: widget
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        description: Widget is a sample (FR-APR01).
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            required: [size]
            x-kubernetes-validations:
            - rule: self.size > 0
              message: size must be positive
            properties:
              size:
                type: integer
                format: int32
                default: 3
                minimum: 1
                maximum: 9
                description: Size of the <widget>.
              mode:
                type: string
                enum: [fast, slow]
              parts:
                type: array
                maxItems: 4
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string, pattern: '^a|b$', maxLength: 8}
              labels:
                type: object
                additionalProperties: {type: string}
              token:
                type: string
                x-kubernetes-validations:
                - rule: self == oldSelf
`

func TestCRDs(t *testing.T) {
	page, err := CRDs([][]byte{[]byte(sampleCRD)})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## Widget\n",
		"- Short names: `wd`\n",
		"Widget is a sample.\n",
		"| `spec` | object |  | “size must be positive” |",
		"| `spec.size` | integer (int32) | `3` | required<br>≥ 1<br>≤ 9 | Size of the &lt;widget&gt;. |",
		"| `spec.mode` | string |  | one of `fast`, `slow` |",
		"| `spec.parts` | []object |  | at most 4 items<br>list type `map`, keyed by `name` |",
		"| `spec.parts[].name` | string |  | required<br>at most 8 characters<br>matches `^a\\|b$` |",
		"| `spec.labels` | map[string]string |",
		"| `spec.token` | string |  | rule `self == oldSelf` |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "`metadata`") || strings.Contains(page, "apiVersion") {
		t.Errorf("page documents the standard fields:\n%s", page)
	}
	if _, err := CRDs([][]byte{[]byte("kind: ConfigMap\napiVersion: v1\n")}); err == nil {
		t.Fatal("a file that is no CRD was rendered")
	}
}

func TestFlags(t *testing.T) {
	fs := flag.NewFlagSet("tool", flag.ContinueOnError)
	fs.String("addr", ":80", "Address to bind (FR-APR10).")
	fs.Bool("dry", false, "Change nothing.")
	fs.Duration("wait", 90*time.Second, "How long to wait.")
	fs.Int64("max", 7, "Most records.")
	fs.Func("names", "Comma-separated <names>.", func(string) error { return nil })
	page, err := Flags("tool", []Command{{Name: "tool", Synopsis: "Usage: tool [flags]\n", Flags: fs}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"```text\nUsage: tool [flags]\n```",
		"| `--addr` | string | `:80` | Address to bind. |",
		"| `--dry` | bool | `false` | Change nothing. |",
		"| `--max` | int64 | `7` | Most records. |",
		"| `--names` | string |  | Comma-separated &lt;names&gt;. |",
		"| `--wait` | duration | `1m30s` | How long to wait. |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	fs.String("bad", "", "as FR-APR08 says")
	if _, err := Flags("tool", []Command{{Name: "tool", Flags: fs}}); err == nil || !strings.Contains(err.Error(), "--bad") {
		t.Fatalf("a usage citing a requirement id in running text: %v", err)
	}
}

type opaqueCollector struct{ prometheus.Collector }

func TestRecorder(t *testing.T) {
	rec := NewRecorder()
	rec.MustRegister(
		prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "Xs."}, []string{"zeta", "alpha"}),
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "y", Help: "Y."}),
		prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "z_seconds", Help: "Z.", Buckets: []float64{0.5, 1}}, []string{"k"}),
	)
	ms, err := rec.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	want := []Metric{
		{Name: "x_total", Help: "Xs.", Type: "counter", Labels: []string{"zeta", "alpha"}},
		{Name: "y", Help: "Y.", Type: "gauge"},
		{Name: "z_seconds", Help: "Z.", Type: "histogram", Labels: []string{"k"}, Buckets: []float64{0.5, 1}},
	}
	if !reflect.DeepEqual(ms, want) {
		t.Fatalf("Metrics() = %+v\nwant %+v", ms, want)
	}
	rec.MustRegister(opaqueCollector{prometheus.NewCounter(prometheus.CounterOpts{Name: "o_total", Help: "O."})})
	if _, err := rec.Metrics(); err == nil || !strings.Contains(err.Error(), "opaqueCollector") {
		t.Fatalf("a collector the recorder cannot materialise: %v", err)
	}
}

func TestMetricsPage_RefusesAMetricWithoutHelp(t *testing.T) {
	if _, err := MetricsPage("", []Metric{{Name: "x", Type: "gauge"}}); err == nil {
		t.Fatal("a metric without help text was rendered")
	}
}

// Declared like testdata/gotype/types.go, where their doc comments are.
type documented struct {
	Name   string     `json:"name"`
	Items  []item     `json:"items"`
	Hidden string     `json:"-"`
	At     *time.Time `json:"at,omitempty"`
}

type item struct {
	Count int64 `json:"count,omitempty"`
}

type undocumented struct {
	Name string `json:"name"`
	Bare string `json:"bare"`
}

func TestJSONFields(t *testing.T) {
	src := filepath.Join("testdata", "gotype")
	got, err := JSONFields(reflect.TypeFor[documented](), src)
	if err != nil {
		t.Fatal(err)
	}
	want := []Field{
		{Path: "name", Type: "string", Doc: "Name is documented."},
		{Path: "items", Type: "array of objects", Doc: "Items are documented."},
		{Path: "items[].count", Type: "integer", Omitted: true, Doc: "Count is documented on its line."},
		{Path: "at", Type: "string (RFC 3339 time)", Omitted: true, Doc: "At is documented."},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("JSONFields = %+v\nwant %+v", got, want)
	}
	if _, err := JSONFields(reflect.TypeFor[undocumented](), src); err == nil || !strings.Contains(err.Error(), "undocumented.Bare") {
		t.Fatalf("a field without a doc comment: %v", err)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	pages := []Page{{Name: "a.md", Content: "one\ntwo\nthree\n"}}
	if err := Write(dir, pages); err != nil {
		t.Fatal(err)
	}
	if err := Check(dir, pages); err != nil {
		t.Fatalf("Check after Write: %v", err)
	}
	changed := []Page{{Name: "a.md", Content: "one\n2\nthree\n"}}
	err := Check(dir, changed)
	if err == nil || !strings.Contains(err.Error(), `"two"`) || !strings.Contains(err.Error(), `"2"`) || !strings.Contains(err.Error(), "make reference") {
		t.Fatalf("Check of a changed page: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "a.md")); err != nil {
		t.Fatal(err)
	}
	if err := Check(dir, pages); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Check of a missing page: %v", err)
	}
}
