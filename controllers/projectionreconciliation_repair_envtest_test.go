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
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

// TestEnvtest_RepairDoesNotWaitForTheRecoveryAndDriftIsShown: a CURRENT
// scope whose recovery holds the lease (it has just applied pages) gets a
// nudged average cost. The recovery stays CURRENT but says it: DriftDetected
// True naming the reconciliation, status.openDrift, the completeness
// endpoint. An approved repair then runs within seconds: the recovery steps
// aside (releases its lease) when the apply meets it, and status never
// shows lease_unavailable for what was only a wait. After the repair the
// drift is gone from the recovery too.
func TestEnvtest_RepairDoesNotWaitForTheRecoveryAndDriftIsShown(t *testing.T) {
	installApprovalManifests(t)
	ns := newNamespace(t)
	grantApprove(t, ns, "alice")
	f := newFixture(t, "handover", 120, 0.2)
	rec := f.recovery(ns, "handover", nil, nil)
	waitState(t, ns, rec.Name, 60*time.Second, "CURRENT", isCurrentAt(f.boundary()))
	// New events: the recovery's next cycle applies a page and keeps the lease.
	f.step(30)
	waitState(t, ns, rec.Name, 60*time.Second, "CURRENT at the new boundary", isCurrentAt(f.boundary()))
	if _, err := f.pool.Exec(bg, `UPDATE positions SET avg_cost = avg_cost + 0.5 WHERE scope = $1 AND quantity <> 0 AND (account, instrument) =
 (SELECT account, instrument FROM positions WHERE scope = $1 AND quantity <> 0 ORDER BY account, instrument LIMIT 1)`, f.scope); err != nil {
		t.Fatal(err)
	}
	pr := createRepairReconciliation(t, f, ns, "fix-handover", rec.Name)
	o := waitRecon(t, ns, pr.Name, "a plan", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.RunState == recoveryv1.RunReported && o.Status.Plan != nil && o.Status.Plan.Actions > 0
	})

	got, _ := waitState(t, ns, rec.Name, 30*time.Second, "CURRENT with open drift", func(r *recoveryv1.ProjectionRecovery) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, recoveryv1.ConditionDriftDetected)
		return r.Status.State == recoveryv1.StateCurrent && c != nil && c.Status == metav1.ConditionTrue && r.Status.OpenDrift != nil
	})
	if d := got.Status.OpenDrift; d.Reconciliation != pr.Name || d.Findings != o.Status.Report.Findings {
		t.Fatalf("openDrift %+v, want %s with %d findings", d, pr.Name, o.Status.Report.Findings)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, recoveryv1.ConditionDriftDetected); !strings.Contains(c.Message, pr.Name) {
		t.Fatalf("DriftDetected message %q does not name %s", c.Message, pr.Name)
	}
	eventually(t, 10*time.Second, "the completeness endpoint names the drift", func() (bool, error) {
		for _, sc := range suiteRec.Registry.Snapshot().Scopes {
			if sc.Namespace == ns && sc.Name == rec.Name {
				d := sc.Completeness.OpenDrift
				return d != nil && d.Reconciliation == pr.Name && sc.Completeness.State == string(recoveryv1.StateCurrent), nil
			}
		}
		return false, nil
	})

	var owner string
	var unexpired bool
	if err := f.pool.QueryRow(bg, `SELECT owner, expires_at > now() FROM projection_catchup_lease WHERE scope = $1`, f.scope).Scan(&owner, &unexpired); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(owner, "/"+ns) || !unexpired {
		t.Fatalf("lease owner %q (unexpired %t): want the recovery holding it", owner, unexpired)
	}

	results := watchOutcomes(t, ns, pr.Name)
	defer func() {
		if t.Failed() {
			var last recoveryv1.ProjectionReconciliation
			_ = k8sClient.Get(bg, client.ObjectKey{Namespace: ns, Name: pr.Name}, &last)
			t.Logf("outcomes seen: %v; last outcome %+v; conditions %+v", results(), last.Status.Outcome, last.Status.Conditions)
		}
	}()
	start := time.Now()
	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) { s.Approval = approvalOf(o, "alice", nil) })
	o = waitRecon(t, ns, pr.Name, "apply ok", outcomeIs(opApply, resultOK, o.Status.Plan.PlanID))
	took := time.Since(start)
	seen := results()
	t.Logf("apply ok after %s; outcomes seen: %v", took, seen)
	for _, r := range seen {
		if r != resultOK && r != resultWaiting {
			t.Fatalf("status showed %q while the repair waited for the lease (outcomes %v)", r, seen)
		}
	}
	if took > 15*time.Second {
		t.Fatalf("the approved repair took %s: it waited for the recovery's lease to expire", took)
	}
	storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())
	waitState(t, ns, rec.Name, 60*time.Second, "drift cleared", func(r *recoveryv1.ProjectionRecovery) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, recoveryv1.ConditionDriftDetected)
		return c != nil && c.Status == metav1.ConditionFalse && r.Status.OpenDrift == nil && r.Status.State == recoveryv1.StateCurrent
	})
}

// watchOutcomes polls the reconciliation's outcome result until the test
// ends; the returned function lists the distinct results seen, in order.
func watchOutcomes(t *testing.T, ns, name string) func() []string {
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			var o recoveryv1.ProjectionReconciliation
			if err := k8sClient.Get(bg, client.ObjectKey{Namespace: ns, Name: name}, &o); err != nil || o.Status.Outcome == nil {
				continue
			}
			mu.Lock()
			if r := o.Status.Outcome.Result; len(seen) == 0 || seen[len(seen)-1] != r {
				seen = append(seen, r)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string{}, seen...)
	}
}
