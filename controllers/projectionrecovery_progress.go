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
	"math"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/catchup"
	"github.com/projection-recovery/projection-recovery/internal/progress"
)

// progressTracker keeps, per resource, the samples of the last
// progress.Window: the estimator `kubectl projection status --watch` runs
// too, on the same status fields, so the plugin and status.progress agree.
type progressTracker = progress.Tracker[types.NamespacedName]

// progressFor is status.progress for an estimate: the rate rounded to whole
// events, and the ETA when one is known (empty while nothing is verified to
// scale the lag by, or when the scope is not gaining on its boundary).
func progressFor(e progress.Estimate) *recoveryv1.CatchUpProgress {
	p := &recoveryv1.CatchUpProgress{EventsPerSecond: int64(math.Round(e.EventsPerSecond))}
	if e.ETAState == progress.ETAKnown {
		p.ETA = e.ETA.String()
	}
	return p
}

// updateProgress sets status.progress after the cycle: a
// scope CATCHING_UP gets the rate its cursor showed over the window (status
// keeps the last figure while the window is too short); any other state
// clears it, so a CURRENT scope's status does not change at every cycle.
func (r *ProjectionRecoveryReconciler) updateProgress(s *recoveryScope, c *catchup.Result) {
	st := &s.obj.Status
	key := client.ObjectKeyFromObject(s.obj)
	if s.state != recoveryv1.StateCatchingUp {
		st.Progress = nil
		r.progress.Forget(key)
		return
	}
	if c == nil || !c.CursorRead {
		return
	}
	now := s.now // the cycle's start; the clock's reading after the cycle is closer to the count
	if r.Clock != nil {
		now = r.Clock.Now()
	}
	e := r.progress.Observe(key, progress.Sample{At: now, Events: st.EventCount, Verified: st.VerifiedThroughSeq, Lag: st.Lag})
	if e.RateKnown {
		st.Progress = progressFor(e)
	}
}
