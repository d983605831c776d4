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

	corev1 "k8s.io/api/core/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

func TestDecide_TransitionEvent(t *testing.T) {
	st := func(s recoveryv1.RecoveryState, reason string) *recoveryv1.ProjectionRecoveryStatus {
		return &recoveryv1.ProjectionRecoveryStatus{State: s, Reason: reason, Message: "m"}
	}
	cases := []struct {
		name       string
		prev       recoveryv1.RecoveryState
		prevReason string
		now        *recoveryv1.ProjectionRecoveryStatus
		wantOK     bool
		wantType   string
		wantReason string
	}{
		{"first cycle catching up", "", "", st(recoveryv1.StateCatchingUp, ""), true, corev1.EventTypeNormal, recoveryv1.ReasonCatchingUp},
		{"still catching up", recoveryv1.StateCatchingUp, "", st(recoveryv1.StateCatchingUp, ""), false, "", ""},
		{"became current", recoveryv1.StateCatchingUp, "", st(recoveryv1.StateCurrent, ""), true, corev1.EventTypeNormal, recoveryv1.ReasonCurrent},
		{"blocked warns with the code", recoveryv1.StateCurrent, "", st(recoveryv1.StateBlocked, "ORPHAN_TRADE"), true, corev1.EventTypeWarning, "ORPHAN_TRADE"},
		{"still blocked on the same code", recoveryv1.StateBlocked, "ORPHAN_TRADE", st(recoveryv1.StateBlocked, "ORPHAN_TRADE"), false, "", ""},
		{"retrying on a new code", recoveryv1.StateRetrying, "SOURCE_UNAVAILABLE", st(recoveryv1.StateRetrying, "LEASE_HELD"), true, corev1.EventTypeWarning, "LEASE_HELD"},
		{"no state", "", "", st("", recoveryv1.ReasonSuspended), false, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			typ, reason, _, ok := transitionEvent(tc.prev, tc.prevReason, tc.now)
			if ok != tc.wantOK || typ != tc.wantType || reason != tc.wantReason {
				t.Errorf("%s: got (%s, %s, %v), want (%s, %s, %v)", tc.name, typ, reason, ok, tc.wantType, tc.wantReason, tc.wantOK)
			}
		})
	}
}

// TestDecide_WithdrawnEvent: a verified-through that goes down is a
// withdrawn completeness claim, worth a Warning of its own whatever the
// state does; it names the reconciliation that last touched the scope.

func TestDecide_WithdrawnEvent(t *testing.T) {
	st := func(v int64) *recoveryv1.ProjectionRecoveryStatus {
		return &recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateCatchingUp, VerifiedThroughSeq: v}
	}
	for _, tc := range []struct {
		name         string
		prev         int64
		now          *recoveryv1.ProjectionRecoveryStatus
		reconciledBy string
		wantOK       bool
		wantIn       []string
	}{
		{"first cycle", 0, st(120), "", false, nil},
		{"progress", 120, st(240), "", false, nil},
		{"unchanged", 240, st(240), "", false, nil},
		{"reset to genesis by a rollback", 240, st(0), "fix-orphan/plan-1-abc", true, []string{"verified through 240 is withdrawn", "went back to 0", "fix-orphan/plan-1-abc"}},
		{"reset by hand, part-way", 240, st(100), "", true, []string{"verified through 240 is withdrawn", "went back to 100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			note, ok := withdrawnEvent(tc.prev, tc.now, tc.reconciledBy)
			if ok != tc.wantOK {
				t.Fatalf("withdrawnEvent(%d, %d) ok = %v, want %v (%q)", tc.prev, tc.now.VerifiedThroughSeq, ok, tc.wantOK, note)
			}
			for _, w := range tc.wantIn {
				if !strings.Contains(note, w) {
					t.Errorf("note %q lacks %q", note, w)
				}
			}
			if !tc.wantOK && note != "" {
				t.Errorf("no event, but a note %q", note)
			}
		})
	}
}
