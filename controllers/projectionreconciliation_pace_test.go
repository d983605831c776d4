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
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// A scheduled dry run is paced at the manager's share; one a person asked
// for (no schedule) is not.
func TestDryRunPace_ScheduledOnly(t *testing.T) {
	minute := &recoveryv1.ReconciliationSchedule{Interval: metav1.Duration{Duration: time.Minute}}
	for _, tc := range []struct {
		name  string
		spec  recoveryv1.ProjectionReconciliationSpec
		share float64
		want  float64
	}{
		{"a schedule is paced at the flag's share", recoveryv1.ProjectionReconciliationSpec{Schedule: minute}, 0.1, 0.1},
		{"a schedule with pacing off", recoveryv1.ProjectionReconciliationSpec{Schedule: minute}, 0, 0},
		{"asked by a person: unpaced", recoveryv1.ProjectionReconciliationSpec{}, 0.1, 0},
		{"asked by a person with an approval: unpaced", recoveryv1.ProjectionReconciliationSpec{Approval: &recoveryv1.ReconciliationApproval{PlanID: "p", Approver: "a"}}, 0.1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := dryRunPace(&tc.spec, tc.share)
			if p.Share != tc.want || p.Now != nil || p.Sleep != nil {
				t.Fatalf("pace %+v, want share %v on real time", p, tc.want)
			}
		})
	}
}

// A paced detection stopped by its estimate is Stalled with its own
// reason (the fix is a flag), waits as a too-large scope does, and keeps
// the estimate in the message; any other snapshot_too_large keeps its.
func TestTooLargeStall_PacedPastDeadline(t *testing.T) {
	paced := fmt.Errorf("detect: %w: at 0.1 of one CPU it would end in about 14m", recon.ErrPacedPastDeadline)
	for _, tc := range []struct {
		name   string
		err    error
		reason string
	}{
		{"paced past the deadline", &recon.Error{Code: recon.ResultSnapshotTooLarge, Err: paced, Detail: "detect"}, ReasonDetectionPacedPastDeadline},
		{"too many records", &recon.Error{Code: recon.ResultSnapshotTooLarge, Err: fmt.Errorf("x: %w", recon.ErrSnapshotTooLarge), Detail: "read"}, ReasonSnapshotTooLarge},
		{"unavailable", &recon.Error{Code: recon.ResultSnapshotUnavailable, Err: errors.New("member down"), Detail: "read"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, msg := tooLargeStall(tc.err, tc.err.Error())
			if reason != tc.reason {
				t.Fatalf("reason %q, want %q", reason, tc.reason)
			}
			if reason == ReasonDetectionPacedPastDeadline && !strings.Contains(msg, "14m") {
				t.Fatalf("message %q lost the estimate", msg)
			}
			if reason == "" {
				return
			}
			now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
			st := &recoveryv1.ProjectionReconciliationStatus{ObservedGeneration: 1, RunState: recoveryv1.RunFailed, LastRunAt: nowTime(now),
				Conditions: []metav1.Condition{{Type: recoveryv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason}}}
			spec := &recoveryv1.ProjectionReconciliationSpec{Schedule: &recoveryv1.ReconciliationSchedule{Interval: metav1.Duration{Duration: time.Minute}}}
			if d := decideReconciliation(spec, st, 1, now.Add(2*reconRetry)); d.action != reconNothing {
				t.Fatalf("after reconRetry: %+v, want a wait of tooLargeRetry", d)
			}
			if d := decideReconciliation(spec, st, 1, now.Add(tooLargeRetry)); d.action != reconDryRun {
				t.Fatalf("after tooLargeRetry: %+v, want a dry run", d)
			}
		})
	}
}
