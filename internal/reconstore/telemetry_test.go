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
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/projection-recovery/projection-recovery/internal/recon"
)

func newTestTelemetry(t *testing.T) (*Telemetry, *lines, *prometheus.Registry) {
	t.Helper()
	l := &lines{}
	reg := prometheus.NewRegistry()
	tel, err := NewTelemetry(funcr.New(l.add, funcr.Options{}), reg)
	if err != nil {
		t.Fatal(err)
	}
	return tel, l, reg
}

// TestTelemetry_OneRecordPerRun: every run (dry run, apply, rollback, each
// succeeding or refused) yields exactly one log line named after its
// operation, carrying its code and counts as key/value pairs, and counts
// once in projection_reconciliation_runs_total by operation and code.
func TestTelemetry_OneRecordPerRun(t *testing.T) {
	rederive := recon.Action{ID: "rederive_position:positions/account=a,instrument=X", Kind: recon.ActionRederivePosition}
	quarantine := recon.Action{ID: "quarantine_trade:trades/trade_id=t", Kind: recon.ActionQuarantineTrade}
	report := &recon.Report{Findings: []recon.Finding{
		{ID: "f1", Invariant: recon.PositionDerivationAgrees}, {ID: "f2", Invariant: recon.PositionDerivationAgrees},
		{ID: "f3", Invariant: recon.TradePresentInSource}}}
	plan := &recon.Plan{PlanID: "plan-1", Actions: []recon.Action{quarantine, rederive}}
	for _, c := range []struct {
		name   string
		run    func(tel *Telemetry)
		op     string
		msg    string
		code   string
		fields []string // key/value pairs the line must carry
	}{
		{"dry run reported, rehearsal failed", func(tel *Telemetry) {
			d := &DryRun{DryRunResult: &recon.DryRunResult{Run: recon.Run{ID: "run-1", Phase: recon.RunReported}, Report: report, Plan: plan},
				Rehearsal: Rehearsal{Ran: true, Actions: []ActionRehearsal{{ActionID: quarantine.ID}, {ActionID: rederive.ID, Error: "moved"}}}}
			tel.DryRun("s", d, nil, time.Second)
		}, OpDryRun, TelemetryDryRun, CodeOK, []string{`"findings"=3`, `"actions"=2`, `"rehearsalFailed"=1`, `"wouldSucceed"=false`, `"plan"="plan-1"`}},
		{"dry run without a snapshot", func(tel *Telemetry) {
			tel.DryRun("s", &DryRun{DryRunResult: &recon.DryRunResult{Run: recon.Run{ID: "run-2", Phase: recon.RunFailed}}},
				&recon.Error{Code: recon.ResultSnapshotUnavailable, Detail: "read"}, time.Second)
		}, OpDryRun, TelemetryDryRun, string(recon.ResultSnapshotUnavailable), []string{`"phase"="failed"`, `"err"=`}},
		{"apply applied", func(tel *Telemetry) {
			tel.Apply(&recon.Outcome{PlanID: "plan-1", Scope: "s", CorrelationID: "c1", Principal: "ada", Applied: []recon.Action{quarantine, rederive},
				Telemetry: recon.Telemetry{Planned: 2, Selected: 2, Applied: 2, Verified: 3, VerificationRan: true}}, nil)
		}, OpApply, TelemetryRepair, CodeOK, []string{`"applied"=2`, `"verified"=3`, `"correlationID"="c1"`, `"principal"="ada"`}},
		{"apply failed and rolled back", func(tel *Telemetry) {
			tel.Apply(&recon.Outcome{PlanID: "plan-1", Scope: "s", CorrelationID: "c2", Code: recon.ResultRepairFailed,
				RolledBack: []recon.Action{quarantine}, RollbackFailed: []recon.RollbackFailure{{Action: rederive}},
				Telemetry: recon.Telemetry{Code: recon.ResultRepairFailed, RolledBack: 1, RollbackFailed: 1}}, &recon.Error{Code: recon.ResultRepairFailed})
		}, OpApply, TelemetryRepair, string(recon.ResultRepairFailed), []string{`"rolledBack"=1`, `"rollbackFailed"=1`}},
		{"apply refused: the worker holds the lease", func(tel *Telemetry) {
			tel.Apply(&recon.Outcome{PlanID: "plan-1", CorrelationID: "c3", Code: recon.ResultLeaseUnavailable},
				&recon.Error{Code: recon.ResultLeaseUnavailable})
		}, OpApply, TelemetryRepair, string(recon.ResultLeaseUnavailable), []string{`"applied"=0`}},
		{"rollback", func(tel *Telemetry) {
			tel.Rollback("s", &recon.RollbackOutcome{PlanID: "plan-1", CorrelationID: "c1", RolledBack: []recon.Action{rederive, quarantine}}, nil, time.Second)
		}, OpRollback, TelemetryRollback, CodeOK, []string{`"rolledBack"=2`, `"correlationID"="c1"`}},
		{"rollback denied", func(tel *Telemetry) {
			tel.Rollback("s", &recon.RollbackOutcome{CorrelationID: "c1", Code: recon.ResultRepairDenied}, &recon.Error{Code: recon.ResultRepairDenied}, 0)
		}, OpRollback, TelemetryRollback, string(recon.ResultRepairDenied), []string{`"rolledBack"=0`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tel, l, _ := newTestTelemetry(t)
			c.run(tel)
			if len(l.all) != 1 {
				t.Fatalf("%d log lines, want one: %v", len(l.all), l.all)
			}
			line := l.all[0]
			for _, f := range append([]string{`"msg"="` + c.msg + `"`, `"operation"="` + c.op + `"`, `"code"="` + c.code + `"`}, c.fields...) {
				if !strings.Contains(line, f) {
					t.Errorf("the line lacks %s: %s", f, line)
				}
			}
			if n := testutil.CollectAndCount(tel.runs); n != 1 {
				t.Errorf("%d run series, want 1", n)
			}
			if v := testutil.ToFloat64(tel.runs.WithLabelValues(c.op, c.code)); v != 1 {
				t.Errorf("runs_total{%s,%s} = %v, want 1", c.op, c.code, v)
			}
		})
	}
}

