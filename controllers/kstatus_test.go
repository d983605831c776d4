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
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/codes"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/catchup"
	"github.com/projection-recovery/projection-recovery/internal/completeness"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// TestKstatus_ComputesFromOurConditions: kstatus (what kubectl wait, Argo CD
// and Flux use) reads CURRENT as Current, CATCHING_UP and RETRYING as
// InProgress, BLOCKED as Failed, through the status computeStatus writes.
func TestKstatus_ComputesFromOurConditions(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	r := &ProjectionRecoveryReconciler{Clock: clk, Registry: completeness.NewRegistry(clk.Now), Metrics: NewMetrics(prometheus.NewRegistry())}
	cases := []struct {
		name   string
		state  recoveryv1.RecoveryState
		reason string
		want   kstatus.Status
	}{
		{"current is Current", recoveryv1.StateCurrent, "", kstatus.CurrentStatus},
		{"catching up is InProgress", recoveryv1.StateCatchingUp, "", kstatus.InProgressStatus},
		{"retrying is InProgress", recoveryv1.StateRetrying, string(codes.SourceUnavailable), kstatus.InProgressStatus},
		{"blocked is Failed", recoveryv1.StateBlocked, string(codes.OrphanTrade), kstatus.FailedStatus},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &recoveryv1.ProjectionRecovery{
				TypeMeta:   metav1.TypeMeta{APIVersion: recoveryv1.GroupVersion.String(), Kind: "ProjectionRecovery"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", Generation: 4},
			}
			s := &recoveryScope{obj: obj, now: clk.Now(), state: tc.state, reason: tc.reason, message: "m",
				cycle: &catchup.Result{State: catchup.State(tc.state), Cursor: store.Cursor{VerifiedThroughSeq: 10}, Boundary: 20}}
			r.computeStatus(s)
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				t.Fatal(err)
			}
			res, err := kstatus.Compute(&unstructured.Unstructured{Object: m})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.want {
				t.Errorf("%s: kstatus = %s (%s), want %s", tc.state, res.Status, res.Message, tc.want)
			}
		})
	}

	// A status computed for an older generation is InProgress whatever it says.
	obj := &recoveryv1.ProjectionRecovery{ObjectMeta: metav1.ObjectMeta{Generation: 5}}
	r.computeStatus(&recoveryScope{obj: obj, now: clk.Now(), state: recoveryv1.StateCurrent, cycle: &catchup.Result{}})
	obj.Generation = 6
	m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if res, _ := kstatus.Compute(&unstructured.Unstructured{Object: m}); res.Status != kstatus.InProgressStatus {
		t.Errorf("stale observedGeneration: kstatus = %s, want InProgress", res.Status)
	}
}
