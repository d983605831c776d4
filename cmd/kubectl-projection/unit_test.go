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
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/progress"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestProgress_BarAndLabels(t *testing.T) {
	cases := []struct {
		name string
		got  string
		want string
	}{
		{"half", progressBar(50, 100, 10), "[#####.....]  50%"},
		{"rounds down", progressBar(999, 1000, 10), "[#########.]  99%"},
		{"full", progressBar(1000, 1000, 10), "[##########] 100%"},
		{"zero boundary", progressBar(0, 0, 4), "[....]   0%"},
		{"beyond boundary clamps", progressBar(12, 10, 4), "[####] 100%"},
		{"unknown rate", formatRate(progress.Estimate{}) + " " + formatETA(progress.Estimate{}), "rate ? ETA ?"},
		{"slow rate", formatRate(progress.Estimate{RateKnown: true, EventsPerSecond: 2.25}), "2.2 ev/s"},
		{"fast rate", formatRate(progress.Estimate{RateKnown: true, EventsPerSecond: 312.6}), "313 ev/s"},
		{"never", formatETA(progress.Estimate{RateKnown: true, ETAState: progress.ETANever}), "ETA never at this rate"},
		{"unknown eta", formatETA(progress.Estimate{RateKnown: true}), "ETA ?"},
		{"eta", formatETA(progress.Estimate{RateKnown: true, ETAState: progress.ETAKnown, ETA: 95 * time.Second}), "ETA 1m35s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func TestExitCode_Mapping(t *testing.T) {
	gr := schema.GroupResource{Group: recoveryv1.GroupVersion.Group, Resource: "projectionreconciliations"}
	cases := []struct {
		name    string
		err     error
		started bool
		want    int
	}{
		{"nil", nil, true, ExitOK},
		{"before any command ran", errors.New(`unknown command "x"`), false, ExitUsage},
		{"usage marked", usageErr(errors.New("bad -o")), true, ExitUsage},
		{"client-side refusal", refused("expired"), true, ExitRefused},
		{"wrapped refusal", fmt.Errorf("ctx: %w", refused("x")), true, ExitRefused},
		{"silent refusal", errSilentRefusal, true, ExitRefused},
		{"api forbidden", apierrors.NewForbidden(gr, "a", errors.New("no approve verb")), true, ExitRefused},
		{"api invalid", apierrors.NewInvalid(recoveryv1.GroupVersion.WithKind("ProjectionReconciliation").GroupKind(), "a", nil), true, ExitRefused},
		{"api not found", apierrors.NewNotFound(gr, "a"), true, ExitError},
		{"api conflict", apierrors.NewConflict(gr, "a", errors.New("changed")), true, ExitError},
		{"wrapped forbidden", fmt.Errorf("the API server refused: %w", apierrors.NewForbidden(gr, "a", errors.New("x"))), true, ExitRefused},
		{"plain", errors.New("dial tcp: refused"), true, ExitError},
		{"forbidden read: could not ask", readFailed(fmt.Errorf("reading: %w", apierrors.NewForbidden(gr, "a", errors.New("no get verb")))), true, ExitError},
		{"read failing otherwise", readFailed(apierrors.NewNotFound(gr, "a")), true, ExitError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCode(tc.err, tc.started); got != tc.want {
				t.Fatalf("exitCode(%v, started=%v) = %d, want %d", tc.err, tc.started, got, tc.want)
			}
		})
	}
}