// TestTelemetry_FindingsAndActions: findings count by invariant, actions by
// kind and outcome (applied, rolled back, not rolled back).
func TestTelemetry_FindingsAndActions(t *testing.T) {
	tel, _, _ := newTestTelemetry(t)
	rederive := recon.Action{Kind: recon.ActionRederivePosition}
	quarantine := recon.Action{Kind: recon.ActionQuarantineTrade}
	report := &recon.Report{Findings: []recon.Finding{{Invariant: recon.PositionDerivationAgrees}, {Invariant: recon.PositionDerivationAgrees},
		{Invariant: recon.TradePresentInSource}}}
	d := &DryRun{DryRunResult: &recon.DryRunResult{Report: report, Plan: &recon.Plan{}}}
	tel.DryRun("s", d, nil, 0)
	tel.DryRun("s", d, nil, 0)
	tel.Apply(&recon.Outcome{Applied: []recon.Action{quarantine, rederive}}, nil)
	tel.Apply(&recon.Outcome{Code: recon.ResultRepairFailed, RolledBack: []recon.Action{quarantine},
		RollbackFailed: []recon.RollbackFailure{{Action: rederive}}}, &recon.Error{Code: recon.ResultRepairFailed})
	tel.Rollback("s", &recon.RollbackOutcome{RolledBack: []recon.Action{rederive}}, nil, 0)
	for _, c := range []struct {
		c    prometheus.Counter
		want float64
	}{
		{tel.findings.WithLabelValues(string(recon.PositionDerivationAgrees)), 4},
		{tel.findings.WithLabelValues(string(recon.TradePresentInSource)), 2},
		{tel.actions.WithLabelValues(string(recon.ActionQuarantineTrade), ActionApplied), 1},
		{tel.actions.WithLabelValues(string(recon.ActionRederivePosition), ActionApplied), 1},
		{tel.actions.WithLabelValues(string(recon.ActionQuarantineTrade), ActionRolledBack), 1},
		{tel.actions.WithLabelValues(string(recon.ActionRederivePosition), ActionRollbackFailed), 1},
		{tel.actions.WithLabelValues(string(recon.ActionRederivePosition), ActionRolledBack), 1},
		{tel.runs.WithLabelValues(OpApply, string(recon.ResultRepairFailed)), 1},
		{tel.runs.WithLabelValues(OpDryRun, CodeOK), 2},
	} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", c.c.Desc(), got, c.want)
		}
	}
}

// TestTelemetry_RegistersOnTheGivenRegistryOnly: metrics go to the registry
// passed in (a second Telemetry on the same registry is refused, one on
// another is fine, the global registry is untouched); without a registry
// the telemetry logs only.
func TestTelemetry_RegistersOnTheGivenRegistryOnly(t *testing.T) {
	_, _, reg := newTestTelemetry(t)
	if _, err := NewTelemetry(funcr.New(func(string, string) {}, funcr.Options{}), reg); err == nil {
		t.Fatal("a second registration on the same registry was accepted")
	}
	newTestTelemetry(t) // another registry: accepted
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "projection_reconciliation_") {
			t.Errorf("%s is registered globally", mf.GetName())
		}
	}
	l := &lines{}
	tel, err := NewTelemetry(funcr.New(l.add, funcr.Options{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	tel.Apply(&recon.Outcome{Applied: []recon.Action{{Kind: recon.ActionRederivePosition}}}, nil)
	tel.DryRun("s", nil, &recon.Error{Code: recon.ResultInternal}, 0)
	tel.Rollback("s", nil, nil, 0)
	if len(l.all) != 3 {
		t.Fatalf("log-only telemetry: %v", l.all)
	}
}
