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
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/catchup"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/reconstore"
)

// dashboardJSON is the Grafana dashboard the chart ships (its optional
// ConfigMap embeds this file).
const dashboardJSON = "../charts/projection-recovery/dashboards/projection-recovery.json"

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr       string `json:"expr"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
		} `json:"targets"`
	} `json:"panels"`
}

// promqlKeywords are identifiers of PromQL that are not series names when
// they are not followed by "(" (aggregations and functions always are).
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true,
}

var (
	promqlString  = regexp.MustCompile(`"(\\.|[^"\\])*"|'(\\.|[^'\\])*'`)
	promqlBraces  = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promqlGroupBy = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlIdent   = regexp.MustCompile(`[0-9][0-9a-zA-Z_.]*|\$?[a-zA-Z_:][a-zA-Z0-9_:]*\s*\(?`)
)

// metricNames lists the series names a PromQL expression selects: every
// identifier outside strings, label matchers, ranges and grouping lists
// that is neither a function call, a keyword nor a Grafana variable.
func metricNames(expr string) []string {
	e := strings.TrimSpace(expr)
	if strings.HasPrefix(e, "label_values(") {
		// Grafana's label_values(selector, label): the label is no series.
		if i := strings.LastIndex(e, ","); i > 0 {
			e = e[:i] + ")"
		}
	}
	e = promqlString.ReplaceAllString(e, `""`)
	e = promqlBraces.ReplaceAllString(e, " ")
	e = promqlGroupBy.ReplaceAllString(e, " ")
	var out []string
	for _, m := range promqlIdent.FindAllString(e, -1) {
		m = strings.TrimSpace(m)
		if strings.HasSuffix(m, "(") || strings.HasPrefix(m, "$") || m[0] >= '0' && m[0] <= '9' || promqlKeywords[strings.ToLower(m)] {
			continue
		}
		out = append(out, m)
	}
	return out
}

func TestMetricNames_Parser(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`sum by (namespace, scope) (rate(a_total{namespace=~"$namespace", code!="x(y)"}[$__rate_interval]))`, []string{"a_total"}},
		{`histogram_quantile(0.95, sum by (le) (rate(b_bucket[5m])))`, []string{"b_bucket"}},
		{`count(max by (ns) (c{state!="CURRENT"}) == 1) or vector(0)`, []string{"c"}},
		{`d / on (scope) group_left (name) e offset 5m`, []string{"d", "e"}},
		{`label_values(f{namespace=~"$namespace", a="b"}, scope)`, []string{"f"}},
		{`g > 1e3 and h`, []string{"g", "h"}},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
				t.Errorf("metricNames = %v, want %v", got, tc.want)
			}
		})
	}
}

// exportedFamilies registers the controllers' metrics where the manager does
// (controller-runtime's registry, served at /metrics), gives every vector one
// series by running the code paths that set them, and returns the families
// the registry gathers. Histograms are also answered as _bucket, _sum, _count.
func exportedFamilies(t *testing.T) map[string]bool {
	t.Helper()
	m := NewMetrics(nil)
	rm := NewReconciliationMetrics(nil)
	obj := &recoveryv1.ProjectionRecovery{ObjectMeta: metav1.ObjectMeta{Namespace: "dashboard-test", Name: "x"}, Spec: recoveryv1.ProjectionRecoverySpec{Scope: "dashboard-test"}}
	m.observeCycle(obj, catchup.Result{State: catchup.StateRetrying, Reason: string(codes.SourceUnavailable), Pages: 1, Events: 3,
		LockHolds: []time.Duration{20 * time.Millisecond}}, time.Second)
	obj.Status = recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateCatchingUp, VerifiedThroughSeq: 10, ObservedBoundarySeq: 20, Lag: 10}
	applyConditions(&obj.Status.Conditions, conditionsFor(recoveryv1.StateCatchingUp, "", ""), 1, metav1.Now())
	m.observeStatus(obj)
	recObj := &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{Namespace: "dashboard-test", Name: "x"}}
	rm.observeReport(recObj, "dashboard-test", &recon.Report{ByInvariant: map[recon.InvariantID]int{recon.PositionDerivationAgrees: 1}})
	// The reconciliation runs' counters, registered as the manager does.
	tel, err := ReconciliationTelemetry()
	if err != nil {
		t.Fatal(err)
	}
	rep := &recon.Report{Findings: []recon.Finding{{Invariant: recon.PositionDerivationAgrees}}}
	tel.DryRun("dashboard-test", &reconstore.DryRun{DryRunResult: &recon.DryRunResult{Report: rep, Plan: &recon.Plan{}}}, nil, 0)
	tel.Apply(&recon.Outcome{Applied: []recon.Action{{Kind: recon.ActionRederivePosition}}}, nil)
	t.Cleanup(func() {
		m.forget(obj)
		rm.forget(recObj.Namespace, recObj.Name)
	})

	fams, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		}
	}
	return names
}

