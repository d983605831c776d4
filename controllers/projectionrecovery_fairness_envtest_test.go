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

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// TestEnvtest_LongBacklogDoesNotStarveOthers: on a manager with one worker,
// a scope with a long backlog catches up in many short cycles; a scope
// created while it does is served between them and is CURRENT long before
// the first one is. Between cycles the scope goes back through the work
// queue, behind whatever is waiting (catchingUpRequeue).
func TestEnvtest_LongBacklogDoesNotStarveOthers(t *testing.T) {
	ns := newNamespace(t)
	long := newFixture(t, "backlog-long", 3000, 0.3)
	short := newFixture(t, "backlog-short", 30, 0.3)
	lbl, sel := shard(t, "fairness")
	stop, _, err := startManager("fairness", sel, true, "", func(r *ProjectionRecoveryReconciler) { r.MaxConcurrentReconciles = 1 })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	small := func(s *recoveryv1.ProjectionRecoverySpec) { s.PageSize, s.PagesPerCycle = 25, 1 }
	a := long.recovery(ns, "long", lbl, small)
	waitState(t, ns, a.Name, 30*time.Second, "the long backlog under way", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.State == recoveryv1.StateCatchingUp && o.Status.VerifiedThroughSeq > 0
	})
	b := short.recovery(ns, "short", lbl, small)
	waitState(t, ns, b.Name, 30*time.Second, "CURRENT", isCurrentAt(short.boundary()))
	if got := getRecovery(t, ns, a.Name); got.Status.State == recoveryv1.StateCurrent || got.Status.VerifiedThroughSeq >= long.boundary() {
		t.Fatalf("the long backlog finished (%s at %d of %d) before the short scope was served: it monopolised the worker",
			got.Status.State, got.Status.VerifiedThroughSeq, long.boundary())
	}
}
