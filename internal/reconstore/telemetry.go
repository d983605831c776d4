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
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// Run operations, the operation label of the metrics and the telemetry name
// of each record.
const (
	OpDryRun   = "dry_run"
	OpApply    = "apply"
	OpRollback = "rollback"
)

// Telemetry record names: one record per run (the specification's
// reconciliation.repair for an apply, and its siblings).
const (
	TelemetryDryRun   = "reconciliation.dry_run"
	TelemetryRepair   = recon.TelemetryName // "reconciliation.repair"
	TelemetryRollback = "reconciliation.rollback"
)

// CodeOK is the code label of a run that succeeded.
const CodeOK = "ok"

// Action outcomes of projection_reconciliation_actions_total.
const (
	ActionApplied        = "applied"
	ActionRolledBack     = "rolled_back"
	ActionRollbackFailed = "rollback_failed"
	// ActionLeft: an irreversible action a rollback left in place (its
	// rollback text says what to do by hand).
	ActionLeft = "left"
)

// Telemetry emits one record per reconciliation run (dry run, apply,
// rollback): one structured log line (key/value) and the Prometheus metrics
//
//	projection_reconciliation_runs_total{operation, code}     runs by result code ("ok" on success)
//	projection_reconciliation_findings_total{invariant}       findings reported by dry runs
//	projection_reconciliation_actions_total{kind, outcome}    actions applied, rolled back, not rolled back
//
// Labels are bounded: operations, result codes, invariants and action kinds
// are closed sets (no scope, plan or record identity). One Telemetry is
// registered per process (the manager's /metrics) and shared by every
// workflow, each logging through its own logger (WithLog).
type Telemetry struct {
	log      logr.Logger
	runs     *prometheus.CounterVec
	findings *prometheus.CounterVec
	actions  *prometheus.CounterVec
}

// NewTelemetry registers the metrics on reg (nil: log only; tests pass their
// own registry, never the global one).
func NewTelemetry(log logr.Logger, reg prometheus.Registerer) (*Telemetry, error) {
	t := &Telemetry{log: log}
	if reg == nil {
		return t, nil
	}
	t.runs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "projection_reconciliation_runs_total",
		Help: "Reconciliation runs by operation (dry_run, apply, rollback) and result code (ok on success)."}, []string{"operation", "code"})
	t.findings = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "projection_reconciliation_findings_total",
		Help: "Findings reported by reconciliation dry runs, by invariant."}, []string{"invariant"})
	t.actions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "projection_reconciliation_actions_total",
		Help: "Repair actions by kind and outcome (applied, rolled_back, rollback_failed)."}, []string{"kind", "outcome"})
	for _, c := range []prometheus.Collector{t.runs, t.findings, t.actions} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("reconstore: register reconciliation metrics: %w", err)
		}
	}
	return t, nil
}

// WithLog is t logging to log, sharing t's metrics (nil t: log only).
func (t *Telemetry) WithLog(log logr.Logger) *Telemetry {
	if t == nil {
		return &Telemetry{log: log}
	}
	c := *t
	c.log = log
	return &c
}

func codeLabel(err error) string {
	if err == nil {
		return CodeOK
	}
	return string(recon.CodeOf(err))
}

func (t *Telemetry) run(op string, err error) {
	if t.runs != nil {
		t.runs.WithLabelValues(op, codeLabel(err)).Inc()
	}
}

func (t *Telemetry) countActions(outcome string, as []recon.Action) {
	if t.actions == nil {
		return
	}
	for _, a := range as {
		t.actions.WithLabelValues(string(a.Kind), outcome).Inc()
	}
}

// DryRun records one dry run (with its rehearsal).
func (t *Telemetry) DryRun(scope string, d *DryRun, err error, took time.Duration) {
	t.run(OpDryRun, err)
	kv := []any{"operation", OpDryRun, "scope", scope, "code", codeLabel(err), "took", took.Round(time.Millisecond).String()}
	if d != nil && d.DryRunResult != nil {
		kv = append(kv, "run", d.Run.ID, "phase", string(d.Run.Phase))
	}
	if d != nil && d.DryRunResult != nil && d.Report != nil && d.Plan != nil {
		byInv := map[recon.InvariantID]int{}
		for _, f := range d.Report.Findings {
			byInv[f.Invariant]++
			if t.findings != nil {
				t.findings.WithLabelValues(string(f.Invariant)).Inc()
			}
		}
		kv = append(kv, "plan", d.Plan.PlanID, "findings", len(d.Report.Findings), "clean", d.Report.Clean,
			"byInvariant", fmt.Sprint(byInv), "actions", len(d.Plan.Actions), "manual", len(d.Plan.Manual))
	}
	if err != nil {
		kv = append(kv, "err", err.Error())
	}
	t.log.Info(TelemetryDryRun, kv...)
}

// Apply records one apply from its outcome (recon fills Outcome.Telemetry).
func (t *Telemetry) Apply(o *recon.Outcome, err error) {
	t.run(OpApply, err)
	if o == nil {
		t.log.Info(TelemetryRepair, "operation", OpApply, "code", codeLabel(err))
		return
	}
	t.countActions(ActionApplied, o.Applied)
	t.countActions(ActionRolledBack, o.RolledBack)
	failed := make([]recon.Action, len(o.RollbackFailed))
	for i, f := range o.RollbackFailed {
		failed[i] = f.Action
	}
	t.countActions(ActionRollbackFailed, failed)
	r := o.Telemetry
	t.log.Info(TelemetryRepair, "operation", OpApply, "scope", o.Scope, "plan", o.PlanID, "correlationID", o.CorrelationID,
		"principal", o.Principal, "code", codeLabel(err), "planned", r.Planned, "selected", r.Selected, "applied", r.Applied,
		"rolledBack", r.RolledBack, "rollbackFailed", r.RollbackFailed, "verified", r.Verified, "stillDrifting", r.StillDrifting,
		"verificationRan", r.VerificationRan, "took", r.Duration.Round(time.Millisecond).String())
}

// Rollback records one rollback.
func (t *Telemetry) Rollback(scope string, ro *recon.RollbackOutcome, err error, took time.Duration) {
	t.run(OpRollback, err)
	kv := []any{"operation", OpRollback, "scope", scope, "code", codeLabel(err), "took", took.Round(time.Millisecond).String()}
	if ro != nil {
		t.countActions(ActionRolledBack, ro.RolledBack)
		failed := make([]recon.Action, 0, len(ro.RollbackFailed))
		for _, f := range ro.RollbackFailed {
			failed = append(failed, f.Action)
		}
		t.countActions(ActionRollbackFailed, failed)
		left := make([]recon.Action, 0, len(ro.Manual))
		for _, m := range ro.Manual {
			left = append(left, m.Action)
		}
		t.countActions(ActionLeft, left)
		kv = append(kv, "plan", ro.PlanID, "correlationID", ro.CorrelationID, "rolledBack", len(ro.RolledBack),
			"rollbackFailed", len(ro.RollbackFailed), "manual", len(ro.Manual), "recordsLost", len(ro.AuditErrors))
	}
	t.log.Info(TelemetryRollback, kv...)
}