// TestDashboard_QueriesOnlyExportedMetrics: the dashboard is valid JSON with
// a datasource variable every panel uses, and every series a panel or a
// variable queries is one the manager exports. A renamed metric fails here,
// not as an empty panel in production.
func TestDashboard_QueriesOnlyExportedMetrics(t *testing.T) {
	b, err := os.ReadFile(dashboardJSON)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardJSON, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Fatalf("dashboard needs a title and a uid, got %q %q", d.Title, d.UID)
	}
	exported := exportedFamilies(t)

	hasDatasourceVar := false
	var exprs []string
	for _, v := range d.Templating.List {
		switch q := v.Query.(type) {
		case string:
			hasDatasourceVar = hasDatasourceVar || (v.Type == "datasource" && v.Name == "datasource" && q == "prometheus")
		case map[string]any:
			if s, ok := q["query"].(string); ok {
				exprs = append(exprs, s)
			}
		}
	}
	if !hasDatasourceVar {
		t.Fatal("no datasource variable named datasource of type prometheus")
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d repeats", p.ID)
		}
		ids[p.ID] = true
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %q, want ${datasource}", p.Title, p.Datasource.UID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: a target's datasource is %q, want ${datasource}", p.Title, tg.Datasource.UID)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	queried := map[string]bool{}
	for _, e := range exprs {
		names := metricNames(e)
		if len(names) == 0 {
			t.Errorf("query %q selects no series", e)
		}
		for _, n := range names {
			queried[n] = true
			if !exported[n] {
				t.Errorf("query %q uses %s, which the manager does not export", e, n)
			}
		}
	}
	// Series an operator must see: the reconciliation runs by result,
	// findings by invariant, actions by kind and outcome.
	for _, n := range dashboardRequired {
		if !queried[n] {
			t.Errorf("no panel queries %s", n)
		}
	}
}

// dashboardRequired are the series the dashboard must chart.
var dashboardRequired = []string{
	"projection_reconciliation_runs_total",
	"projection_reconciliation_findings_total",
	"projection_reconciliation_actions_total",
}

// TestMetrics_StateGauge: the per-scope state gauge the dashboard's state
// panels read has exactly one state at 1, and follows a transition.
func TestMetrics_StateGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	obj := &recoveryv1.ProjectionRecovery{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}, Spec: recoveryv1.ProjectionRecoverySpec{Scope: "s"}}
	for _, st := range []recoveryv1.RecoveryState{recoveryv1.StateCatchingUp, recoveryv1.StateCurrent, recoveryv1.StateBlocked} {
		obj.Status = recoveryv1.ProjectionRecoveryStatus{State: st, VerifiedThroughSeq: 1, ObservedBoundarySeq: 1}
		m.observeStatus(obj)
		for _, other := range recoveryStates {
			want := 0.0
			if other == st {
				want = 1
			}
			if got := m.State("ns", "x", "s", other); got != want {
				t.Errorf("after %s: state{%s} = %v, want %v", st, other, got, want)
			}
		}
	}
	m.forget(obj)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "projection_recovery_state" && len(f.GetMetric()) > 0 {
			t.Errorf("forget left %d state series", len(f.GetMetric()))
		}
	}
}
