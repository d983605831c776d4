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
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/catchup"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

// TestCarriedOutcomesExportedAtZero: a manager that has carried nothing yet
// already exports every outcome at 0, so a rate() or an alert on dropped
// units reads "none" from the start instead of "no data".
func TestCarriedOutcomesExportedAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	newMetrics(reg)
	const want = `
# HELP projection_recovery_carried_units_total Units of pages a catching-up cycle fetched for the scope's next cycle while its last unit committed, by outcome: used, dropped (the cursor, run or spec had moved) or evicted (more catching-up scopes than workers).
# TYPE projection_recovery_carried_units_total counter
projection_recovery_carried_units_total{outcome="dropped"} 0
projection_recovery_carried_units_total{outcome="evicted"} 0
projection_recovery_carried_units_total{outcome="used"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "projection_recovery_carried_units_total"); err != nil {
		t.Fatal(err)
	}
}

// TestEnvtest_CyclesStartFromTheUnitsTheirPredecessorsCarried: a catch-up
// over many cycles starts each one after the first from the unit the one
// before fetched while its last unit committed, fetches every page once, and
// ends in the projection the events replay to.
func TestEnvtest_CyclesStartFromTheUnitsTheirPredecessorsCarried(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "carry", 500, 0.3)
	lbl, sel := shard(t, "carry")
	metrics := NewMetrics(prometheus.NewRegistry())
	stop, rec, err := startManager("carry-manager", sel, true, "", func(r *ProjectionRecoveryReconciler) { r.Metrics = metrics })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	obj := f.recovery(ns, "carry", lbl, func(s *recoveryv1.ProjectionRecoverySpec) { s.PageSize, s.PagesPerCycle = 20, 2 })
	waitState(t, ns, obj.Name, 120*time.Second, "CURRENT", isCurrentAt(f.boundary()))
	stop()
	storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())

	used, dropped := metrics.Carried(catchup.CarriedUsed), metrics.Carried(catchup.CarriedDropped)
	pages := testutil.ToFloat64(rec.Metrics.pages.WithLabelValues(ns, obj.Name, f.scope))
	t.Logf("%.0f pages, %.0f carried units used, %.0f dropped, %d member requests", pages, used, dropped, f.requests.Load())
	if pages < 20 {
		t.Fatalf("only %.0f pages: too short a catch-up to carry anything", pages)
	}
	// Every cycle but the first and the last starts from a carried unit (the
	// last may fetch idle); none is dropped when nothing else writes.
	if min := pages/2 - 2; used < min || dropped != 0 {
		t.Fatalf("%.0f carried units used (want ≥ %.0f), %.0f dropped", used, min, dropped)
	}
	// Pages are fetched once: the requests are the pages, plus the idle
	// probes and the few fetches that ended at the boundary.
	if req := float64(f.requests.Load()); req > pages+10 {
		t.Fatalf("%.0f member requests for %.0f pages: pages were fetched twice", req, pages)
	}
}
