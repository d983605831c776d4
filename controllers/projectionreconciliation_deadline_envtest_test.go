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
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// suiteReconRunTimeout is the suite reconciliation controller's deadline.
const suiteReconRunTimeout = 20 * time.Second

// TestEnvtest_ReconciliationRunDeadline: a source that accepts connections
// and never answers (request timeout far beyond the run's deadline) makes a
// dry run hang. It ends at the run's deadline, reports nothing (runState
// failed, the condition naming the deadline), and, with two workers,
// another reconciliation's dry run completes while it hangs.
func TestEnvtest_ReconciliationRunDeadline(t *testing.T) {
	ns := newNamespace(t)
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hole.Close() })
	go func() {
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() }) // held open, never answered
		}
	}()
	f := newFixture(t, "deadline", 60, 0)
	stuck := f.recovery(ns, "stuck", nil, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.Suspend = true // no recovery cycle: only the reconciliation reads the source
		s.Source.URL = "http://" + hole.Addr().String()
		s.Source.RequestTimeout = &metav1.Duration{Duration: 10 * time.Minute}
	})
	healthy := newFixture(t, "deadline-ok", 60, 0)
	ok := healthy.recovery(ns, "healthy", nil, func(s *recoveryv1.ProjectionRecoverySpec) { s.Suspend = true })

	start := time.Now()
	for _, name := range []string{stuck.Name, ok.Name} {
		if err := k8sClient.Create(bg, &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "recon-" + name},
			Spec: recoveryv1.ProjectionReconciliationSpec{RecoveryRef: recoveryv1.RecoveryReference{Name: name}}}); err != nil {
			t.Fatal(err)
		}
	}
	waitRecon(t, ns, "recon-"+ok.Name, "the healthy dry run beside the hanging one", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.RunState == recoveryv1.RunReported
	})
	if took := time.Since(start); took >= suiteReconRunTimeout {
		t.Fatalf("the healthy dry run took %s: it waited for the hanging one", took)
	}
	o := waitRecon(t, ns, "recon-"+stuck.Name, "the hanging dry run ended by its deadline", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.RunState == recoveryv1.RunFailed
	})
	c := meta.FindStatusCondition(o.Status.Conditions, recoveryv1.ConditionReconciling)
	if c == nil || !strings.Contains(c.Message, "did not finish within its deadline") || o.Status.Report != nil {
		t.Fatalf("condition %+v, report %+v: want the deadline named and no report", c, o.Status.Report)
	}
	if took := time.Since(start); took > suiteReconRunTimeout+30*time.Second {
		t.Fatalf("the hanging dry run ended after %s, deadline %s", took, suiteReconRunTimeout)
	}
}
