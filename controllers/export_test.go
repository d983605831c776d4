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
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// The readers below let tests and benchmarks read the controllers' series;
// production code never reads its own metrics back.

// Carried returns how many carried units had outcome (tests, benchmarks).
func (m *Metrics) Carried(outcome string) float64 {
	var d dto.Metric
	if err := m.carried.WithLabelValues(outcome).Write(&d); err != nil || d.Counter == nil {
		return 0
	}
	return d.Counter.GetValue()
}

// StatusWrites returns the number of status writes sent (benchmarks).
func (m *Metrics) StatusWrites() float64 {
	var d dto.Metric
	if err := m.statusWrites.Write(&d); err != nil || d.Counter == nil {
		return 0
	}
	return d.Counter.GetValue()
}

// State is the state gauge's value for one scope and state (tests).
func (m *Metrics) State(ns, name, scope string, state recoveryv1.RecoveryState) float64 {
	g, err := m.state.GetMetricWithLabelValues(ns, name, scope, string(state))
	if err != nil {
		return -1
	}
	return testGaugeValue(g)
}

// Drift is the gauge's value (tests).
func (m *ReconciliationMetrics) Drift(ns, name, scope, invariant string) float64 {
	g, err := m.drift.GetMetricWithLabelValues(ns, name, scope, invariant)
	if err != nil {
		return -1
	}
	return testGaugeValue(g)
}

func testGaugeValue(g prometheus.Gauge) float64 {
	var d dto.Metric
	if err := g.Write(&d); err != nil || d.Gauge == nil {
		return -1
	}
	return d.Gauge.GetValue()
}
