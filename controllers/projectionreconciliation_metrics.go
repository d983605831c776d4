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
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// ReconciliationMetrics are the reconciliation controller's series.
type ReconciliationMetrics struct {
	// drift is the number of findings of the last report per invariant, so
	// an alert fires on drift (projection_reconciliation_drift_findings > 0).
	drift *prometheus.GaugeVec
}

var (
	defaultReconMetricsOnce sync.Once
	defaultReconMetrics     *ReconciliationMetrics
)

// NewReconciliationMetrics registers the series on reg; nil means
// controller-runtime's registry, registered once per process.
func NewReconciliationMetrics(reg prometheus.Registerer) *ReconciliationMetrics {
	if reg == nil {
		defaultReconMetricsOnce.Do(func() { defaultReconMetrics = newReconciliationMetrics(crmetrics.Registry) })
		return defaultReconMetrics
	}
	return newReconciliationMetrics(reg)
}

func newReconciliationMetrics(reg prometheus.Registerer) *ReconciliationMetrics {
	m := &ReconciliationMetrics{drift: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "projection_reconciliation_drift_findings",
		Help: "Findings of the last reconciliation report, per scope and invariant (0 series: clean).",
	}, []string{"namespace", "name", "scope", "invariant"})}
	reg.MustRegister(m.drift)
	return m
}

// observeReport replaces the resource's series by the report's counts.
func (m *ReconciliationMetrics) observeReport(obj *recoveryv1.ProjectionReconciliation, scope string, rep *recon.Report) {
	m.forget(obj.Namespace, obj.Name)
	for inv, n := range rep.ByInvariant {
		m.drift.WithLabelValues(obj.Namespace, obj.Name, scope, string(inv)).Set(float64(n))
	}
}

func (m *ReconciliationMetrics) forget(ns, name string) {
	m.drift.DeletePartialMatch(prometheus.Labels{"namespace": ns, "name": name})
}
