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
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/codes"
)

// series gathers one family of reg as "label=value,... value" lines (labels
// sorted), for assertions that read like the exposition format.
func series(t *testing.T, reg *prometheus.Registry, family string) []string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			out = append(out, fmt.Sprintf("%s %g", strings.Join(ls, ","), m.GetGauge().GetValue()))
		}
	}
	sort.Strings(out)
	return out
}

// withStatus is obj with the status computeStatus would write for state and
// reason: status.state only when there is one, the conditions from the
// reason when it is stateless.
func withStatus(state recoveryv1.RecoveryState, prevState recoveryv1.RecoveryState, reason string) *recoveryv1.ProjectionRecovery {
	obj := &recoveryv1.ProjectionRecovery{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r", Generation: 1},
		Spec: recoveryv1.ProjectionRecoverySpec{Scope: "s"}}
	st := &obj.Status
	st.ObservedGeneration, st.State, st.Reason = 1, prevState, reason
	if state != "" {
		st.State = state
	}
	condState := state
	if stateless(reason) {
		condState = ""
	}
	applyConditions(&st.Conditions, conditionsFor(condState, reason, "m"), 1, metav1.NewTime(time.Unix(0, 0)))
	return obj
}

// TestMetrics_ConditionsCarryStalledReasons: a scope an operator must act on
// without being BLOCKED (the schema missing, a missing Secret, auto-recovery
// off while behind, a duplicate of another resource's scope) shows in
// projection_recovery_condition as Stalled=1 with its reason, and Ready=0
// with the same reason, so that an alert can select it. The state gauge
// carries no empty state label: a scope that never had a state exports every
// state at 0, one with a state keeps mirroring status.state. A reason that
// changes replaces the series of the old one.
func TestMetrics_ConditionsCarryStalledReasons(t *testing.T) {
	const base = "name=r,namespace=ns,reason=%s,scope=s,type=%s %g"
	for _, tc := range []struct {
		name        string
		state, prev recoveryv1.RecoveryState
		reason      string
		wantReason  string
		wantStates  []string
	}{
		{"schema missing on a new scope", "", "", string(codes.SchemaMissing), recoveryv1.ReasonSchemaMissing, zeroStates()},
		{"schema missing on a scope that was CURRENT", "", recoveryv1.StateCurrent, string(codes.SchemaMissing), recoveryv1.ReasonSchemaMissing, oneState(recoveryv1.StateCurrent)},
		{"Secret not found", "", "", recoveryv1.ReasonSecretNotFound, recoveryv1.ReasonSecretNotFound, zeroStates()},
		{"auto-recovery off, behind", recoveryv1.StateCatchingUp, "", recoveryv1.ReasonAutoRecoveryDisabled, recoveryv1.ReasonAutoRecoveryDisabled, oneState(recoveryv1.StateCatchingUp)},
		{"duplicate scope", "", "", recoveryv1.ReasonDuplicateScope, recoveryv1.ReasonDuplicateScope, zeroStates()},
		{"blocked", recoveryv1.StateBlocked, "", string(codes.OrphanTrade), recoveryv1.ReasonBlocked, oneState(recoveryv1.StateBlocked)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := NewMetrics(reg)
			m.observeStatus(withStatus(tc.state, tc.prev, tc.reason))
			want := []string{
				fmt.Sprintf(base, tc.wantReason, recoveryv1.ConditionReady, 0.0),
				fmt.Sprintf(base, tc.wantReason, recoveryv1.ConditionReconciling, 0.0),
				fmt.Sprintf(base, tc.wantReason, recoveryv1.ConditionStalled, 1.0),
			}
			if got := series(t, reg, "projection_recovery_condition"); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("projection_recovery_condition:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if got := series(t, reg, "projection_recovery_state"); strings.Join(got, "\n") != strings.Join(tc.wantStates, "\n") {
				t.Fatalf("projection_recovery_state:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.wantStates, "\n"))
			}

			// Fixed: the stalled reason's series go, the new reason's come.
			m.observeStatus(withStatus(recoveryv1.StateCurrent, "", ""))
			want = []string{
				fmt.Sprintf(base, recoveryv1.ReasonCurrent, recoveryv1.ConditionReady, 1.0),
				fmt.Sprintf(base, recoveryv1.ReasonCurrent, recoveryv1.ConditionReconciling, 0.0),
				fmt.Sprintf(base, recoveryv1.ReasonCurrent, recoveryv1.ConditionStalled, 0.0),
			}
			if got := series(t, reg, "projection_recovery_condition"); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("after CURRENT, projection_recovery_condition:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			m.forget(withStatus(recoveryv1.StateCurrent, "", ""))
			if got := series(t, reg, "projection_recovery_condition"); len(got) != 0 {
				t.Fatalf("after forget: %v", got)
			}
		})
	}
}

func zeroStates() []string { return oneState("") }

// oneState is the state gauge's series with only state at 1.
func oneState(state recoveryv1.RecoveryState) []string {
	var out []string
	for _, s := range recoveryStates {
		v := 0.0
		if s == state {
			v = 1
		}
		out = append(out, fmt.Sprintf("name=r,namespace=ns,scope=s,state=%s %g", s, v))
	}
	sort.Strings(out)
	return out
}

// TestMetrics_ConditionsConcurrent: reconcile workers publish status in
// parallel (one resource each, and a resource requeued on another worker):
// each resource keeps one series per condition type whatever the
// interleaving, and the next status replaces them (run under -race by make
// test).
func TestMetrics_ConditionsConcurrent(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				reason := []string{recoveryv1.ReasonSecretNotFound, recoveryv1.ReasonDuplicateScope}[(w+i)%2]
				obj := withStatus("", "", reason)
				obj.Name = fmt.Sprintf("r%d", w%4)
				m.observeStatus(obj)
			}
		}()
	}
	wg.Wait()
	if got := series(t, reg, "projection_recovery_condition"); len(got) != 4*3 {
		t.Fatalf("%d series, want one per condition type of 4 resources:\n%s", len(got), strings.Join(got, "\n"))
	}
	for r := range 4 {
		obj := withStatus(recoveryv1.StateCurrent, "", "")
		obj.Name = fmt.Sprintf("r%d", r)
		m.observeStatus(obj)
	}
	got := series(t, reg, "projection_recovery_condition")
	if len(got) != 4*3 {
		t.Fatalf("%d series, want one per condition type of 4 resources:\n%s", len(got), strings.Join(got, "\n"))
	}
	for _, s := range got {
		if !strings.Contains(s, "reason="+recoveryv1.ReasonCurrent) {
			t.Fatalf("a series outlived its reason: %s", s)
		}
	}
}
