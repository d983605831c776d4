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
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	lua "github.com/yuin/gopher-lua"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/catchup"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/completeness"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// The Argo CD health check, shipped twice: in config/ for kustomize users and
// in the chart's docs/ for Helm users (copied by make manifests). Both must be
// the script tested here.
const (
	healthLua      = "../config/health/health.lua"
	chartHealthLua = "../charts/projection-recovery/docs/health.lua"
)

func TestHealthLua_ChartCopyIsIdentical(t *testing.T) {
	a, err := os.ReadFile(healthLua)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(chartHealthLua)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("%s and %s differ: run make manifests (hack/chart-copies.sh)", healthLua, chartHealthLua)
	}
}

// argoHealth runs the script as Argo CD does: the resource as the global
// obj, the returned table's status and message.
func argoHealth(t *testing.T, script string, obj map[string]any) (status, message string) {
	t.Helper()
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		t.Fatalf("health.lua failed: %v", err)
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("health.lua returned %s, want a table", L.Get(-1).Type())
	}
	return lua.LVAsString(ret.RawGetString("status")), lua.LVAsString(ret.RawGetString("message"))
}

// toLua converts decoded JSON the way Argo CD hands a resource to Lua:
// objects and arrays as tables, numbers as Lua numbers.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range v {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case nil:
		return lua.LNil
	}
	panic(fmt.Sprintf("toLua: unexpected %T", v))
}

func unstructuredOf(t *testing.T, obj runtime.Object) map[string]any {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func kstatusOf(t *testing.T, m map[string]any) kstatus.Status {
	t.Helper()
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: m})
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

// TestGitOpsHealth_EveryRecoveryState: for every situation the controller
// can write, the status computeStatus produces is read by the Argo CD script
// and by kstatus (kubectl wait, Flux, cli-utils) to the verdict docs/gitops.md
// promises, with a message naming the state. Every verdict but InProgress is
// settled: a GitOps tool waiting on it ends.
func TestGitOpsHealth_EveryRecoveryState(t *testing.T) {
	script, err := os.ReadFile(healthLua)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	r := &ProjectionRecoveryReconciler{Clock: clk, Registry: completeness.NewRegistry(clk.Now), Metrics: NewMetrics(prometheus.NewRegistry())}
	cursor := store.Cursor{Exists: true, VerifiedThroughSeq: 10, LastObservedBoundarySeq: 20}
	cycle := func(state recoveryv1.RecoveryState) *catchup.Result {
		return &catchup.Result{State: catchup.State(state), CursorRead: true, Cursor: cursor, Boundary: 20}
	}
	cases := []struct {
		name     string
		scope    *recoveryScope // nil: the controller has written no status yet
		suspend  bool
		bumpGen  bool // the spec changed after the status was written
		argo     string
		argoSays string // a part of the Argo CD message
		kstatus  kstatus.Status
	}{
		{name: "no status yet", argo: "Progressing", argoSays: "first status",
			// kstatus has nothing to read before the first write; the
			// controller writes one at its first reconcile.
			kstatus: kstatus.CurrentStatus},
		{name: "awaiting the first cycle", scope: &recoveryScope{},
			argo: "Progressing", argoSays: recoveryv1.ReasonAwaitingFirstCycle, kstatus: kstatus.InProgressStatus},
		{name: "CURRENT", scope: &recoveryScope{state: recoveryv1.StateCurrent, message: "verified", cycle: cycle(recoveryv1.StateCurrent)},
			argo: "Healthy", argoSays: "CURRENT: verified through 10, boundary 20", kstatus: kstatus.CurrentStatus},
		{name: "CATCHING_UP", scope: &recoveryScope{state: recoveryv1.StateCatchingUp, message: "applying", cycle: cycle(recoveryv1.StateCatchingUp)},
			argo: "Progressing", argoSays: "CATCHING_UP: verified through 10, boundary 20, lag 10", kstatus: kstatus.InProgressStatus},
		{name: "RETRYING", scope: &recoveryScope{state: recoveryv1.StateRetrying, reason: string(codes.SourceUnavailable), message: "member down", cycle: cycle(recoveryv1.StateRetrying)},
			argo: "Progressing", argoSays: "RETRYING SOURCE_UNAVAILABLE: member down", kstatus: kstatus.InProgressStatus},
		{name: "BLOCKED", scope: &recoveryScope{state: recoveryv1.StateBlocked, reason: string(codes.OrphanTrade), message: "orphan trade t-1", cycle: cycle(recoveryv1.StateBlocked)},
			argo: "Degraded", argoSays: "BLOCKED ORPHAN_TRADE: orphan trade t-1", kstatus: kstatus.FailedStatus},
		{name: "auto-recovery off, scope behind", scope: &recoveryScope{state: recoveryv1.StateCatchingUp, reason: recoveryv1.ReasonAutoRecoveryDisabled,
			message: "auto-recovery is disabled on this manager", cycle: cycle(recoveryv1.StateCatchingUp)},
			argo: "Degraded", argoSays: "AutoRecoveryDisabled: auto-recovery is disabled", kstatus: kstatus.FailedStatus},
		{name: "auto-recovery off, scope current", scope: &recoveryScope{state: recoveryv1.StateCurrent, message: "verified", cycle: cycle(recoveryv1.StateCurrent)},
			argo: "Healthy", argoSays: "CURRENT", kstatus: kstatus.CurrentStatus},
		{name: "suspended", suspend: true, scope: &recoveryScope{reason: recoveryv1.ReasonSuspended, message: "spec.suspend is true: no cycle runs"},
			argo: "Suspended", argoSays: "spec.suspend is true", kstatus: kstatus.CurrentStatus},
		{name: "an approved repair waits for the lease", scope: &recoveryScope{reason: recoveryv1.ReasonRepairPending, message: "the approved apply of ProjectionReconciliation fix waits for the scope's lease"},
			argo: "Progressing", argoSays: recoveryv1.ReasonRepairPending, kstatus: kstatus.InProgressStatus},
		{name: "secret missing", scope: &recoveryScope{reason: recoveryv1.ReasonSecretNotFound, message: "secret db not found"},
			argo: "Degraded", argoSays: "SecretNotFound: secret db not found", kstatus: kstatus.FailedStatus},
		{name: "schema missing", scope: &recoveryScope{reason: string(codes.SchemaMissing), message: "run manager migrate", cycle: &catchup.Result{}},
			argo: "Degraded", argoSays: "SchemaMissing: run manager migrate", kstatus: kstatus.FailedStatus},
		{name: "duplicate scope", scope: &recoveryScope{reason: recoveryv1.ReasonDuplicateScope, message: "owned by ns/other"},
			argo: "Degraded", argoSays: "DuplicateScope: owned by ns/other", kstatus: kstatus.FailedStatus},
		{name: "stale observedGeneration", bumpGen: true, scope: &recoveryScope{state: recoveryv1.StateCurrent, message: "verified", cycle: cycle(recoveryv1.StateCurrent)},
			argo: "Progressing", argoSays: "not observed generation 5 yet (status is for 4)", kstatus: kstatus.InProgressStatus},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &recoveryv1.ProjectionRecovery{
				TypeMeta:   metav1.TypeMeta{APIVersion: recoveryv1.GroupVersion.String(), Kind: "ProjectionRecovery"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", Generation: 4},
				Spec:       recoveryv1.ProjectionRecoverySpec{Scope: "s", Suspend: tc.suspend},
			}
			m := unstructuredOf(t, obj)
			if tc.scope != nil {
				s := *tc.scope
				s.obj, s.now = obj, clk.Now()
				r.computeStatus(&s)
				if tc.bumpGen {
					obj.Generation++
				}
				m = unstructuredOf(t, obj)
			} else {
				delete(m, "status")
			}
			status, msg := argoHealth(t, string(script), m)
			if status != tc.argo || !strings.Contains(msg, tc.argoSays) {
				t.Errorf("Argo CD health = %s %q, want %s containing %q", status, msg, tc.argo, tc.argoSays)
			}
			if got := kstatusOf(t, m); got != tc.kstatus {
				t.Errorf("kstatus = %s, want %s", got, tc.kstatus)
			}
		})
	}
}

