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

	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/reconstore"
)

// maxLeftActions bounds status.outcome.left (the CRD's MaxItems).
const maxLeftActions = 50

// resultPartial is a rollback that reverted what it could and left actions
// in place (recon.ResultPartial): the reverts committed, so it is followed
// like a success (the recovery re-triggered, a fresh dry run), and a person
// must still undo what status.outcome.left lists.
const resultPartial = string(recon.ResultPartial)

// leftSummary bounds what an apply or a rollback left in place for status:
// the first maxLeftActions, each id and rollback text cut to the schema's
// bounds. Without it a rollback that left irreversible actions read ok and
// their rollback text, the only instruction for undoing them, was dropped.
func leftSummary(left []recon.LeftAction) []recoveryv1.LeftAction {
	var out []recoveryv1.LeftAction
	for _, l := range left {
		if len(out) == maxLeftActions {
			break
		}
		out = append(out, recoveryv1.LeftAction{ID: truncateTo(l.ID, maxIDLength), Kind: truncateTo(string(l.Kind), 64),
			Rollback: truncateTo(l.Rollback, maxCauseLength)})
	}
	return out
}

var (
	reconTelemetryOnce sync.Once
	reconTelemetry     *reconstore.Telemetry
	reconTelemetryErr  error
)

// ReconciliationTelemetry is the reconciliation runs' telemetry registered
// on controller-runtime's registry, served at the manager's /metrics
// (projection_reconciliation_runs_total, _findings_total, _actions_total),
// once per process: every reconcile builds its own workflow, and each
// shares these counters through Telemetry.WithLog. Without the
// registration the counters existed but no scrape ever saw them.
func ReconciliationTelemetry() (*reconstore.Telemetry, error) {
	reconTelemetryOnce.Do(func() {
		reconTelemetry, reconTelemetryErr = reconstore.NewTelemetry(ctrl.Log.WithName("reconciliation"), crmetrics.Registry)
	})
	return reconTelemetry, reconTelemetryErr
}