// TestExitCode_UsageErrorsNeedNoCluster runs the real command tree: every
// wrong invocation is 2 before any connection is attempted (an unreachable
// kubeconfig would otherwise turn them into 1).
func TestExitCode_UsageErrorsNeedNoCluster(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"nope"}, `unknown command "nope"`},
		{"unknown flag", []string{"status", "--bogus"}, "unknown flag: --bogus"},
		{"report without name", []string{"report"}, "expected exactly one ProjectionReconciliation name, got 0"},
		{"plan with two names", []string{"plan", "a", "b"}, "got 2 arguments"},
		{"status takes no name", []string{"status", "x"}, `unknown command "x"`},
		{"bad output", []string{"status", "-o", "wide"}, `unsupported output format "wide"`},
		{"watch with output", []string{"status", "--watch", "-o", "json"}, "cannot be combined"},
		{"interval too small", []string{"status", "--watch", "--interval", "1ms"}, "below 100ms"},
		{"max actions out of range", []string{"approve", "a", "--max-actions", "5000"}, "outside 1..1000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"--kubeconfig", "/nonexistent/kubeconfig"}, tc.args...)
			code := run(context.Background(), args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			if code != ExitUsage || !strings.Contains(errOut.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, errOut.String(), tc.want)
			}
		})
	}
}

func reconWith(st recoveryv1.ProjectionReconciliationStatus) *recoveryv1.ProjectionReconciliation {
	return &recoveryv1.ProjectionReconciliation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"},
		Spec:       recoveryv1.ProjectionReconciliationSpec{RecoveryRef: recoveryv1.RecoveryReference{Name: "venue-a"}},
		Status:     st,
	}
}

func TestVerdict_ReportPlanRollback(t *testing.T) {
	now := t0
	future := metav1.NewTime(now.Add(5 * time.Minute))
	past := metav1.NewTime(now.Add(-time.Minute))
	exact := metav1.NewTime(now)
	plan := func(exp *metav1.Time, actions int32) *recoveryv1.PlanSummary {
		return &recoveryv1.PlanSummary{PlanID: "p1", Expires: exp, Actions: actions, WouldSucceed: true}
	}
	cases := []struct {
		name string
		err  error
		want string // "" = nil; else a substring of the refusal (all are exit 3)
	}{
		{"report absent", reportVerdict(reconWith(recoveryv1.ProjectionReconciliationStatus{RunState: recoveryv1.RunCollecting})), "no report yet (run state collecting)"},
		{"report not clean", reportVerdict(reconWith(recoveryv1.ProjectionReconciliationStatus{Report: &recoveryv1.ReportSummary{Clean: false}})), "-"},
		{"report clean", reportVerdict(reconWith(recoveryv1.ProjectionReconciliationStatus{Report: &recoveryv1.ReportSummary{Clean: true}})), ""},
		{"report clean but drifting (a missing finding)", reportVerdict(reconWith(recoveryv1.ProjectionReconciliationStatus{Report: &recoveryv1.ReportSummary{Clean: true, Findings: 1}})), "-"},
		{"plan absent", approvable(reconWith(recoveryv1.ProjectionReconciliationStatus{}), now), "no plan yet"},
		{"plan expired", approvable(reconWith(recoveryv1.ProjectionReconciliationStatus{Plan: plan(&past, 3)}), now), "plan p1 expired 60s ago"},
		{"plan expiring this instant", approvable(reconWith(recoveryv1.ProjectionReconciliationStatus{Plan: plan(&exact, 3)}), now), "expired"},
		{"plan without actions", approvable(reconWith(recoveryv1.ProjectionReconciliationStatus{Plan: plan(&future, 0)}), now), "no actions"},
		{"plan approvable", approvable(reconWith(recoveryv1.ProjectionReconciliationStatus{Plan: plan(&future, 3)}), now), ""},
		{"only unknown id", selErr([]string{"x"}, false, &recoveryv1.PlanSummary{PlanID: "p1", Actions: 2, Items: items("a", "b")}), `--only "x" is not an action shown`},
		{"only known id", selErr([]string{"b"}, false, &recoveryv1.PlanSummary{PlanID: "p1", Actions: 2, Items: items("a", "b")}), ""},
		{"only beyond the shown ids", selErr([]string{"z"}, false, &recoveryv1.PlanSummary{PlanID: "p1", Actions: 80, Items: items("a")}), `--only "z" is not an action shown`},
		{"whole plan larger than shown", selErr(nil, false, &recoveryv1.PlanSummary{PlanID: "p1", Actions: 80, Items: items("a")}), "has 80 actions and status shows 1"},
		{"whole plan shown whole", selErr(nil, false, &recoveryv1.PlanSummary{PlanID: "p1", Actions: 2, Items: items("a", "b")}), ""},
		{"shown page of a larger plan", selErr(nil, true, &recoveryv1.PlanSummary{PlanID: "p1", Actions: 80, Items: items("a")}), ""},
		{"rollback nothing applied", rollbackable(reconWith(recoveryv1.ProjectionReconciliationStatus{})), "applied nothing"},
		{"rollback after rollback", rollbackable(reconWith(recoveryv1.ProjectionReconciliationStatus{Outcome: &recoveryv1.OutcomeSummary{Operation: "rollback", Result: "ok", CorrelationID: "c"}})), "not an apply"},
		{"rollback failed apply", rollbackable(reconWith(recoveryv1.ProjectionReconciliationStatus{Outcome: &recoveryv1.OutcomeSummary{Operation: "apply", Result: "plan_stale", CorrelationID: "c"}})), "did not succeed (result plan_stale)"},
		{"rollback ok apply", rollbackable(reconWith(recoveryv1.ProjectionReconciliationStatus{Outcome: &recoveryv1.OutcomeSummary{Operation: "apply", Result: "ok", CorrelationID: "c"}})), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				if tc.err != nil {
					t.Fatalf("got %v, want no refusal", tc.err)
				}
				return
			}
			if exitCode(tc.err, true) != ExitRefused || (tc.want != "-" && !strings.Contains(tc.err.Error(), tc.want)) {
				t.Fatalf("got %v (exit %d), want exit 3 with %q", tc.err, exitCode(tc.err, true), tc.want)
			}
		})
	}
}