// TestGitOpsHealth_Reconciliation: the same script reads a
// ProjectionReconciliation through the conditions reconConditions sets.
func TestGitOpsHealth_Reconciliation(t *testing.T) {
	script, err := os.ReadFile(healthLua)
	if err != nil {
		t.Fatal(err)
	}
	clean := &recoveryv1.ReportSummary{Clean: true}
	drift := &recoveryv1.ReportSummary{Clean: false, Findings: 2}
	cases := []struct {
		name     string
		status   recoveryv1.ProjectionReconciliationStatus
		stall    string
		argo     string
		argoSays string
		kstatus  kstatus.Status
		approval *recoveryv1.ReconciliationApproval
	}{
		{"pending run", recoveryv1.ProjectionReconciliationStatus{RunState: recoveryv1.RunPending}, "", "Progressing", ReasonRunning, kstatus.InProgressStatus, nil},
		{"failed run retries", recoveryv1.ProjectionReconciliationStatus{RunState: recoveryv1.RunFailed}, "", "Progressing", ReasonRunFailed, kstatus.InProgressStatus, nil},
		{"clean report", recoveryv1.ProjectionReconciliationStatus{RunState: recoveryv1.RunReported, Report: clean}, "", "Healthy", ReasonReported, kstatus.CurrentStatus, nil},
		// Drift waits for an approver: settled (Failed for kstatus, so a
		// GitOps wait ends) and Degraded.
		{"drift found", recoveryv1.ProjectionReconciliationStatus{RunState: recoveryv1.RunReported, Report: drift}, "", "Degraded", ReasonDrift, kstatus.FailedStatus, nil},
		{"approved repair retried", recoveryv1.ProjectionReconciliationStatus{RunState: recoveryv1.RunReported, Report: drift,
			Outcome: &recoveryv1.OutcomeSummary{Operation: opApply, PlanID: "p1", Result: "lease_unavailable"}}, "", "Progressing", ReasonDrift, kstatus.InProgressStatus,
			&recoveryv1.ReconciliationApproval{PlanID: "p1"}},
		{"recovery missing", recoveryv1.ProjectionReconciliationStatus{}, ReasonRecoveryNotFound, "Degraded", ReasonRecoveryNotFound, kstatus.FailedStatus, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &recoveryv1.ProjectionReconciliation{
				TypeMeta:   metav1.TypeMeta{APIVersion: recoveryv1.GroupVersion.String(), Kind: "ProjectionReconciliation"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", Generation: 2},
				Spec:       recoveryv1.ProjectionReconciliationSpec{Approval: tc.approval},
				Status:     tc.status,
			}
			obj.Status.ObservedGeneration = obj.Generation
			set := reconConditions(&obj.Spec, &obj.Status, tc.stall, "m")
			applyConditions(&obj.Status.Conditions, set, obj.Generation, metav1.Now())
			m := unstructuredOf(t, obj)
			status, msg := argoHealth(t, string(script), m)
			if status != tc.argo || !strings.Contains(msg, tc.argoSays) {
				t.Errorf("Argo CD health = %s %q, want %s containing %q", status, msg, tc.argo, tc.argoSays)
			}
			if got := kstatusOf(t, m); got != tc.kstatus {
				t.Errorf("kstatus = %s, want %s", got, tc.kstatus)
			}
		})
	}
}
