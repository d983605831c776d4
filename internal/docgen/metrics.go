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
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Recorder is a Prometheus registry that also keeps the collectors
// registered on it. A metric vector without children is absent from a
// registry's /metrics output; the recorder creates one child per vector in
// its own registry, so that the output it gathers names every family, its
// type, help and labels: the /metrics text of a registry with every series
// present. Put in place of the registry the manager registers on
// (controller-runtime's metrics.Registry) it records what the manager
// registers.
type Recorder struct {
	reg *prometheus.Registry

	mu         sync.Mutex
	collectors []prometheus.Collector
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{reg: prometheus.NewRegistry()} }

// Register registers c and keeps it.
func (r *Recorder) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = append(r.collectors, c)
	return nil
}

// MustRegister registers cs, panicking as prometheus.Registry does.
func (r *Recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister unregisters c.
func (r *Recorder) Unregister(c prometheus.Collector) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = slices.DeleteFunc(r.collectors, func(k prometheus.Collector) bool { return k == c })
	return r.reg.Unregister(c)
}

// Gather gathers the recorder's registry.
func (r *Recorder) Gather() ([]*dto.MetricFamily, error) { return r.reg.Gather() }

// Metric is one metric family as the reference shows it.
type Metric struct {
	Name, Help, Type string
	// Labels in the order the code declares them (Prometheus sorts them).
	Labels []string
	// Buckets are a histogram's upper bounds, +Inf excluded.
	Buckets []float64
}

// placeholderPrefix + i is the value given to label i of a recorded vector.
const placeholderPrefix = "docgen-label-"

func placeholder(i int) string { return placeholderPrefix + strconv.Itoa(i) }

// Metrics returns every family registered on r, in name order. It fails on
// a collector it does not know how to give a child, so that a new kind of
// collector cannot silently leave the reference.
func (r *Recorder) Metrics() ([]Metric, error) {
	r.mu.Lock()
	cs := slices.Clone(r.collectors)
	r.mu.Unlock()
	for _, c := range cs {
		if err := materialize(c); err != nil {
			return nil, err
		}
	}
	fams, err := r.reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("docgen: gathering the recorded metrics: %w", err)
	}
	out := make([]Metric, 0, len(fams))
	for _, f := range fams {
		m := Metric{Name: f.GetName(), Help: f.GetHelp(), Type: strings.ToLower(f.GetType().String())}
		m.Labels = labelOrder(f)
		if f.GetType() == dto.MetricType_HISTOGRAM && len(f.GetMetric()) > 0 {
			for _, bk := range f.GetMetric()[0].GetHistogram().GetBucket() {
				m.Buckets = append(m.Buckets, bk.GetUpperBound())
			}
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Metric) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// materialize gives a vector one child, its labels set to placeholders;
// any other collector is exported as it is.
func materialize(c prometheus.Collector) error {
	var with func(vals []string) error
	switch v := c.(type) {
	case *prometheus.CounterVec:
		with = func(vals []string) error { _, err := v.GetMetricWithLabelValues(vals...); return err }
	case *prometheus.GaugeVec:
		with = func(vals []string) error { _, err := v.GetMetricWithLabelValues(vals...); return err }
	case *prometheus.HistogramVec:
		with = func(vals []string) error { _, err := v.GetMetricWithLabelValues(vals...); return err }
	case *prometheus.SummaryVec:
		with = func(vals []string) error { _, err := v.GetMetricWithLabelValues(vals...); return err }
	case prometheus.Metric:
		return nil // a Counter, Gauge, Histogram or Summary without labels
	default:
		return fmt.Errorf("docgen: collector %T: not a metric or metric vector the reference knows; teach docgen.materialize about it", c)
	}
	// The number of labels is the one count of values the vector accepts.
	for n := 0; n <= 32; n++ {
		vals := make([]string, n)
		for i := range vals {
			vals[i] = placeholder(i)
		}
		if with(vals) == nil {
			return nil
		}
	}
	return fmt.Errorf("docgen: collector %T takes no label count up to 32", c)
}

// labelOrder is the family's label names in declaration order, read from
// the child materialize made (its values say each label's position).
func labelOrder(f *dto.MetricFamily) []string {
	for _, m := range f.GetMetric() {
		names := make([]string, len(m.GetLabel()))
		ok := true
		for _, lp := range m.GetLabel() {
			i, found := strings.CutPrefix(lp.GetValue(), placeholderPrefix)
			n, err := strconv.Atoi(i)
			if !found || err != nil || n >= len(names) {
				ok = false
				break
			}
			names[n] = lp.GetName()
		}
		if ok && len(names) > 0 {
			return names
		}
	}
	if len(f.GetMetric()) == 0 {
		return nil
	}
	var names []string
	for _, lp := range f.GetMetric()[0].GetLabel() {
		names = append(names, lp.GetName())
	}
	return names
}

// MetricsPage renders the metrics reference. intro is the page's prose
// before the table (what serves the metrics and how to scrape them).
func MetricsPage(intro string, ms []Metric) (string, error) {
	var b strings.Builder
	b.WriteString(GeneratedNotice)
	b.WriteString("\n# Metrics\n\n")
	b.WriteString(strings.TrimSpace(intro) + "\n\n")
	var rows [][]string
	var hist []Metric
	for _, m := range ms {
		help, err := Public(m.Help)
		if err != nil {
			return "", fmt.Errorf("docgen: metric %s: %w", m.Name, err)
		}
		if help == "" {
			return "", fmt.Errorf("docgen: metric %s has no help text", m.Name)
		}
		rows = append(rows, []string{Code(m.Name), m.Type, escapeCell(codes(m.Labels)), Cell(help)})
		if len(m.Buckets) > 0 {
			hist = append(hist, m)
		}
	}
	b.WriteString(table([]string{"Metric", "Type", "Labels", "Help"}, rows))
	if len(hist) > 0 {
		b.WriteString("\nHistogram buckets (upper bounds, `le`; `+Inf` is implied):\n\n")
		for _, m := range hist {
			bs := make([]string, len(m.Buckets))
			for i, v := range m.Buckets {
				bs[i] = strconv.FormatFloat(v, 'g', -1, 64)
			}
			fmt.Fprintf(&b, "- %s: %s\n", Code(m.Name), strings.Join(bs, ", "))
		}
	}
	return b.String(), nil
}
