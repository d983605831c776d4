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
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// hostileField is what a compromised source or a crafted SQL row could put
// into a status: clear the screen and home the cursor, reverse what
// follows, forge a line and a column, and a C1 CSI.
const hostileField = "\x1b[2J\x1b[H\u202e71-t:edart-tresni\u202c\tcol\nFORGED: approved\u009b31m\x7f"

// The visible forms the plugin must print instead.
var hostileEscaped = []string{`\x1b[2J\x1b[H`, `\u202e71-t:edart-tresni\u202c`, `\x09col\x0aFORGED: approved\u009b31m\x7f`}

// TestEnvtest_PluginEscapesWhatItPrints drives the real plugin against the
// API server with a ProjectionRecovery and a ProjectionReconciliation whose
// status carries ESC sequences, bidirectional overrides, tabs, line feeds,
// C1 and DEL in every string the plugin shows (reason, message, plan and
// action ids, findings, counts, the outcome): no command writes any of them
// raw to stdout or stderr, tables and text show them escaped, and
// -o json|yaml stay decodable to the same object.
func TestEnvtest_PluginEscapesWhatItPrints(t *testing.T) {
	startEnv(t)
	ctx := context.Background()
	ns := newNamespace(t, ctx)
	kc := kubeconfigFor(t, "alice@example.com", "system:masters")
	h := hostileField

	blocked := recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateBlocked, Reason: "ORPHAN_TRADE" + h, Message: "refused: " + h,
		VerifiedThroughSeq: 10, ObservedBoundarySeq: 20, Lag: 10}
	createRecovery(t, ctx, ns, "venue-a", blocked)
	createRecovery(t, ctx, ns, "venue-b", recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateCatchingUp, Reason: h,
		VerifiedThroughSeq: 10, ObservedBoundarySeq: 20, Lag: 10})

	exp := metav1.NewTime(time.Now().Add(10 * time.Minute))
	last := metav1.Now()
	createReconciliation(t, ctx, ns, "recon-a", recoveryv1.ProjectionReconciliationStatus{
		RunState: recoveryv1.RunReported, LastRunAt: &last,
		Report: &recoveryv1.ReportSummary{Clean: false, Findings: 1,
			ByKind:      []recoveryv1.CountByName{{Name: "missing" + h, Count: 1}},
			ByInvariant: []recoveryv1.CountByName{{Name: "trade_exists" + h, Count: 1}},
			Top:         []recoveryv1.FindingSummary{{ID: "trade_exists@" + h, Invariant: "trade_exists", Kind: "\x1b[8m\u202e", Cause: "live_feed_gap " + h}}},
		Plan: &recoveryv1.PlanSummary{PlanID: "plan-" + h, Fingerprint: "sha256:\x1b[8m", Expires: &exp, Actions: 2,
			Items: []recoveryv1.PlannedAction{testItem("insert-trade:" + h), testItem("\u202erederive")}, WouldSucceed: true},
		Outcome: &recoveryv1.OutcomeSummary{Operation: "apply", Result: "failed" + h, CorrelationID: "corr-" + h, Approver: "carol" + h, At: &last},
	})

	stop := echoRequests(t, ns, "venue-a", blocked)
	defer stop()
	cases := []struct {
		name string
		in   string
		args []string
		code int
		want []string // in stdout+stderr, besides every part of hostileEscaped
	}{
		{name: "status", args: []string{"status"}, code: ExitRefused, want: []string{"ORPHAN_TRADE" + hostileEscaped[0]}},
		{name: "status -A", args: []string{"status", "-A"}, code: ExitRefused},
		{name: "report", args: []string{"report", "recon-a"}, code: ExitRefused,
			want: []string{"trade_exists@" + hostileEscaped[0], "cause: live_feed_gap " + hostileEscaped[0], `\x1b[8m\u202e`}},
		{name: "plan", args: []string{"plan", "recon-a"}, code: ExitOK,
			want: []string{"Plan:          plan-" + hostileEscaped[0], `sha256:\x1b[8m`, `id: \u202erederive`}},
		{name: "approve, wrong planId typed", in: "plan-x\n", args: []string{"approve", "recon-a"}, code: ExitRefused,
			want: []string{"Type the planId to approve it as alice@example.com", `which is not "plan-\x1b[2J`}},
		{name: "approve --only an unknown action", args: []string{"approve", "recon-a", "--only", "nope"}, code: ExitRefused,
			want: []string{`--only "nope" is not an action shown in plan plan-` + hostileEscaped[0]}},
		{name: "rollback of a failed apply", args: []string{"rollback", "recon-a", "--yes"}, code: ExitRefused,
			want: []string{"did not succeed (result failed" + hostileEscaped[0]}},
		{name: "recheck --wait", args: []string{"recheck", "venue-a", "--wait", "--timeout", "30s"}, code: ExitRefused,
			want: []string{"refused: " + hostileEscaped[0]}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := pluginQuiet(t, kc, ns, tc.in, tc.args...)
			all := r.out + r.errOut
			if r.code != tc.code {
				t.Errorf("exit %d, want %d", r.code, tc.code)
			}
			if what, bad := terminalHazard(all, true); bad {
				t.Fatalf("printed %s raw:\n%s", what, esc(all))
			}
			for _, line := range strings.Split(all, "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "FORGED") {
					t.Errorf("a line feed from the status started a line of its own: %q", line)
				}
			}
			mustContain(t, strings.Join(tc.args, " "), all, append(tc.want, hostileEscaped...)...)
		})
	}
	if a := getRecon(t, ctx, ns, "recon-a").Spec; a.Approval != nil || a.Rollback != nil {
		t.Fatalf("a refused command wrote the spec: %+v", a)
	}

	for _, format := range []string{"json", "yaml"} {
		t.Run("status -o "+format, func(t *testing.T) {
			r := pluginQuiet(t, kc, ns, "", "status", "-o", format)
			if what, bad := terminalHazard(r.out+r.errOut, true); bad {
				t.Fatalf("printed %s raw:\n%s", what, esc(r.out))
			}
			if r.code != ExitRefused || !strings.Contains(r.out, "ProjectionRecoveryList") {
				t.Fatalf("exit %d, want 3 with the list", r.code)
			}
		})
	}
}

// pluginQuiet is plugin without logging the raw output (the test's own log
// would then carry what it checks the plugin never prints); it logs the
// output escaped instead.
func pluginQuiet(t *testing.T, kubeconfig, ns, in string, args ...string) result {
	t.Helper()
	var out, errOut strings.Builder
	all := append([]string{"--kubeconfig", kubeconfig, "--namespace", ns}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := run(ctx, all, genericiooptions.IOStreams{In: strings.NewReader(in), Out: &out, ErrOut: &errOut})
	t.Logf("kubectl projection %s -> exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, escText(out.String()), escText(errOut.String()))
	return result{code, out.String(), errOut.String()}
}
