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
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/projection-recovery/projection-recovery/controllers"
	"github.com/projection-recovery/projection-recovery/internal/completeness"
	"github.com/projection-recovery/projection-recovery/internal/docgen"
)

// ReferenceDir is where the generated pages live, relative to the root.
const ReferenceDir = "docs/reference"

// Pages renders every page this command owns from the tree at root.
func Pages(root string) ([]docgen.Page, error) {
	crds, err := crdsPage(root)
	if err != nil {
		return nil, err
	}
	metrics, err := metricsPage()
	if err != nil {
		return nil, err
	}
	compl, err := completenessPage(root)
	if err != nil {
		return nil, err
	}
	return []docgen.Page{
		{Name: "crds.md", Content: crds},
		{Name: "metrics.md", Content: metrics},
		{Name: "completeness.md", Content: compl},
	}, nil
}

// crdsPage renders the CRDs controller-gen wrote (`make manifests`).
func crdsPage(root string) (string, error) {
	paths, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil {
		return "", err
	}
	if len(paths) == 0 {
		return "", fmt.Errorf("no CRD under %s/config/crd/bases", root)
	}
	slices.Sort(paths)
	files := make([][]byte, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		files = append(files, b)
	}
	return docgen.CRDs(files)
}

// RecordManagerMetrics returns what the manager registers on
// controller-runtime's registry, the one its /metrics serves: the same
// constructors run, with a recorder in the registry's place. Only this
// process's copy of the registry is swapped, and back at once. The
// constructors register once per process (the manager's /metrics has one of
// each), so the first recording is the only one and later calls return it.
var RecordManagerMetrics = sync.OnceValues(func() ([]docgen.Metric, error) {
	rec := docgen.NewRecorder()
	orig := crmetrics.Registry
	crmetrics.Registry = rec
	defer func() { crmetrics.Registry = orig }()
	// What cmd/manager registers: the recovery controller's series
	// (SetupWithManager), the reconciliation controller's, and the
	// reconciliation runs' telemetry.
	controllers.NewMetrics(nil)
	controllers.NewReconciliationMetrics(nil)
	if _, err := controllers.ReconciliationTelemetry(); err != nil {
		return nil, err
	}
	return rec.Metrics()
})

const metricsIntro = `The operator's own series, generated from the collectors the manager registers. The manager
serves them with controller-runtime's standard series (` + "`controller_runtime_*`, `workqueue_*`, `rest_client_*`," + `
` + "`leader_election_*`" + `) and the Go and process collectors (` + "`go_*`, `process_*`" + `) at ` + "`/metrics`" + ` on
` + "`--metrics-bind-address`" + `, over HTTPS behind the API server's authentication and authorization with
` + "`--metrics-secure`" + ` ([manager flags](manager-flags.md#manager)).

Labels ` + "`namespace`" + ` and ` + "`name`" + ` are those of the ProjectionRecovery or ProjectionReconciliation, ` + "`scope`" + ` its
scope: a series per resource, never per sequence number or record. A resource's series are removed when it
is deleted.`

func metricsPage() (string, error) {
	ms, err := RecordManagerMetrics()
	if err != nil {
		return "", err
	}
	return docgen.MetricsPage(metricsIntro, ms)
}

// exampleTime is the example answer's clock, so the page does not change
// with every run.
var exampleTime = time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)

