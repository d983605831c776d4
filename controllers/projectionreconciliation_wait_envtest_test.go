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
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/completeness"
	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// waitingFor: the reconciliation shows a scheduled dry run waiting, its
// message containing what, with no run recorded for its current spec.
func waitingFor(what string) func(*recoveryv1.ProjectionReconciliation) bool {
	return func(o *recoveryv1.ProjectionReconciliation) bool {
		c := meta.FindStatusCondition(o.Status.Conditions, recoveryv1.ConditionReconciling)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonWaitingForCatchUp && strings.Contains(c.Message, what) &&
			o.Status.ObservedGeneration != o.Generation
	}
}

func reportedAt(gen int64) func(*recoveryv1.ProjectionReconciliation) bool {
	return func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.RunState == recoveryv1.RunReported && o.Status.Report != nil && o.Status.ObservedGeneration == gen && o.Generation == gen
	}
}

// TestEnvtest_ScheduledDryRunWaitsForCatchUps, on real parts (apiserver,
// PostgreSQL, a reference member): a scheduled dry run neither starts
// before its recovery's first catch-up ends nor while another scope of
// its database, or another recovery of its manager, catches up, and reads
// nothing meanwhile (no run, no
// report, its spec not marked evaluated); it runs once the catch-up
// ends, and beside one that lasts past recon.ScheduledWaitLimit.
func TestEnvtest_ScheduledDryRunWaitsForCatchUps(t *testing.T) {
	ns := newNamespace(t)
	lbl, sel := shard(t, "waits")
	f := newFixture(t, "recon-waits", 120, 0.2)
	rec := f.recovery(ns, "waits", lbl, nil)
	name := "waits-every-minute"
	pr := &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: recoveryv1.ProjectionReconciliationSpec{RecoveryRef: recoveryv1.RecoveryReference{Name: rec.Name},
			Schedule: &recoveryv1.ReconciliationSchedule{Interval: metav1.Duration{Duration: time.Minute}}}}
	if err := k8sClient.Create(bg, pr); err != nil {
		t.Fatal(err)
	}

	// No manager recovers the scope yet: its first catch-up is ahead.
	waitRecon(t, ns, name, "the first scheduled run waiting for its scope's catch-up", waitingFor("its scope is catching up"))
	time.Sleep(3 * time.Second)
	if o := getRecon(t, ns, name); o.Status.LastRunAt != nil || o.Status.Report != nil || o.Status.RunState != "" {
		t.Fatalf("a waiting scheduled run ran: lastRunAt %v, runState %q, report %+v", o.Status.LastRunAt, o.Status.RunState, o.Status.Report)
	}
	var runs int
	if err := f.pool.QueryRow(bg, `SELECT count(*) FROM projection_reconciliation_runs WHERE scope = $1`, f.scope).Scan(&runs); err != nil {
		t.Fatal(err)
	}
	if runs != 0 {
		t.Fatalf("%d run records while waiting", runs)
	}
	stop, _, err := startManager("waits", sel, true, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	waitState(t, ns, rec.Name, 60*time.Second, "CURRENT", isCurrentAt(f.boundary()))
	o := waitRecon(t, ns, name, "the run once the catch-up ended", reportedAt(1))
	if !o.Status.Report.Clean {
		t.Fatalf("report after the catch-up %+v, want clean", o.Status.Report)
	}

	// Another scope of the same database catching up (its cursor moved now).
	other := "other-" + f.scope
	if _, err := f.pool.Exec(bg, `INSERT INTO projection_catchup_cursor (scope, state) VALUES ($1, 'CATCHING_UP')`, other); err != nil {
		t.Fatal(err)
	}
	setSpec(t, ns, name, func(s *recoveryv1.ProjectionReconciliationSpec) {
		s.StaleAfter = &metav1.Duration{Duration: 7 * time.Minute}
	})
	waitRecon(t, ns, name, "the edited schedule waiting for the other scope", waitingFor("scope "+other+" of the same database"))
	if _, err := f.pool.Exec(bg, `UPDATE projection_catchup_cursor SET state = 'CURRENT', updated_at = clock_timestamp() WHERE scope = $1`, other); err != nil {
		t.Fatal(err)
	}
	waitRecon(t, ns, name, "the run once the other scope is current", reportedAt(2))

	// A recovery of this manager catching up, of another database: the
	// manager's completeness registry says so, as its recovery worker
	// records every cycle.
	defer suiteRecon.Registry.Forget(ns, "elsewhere")
	suiteRecon.Registry.CycleEnded(ns, "elsewhere", "elsewhere-scope", time.Now(), completeness.Completeness{State: "CATCHING_UP"})
	setSpec(t, ns, name, func(s *recoveryv1.ProjectionReconciliationSpec) {
		s.StaleAfter = &metav1.Duration{Duration: 6 * time.Minute}
	})
	waitRecon(t, ns, name, "the edited schedule waiting for this manager's catch-up", waitingFor("recovery "+ns+"/elsewhere of this manager"))
	suiteRecon.Registry.CycleEnded(ns, "elsewhere", "elsewhere-scope", time.Now(), completeness.Completeness{State: "CURRENT"})
	waitRecon(t, ns, name, "the run once this manager's catch-up ended", reportedAt(3))

	// A catch-up that never ends holds it up to the limit, then it runs beside it.
	if _, err := f.pool.Exec(bg, `UPDATE projection_catchup_cursor SET state = 'CATCHING_UP', updated_at = clock_timestamp() WHERE scope = $1`, other); err != nil {
		t.Fatal(err)
	}
	setSpec(t, ns, name, func(s *recoveryv1.ProjectionReconciliationSpec) {
		s.StaleAfter = &metav1.Duration{Duration: 8 * time.Minute}
	})
	waitRecon(t, ns, name, "waiting again", waitingFor(other))
	reconClock.shift(recon.ScheduledWaitLimit + 2*time.Minute)
	defer reconClock.shift(0)
	waitRecon(t, ns, name, "the run past the wait limit", reportedAt(4))
}