func TestFormat_ReportPlanStatus(t *testing.T) {
	last := metav1.NewTime(t0.Add(-2 * time.Minute))
	exp := metav1.NewTime(t0.Add(4 * time.Minute))
	r := reconWith(recoveryv1.ProjectionReconciliationStatus{
		RunState: recoveryv1.RunReported, LastRunAt: &last,
		Report: &recoveryv1.ReportSummary{Findings: 3,
			ByKind:      []recoveryv1.CountByName{{Name: "missing", Count: 2}, {Name: "inconsistent", Count: 1}},
			ByInvariant: []recoveryv1.CountByName{{Name: "trade_exists", Count: 2}},
			Top: []recoveryv1.FindingSummary{
				{ID: "trade_exists@t-1", Kind: "missing", Cause: "live_feed_gap confidence=high hint=replay"},
				{ID: "position_matches@acct-9", Kind: "inconsistent"},
			}},
		Plan: &recoveryv1.PlanSummary{PlanID: "plan-42", Fingerprint: "fp", Expires: &exp, Actions: 3, Items: []recoveryv1.PlannedAction{
			{ID: "a1", Kind: "rederive_position", Effect: "update", Risk: "low", Reversible: true, Rollback: "restores the position",
				Target:  []recoveryv1.FieldValue{{Name: "account", Value: "acct-9"}, {Name: "instrument", Value: "BTC"}},
				Changes: []recoveryv1.FieldChange{{Field: "avg_cost", Before: ptr("101.5"), After: ptr("100.25")}}},
			{ID: "a2", Kind: "drop_position", Effect: "delete", Risk: "medium", Changes: []recoveryv1.FieldChange{{Field: "quantity", Before: ptr("3")}}},
		}, Manual: 1, ManualItems: []recoveryv1.ManualItem{{FindingID: "position.source_backed@x", Reason: "no source history", Guidance: "ask the member"}},
			Preflight: "spec.repairDsnSecretRef is not set"},
	})
	cases := []struct {
		name  string
		write func(*bytes.Buffer)
		want  []string
	}{
		{"report", func(b *bytes.Buffer) { writeReport(b, r, t0) }, []string{
			"ProjectionReconciliation ns/r (recovery venue-a)", "reported, last run 2m ago", "NOT CLEAN, 3 findings",
			"missing 2, inconsistent 1", "trade_exists 2", "Findings (2 of 3 shown):",
			"cause: live_feed_gap confidence=high hint=replay", "... and 1 more not shown"}},
		{"plan", func(b *bytes.Buffer) { writePlan(b, r, t0) }, []string{
			"Plan:          plan-42", "Fingerprint:   fp", "(in 4m)", "Actions:       3 (2 shown", "rederive_position account=acct-9 instrument=BTC",
			"~ avg_cost  101.5 → 100.25", "- quantity  3 → (none)", "risk medium · IRREVERSIBLE", "rollback: restores the position", "... and 1 more not shown",
			"Manual:        1 finding the planner", "reason: no source history", "do:     ask the member", "Preflight:     FAILS: spec.repairDsnSecretRef"}},
		{"plan expired", func(b *bytes.Buffer) { writePlan(b, r, t0.Add(5*time.Minute)) }, []string{"(EXPIRED 60s ago)"}},
		{"report after a partial rollback", func(b *bytes.Buffer) {
			p := r.DeepCopy()
			p.Status.Outcome = &recoveryv1.OutcomeSummary{Operation: "rollback", Result: "partial", CorrelationID: "run-7", RolledBack: 1,
				Message: "1 actions reverted; 1 irreversible actions stay in place",
				Left:    []recoveryv1.LeftAction{{ID: "collapse:x\x1b[2J", Kind: "collapse", Rollback: "re-insert a copy of Before by hand"}}}
			writeReport(b, p, t0)
		}, []string{"Last rollback:  partial (correlation run-7, applied 0, rolled back 1, not rolled back 0)",
			"Left in place (1): undo by hand", "  - collapse:x\\x1b[2J (collapse)", "      rollback: re-insert a copy of Before by hand"}},
		{"status table", func(b *bytes.Buffer) {
			items := []recoveryv1.ProjectionRecovery{{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "venue-a"},
				Spec:       recoveryv1.ProjectionRecoverySpec{Scope: "scope-a"},
				Status:     recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateCatchingUp, VerifiedThroughSeq: 2192, ObservedBoundarySeq: 4000, Lag: 1808},
			}}
			_ = watchFrame(b, items, true, t0, map[string]progress.Estimate{"ns/venue-a": {RateKnown: true, EventsPerSecond: 100, ETAState: progress.ETAKnown, ETA: 19 * time.Second}})
		}, []string{"NAMESPACE", "LAST VERIFIED", "scope-a", "CATCHING_UP", "2192", "1808", "never",
			"ns/venue-a [################..............]  54% 2192/4000  100 ev/s  ETA 19s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			tc.write(&b)
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}

func TestConfirm_TypedValue(t *testing.T) {
	cases := []struct {
		name, in string
		ok       bool
	}{
		{"exact", "plan-42\n", true},
		{"surrounding space", "  plan-42 \n", true},
		{"no newline at EOF", "plan-42", true},
		{"wrong", "plan-41\n", false},
		{"empty input", "", false},
		{"blank line", "\n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := confirm(strings.NewReader(tc.in), &out, "Type: ", "plan-42", "approved")
			if (err == nil) != tc.ok || (err != nil && exitCode(err, true) != ExitRefused) {
				t.Fatalf("confirm(%q) = %v, want ok=%v", tc.in, err, tc.ok)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func items(ids ...string) []recoveryv1.PlannedAction {
	out := make([]recoveryv1.PlannedAction, 0, len(ids))
	for _, id := range ids {
		out = append(out, testItem(id))
	}
	return out
}

// selErr is selection's refusal alone.
func selErr(only []string, shown bool, p *recoveryv1.PlanSummary) error {
	_, err := selection(only, shown, p)
	return err
}