// completenessPage documents the endpoint from its Go types (fields and
// their doc comments) and from what the real handler answers.
func completenessPage(root string) (string, error) {
	fields, err := docgen.JSONFields(reflect.TypeFor[completeness.Answer](), filepath.Join(root, "internal", "completeness"))
	if err != nil {
		return "", err
	}
	tbl, err := docgen.FieldsTable(fields)
	if err != nil {
		return "", err
	}
	reg := completeness.NewRegistry(func() time.Time { return exampleTime })
	at := func(d time.Duration) time.Time { return exampleTime.Add(-d) }
	verified := at(4 * time.Second)
	reg.CycleStarted("trading", "eu-spot", "eu-spot", at(5*time.Second), true)
	reg.CycleEnded("trading", "eu-spot", "eu-spot", at(4*time.Second), completeness.Completeness{
		VerifiedThroughSeq: 1_284_113, ObservedBoundarySeq: 1_284_113, ChainDigest: "9f2c1e0b7d4a5f3e8c6b1a0d2e4f6a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f",
		EventCount: 1_301_977, LastSuccessfulVerification: &verified, State: "CURRENT",
		OpenDrift: &completeness.OpenDrift{Reconciliation: "eu-spot-scheduled", Findings: 2},
	})
	reg.CycleStarted("trading", "us-futures", "us-futures", at(9*time.Second), true)
	reg.CycleEnded("trading", "us-futures", "us-futures", at(3*time.Second), completeness.Completeness{
		VerifiedThroughSeq: 402_000, ObservedBoundarySeq: 950_000, Lag: 548_000, ChainDigest: "04b1d2c3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1",
		EventCount: 409_118, LastSuccessfulVerification: &verified, State: "CATCHING_UP",
		EventsPerSecond: 21_500, ETA: "25s",
	})
	reg.CycleStarted("trading", "us-futures", "us-futures", at(time.Second), true)
	h := reg.Handler()

	get := serve(h, http.MethodGet, completeness.Path)
	if get.Code != http.StatusOK {
		return "", fmt.Errorf("completeness GET answered %d", get.Code)
	}
	var a completeness.Answer
	if err := json.Unmarshal(get.Body.Bytes(), &a); err != nil || len(a.Scopes) != 2 {
		return "", fmt.Errorf("completeness GET answered %q (%v)", get.Body.String(), err)
	}
	filtered := serve(h, http.MethodGet, completeness.Path+"?scope=us-futures")
	var f completeness.Answer
	if err := json.Unmarshal(filtered.Body.Bytes(), &f); err != nil || len(f.Scopes) != 1 || f.Scopes[0].Scope != "us-futures" {
		return "", fmt.Errorf("completeness GET ?scope= answered %q (%v)", filtered.Body.String(), err)
	}
	post := serve(h, http.MethodPost, completeness.Path)
	if post.Code != http.StatusMethodNotAllowed {
		return "", fmt.Errorf("completeness POST answered %d, the page says 405", post.Code)
	}

	var b strings.Builder
	b.WriteString(docgen.GeneratedNotice)
	fmt.Fprintf(&b, "\n# The completeness endpoint\n\n")
	fmt.Fprintf(&b, "`GET %s` answers what is proven about every scope this manager runs (completeness), kept\n"+
		"apart from whether its worker is running (liveness): a scope can be CURRENT with a dead worker, or have a live\n"+
		"worker and be BLOCKED, and one \"healthy\" flag would hide one or the other. It is read-only and no probe\n"+
		"depends on it. Each manager answers for the scopes it has run a cycle of; with several managers, ask each.\n\n", completeness.Path)
	fmt.Fprintf(&b, "- Served on `--completeness-bind-address`; with `--metrics-secure` over HTTPS behind the API server's\n"+
		"  authentication and authorization (a caller needs `get` on the non-resource URL `%s`), plain HTTP\n"+
		"  otherwise ([manager flags](manager-flags.md#manager)).\n", completeness.Path)
	fmt.Fprintf(&b, "- Methods: `GET` and `HEAD`; any other is `%d %s` with `Allow: %s`.\n",
		post.Code, http.StatusText(post.Code), post.Header().Get("Allow"))
	fmt.Fprintf(&b, "- `?scope=NAME` keeps only the entries of that scope.\n")
	fmt.Fprintf(&b, "- Response headers: `Content-Type: %s`, `Cache-Control: %s`.\n\n",
		get.Header().Get("Content-Type"), get.Header().Get("Cache-Control"))
	b.WriteString("## Fields\n\n")
	b.WriteString(tbl)
	b.WriteString("\n## Example\n\n")
	b.WriteString("A manager with two scopes, one CURRENT with drift a reconciliation found, one catching up with a\n" +
		"cycle in flight (the handler's own answer):\n\n")
	fmt.Fprintf(&b, "```console\n$ curl -s \"$MANAGER%s\"\n%s```\n", completeness.Path, get.Body.String())
	return docgen.Public(b.String())
}

func serve(h http.Handler, method, target string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, target, nil))
	return w
}
