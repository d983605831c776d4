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

package reconstore

import (
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// TestTelemetry_FailedDryRunWithoutResult: a dry run that failed before it
// had a result (the repair database down) is recorded, not a nil
// dereference through the embedded result (a panic there hid the failure
// from status: controller-runtime recovered and retried, RunFailed never
// written).
func TestTelemetry_FailedDryRunWithoutResult(t *testing.T) {
	tel, err := NewTelemetry(logr.Discard(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*DryRun{nil, {}} {
		tel.DryRun("venue-a", d, errors.New("connection refused"), 0)
	}
}

// TestTelemetry_PartialRollback: a rollback that left an irreversible
// action in place counts as partial (never ok), and the action as left.
// Workflows built per reconcile share one registered Telemetry through
// WithLog: counting through a copy counts on the registered series.
func TestTelemetry_PartialRollback(t *testing.T) {
	reg := prometheus.NewRegistry()
	base, err := NewTelemetry(logr.Discard(), reg)
	if err != nil {
		t.Fatal(err)
	}
	tel := base.WithLog(logr.Discard())
	collapse := recon.Action{ID: "collapse:x", Kind: recon.ActionCollapse, Rollback: "re-insert by hand"}
	ro := &recon.RollbackOutcome{Code: recon.ResultPartial, Manual: []recon.RollbackManual{{Action: collapse, Rollback: collapse.Rollback}}}
	tel.Rollback("s", ro, &recon.Error{Code: recon.ResultPartial, Detail: "left"}, 0)
	if got := testutil.ToFloat64(base.runs.WithLabelValues(OpRollback, string(recon.ResultPartial))); got != 1 {
		t.Errorf("runs_total{rollback,partial} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(base.runs.WithLabelValues(OpRollback, CodeOK)); got != 0 {
		t.Errorf("runs_total{rollback,ok} = %v, want 0", got)
	}
	if got := testutil.ToFloat64(base.actions.WithLabelValues(string(recon.ActionCollapse), ActionLeft)); got != 1 {
		t.Errorf("actions_total{collapse,left} = %v, want 1", got)
	}
	if (*Telemetry)(nil).WithLog(logr.Discard()) == nil {
		t.Error("a nil Telemetry's WithLog must log only, not be nil")
	}
}
