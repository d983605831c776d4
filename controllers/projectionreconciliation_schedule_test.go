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

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// TestSchedule_Decide is decideSchedule's table: what the scheduler does
// with a recovery's scheduled reconciliation given --reconcile-every and the
// existing object.
func TestSchedule_Decide(t *testing.T) {
	const every = 10 * time.Minute
	rec := &recoveryv1.ProjectionRecovery{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "venue-a", UID: types.UID("rec-uid")}}
	deleting := rec.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	longName := rec.DeepCopy()
	longName.Name = strings.Repeat("a", 250)

	ours := func(mut ...func(*recoveryv1.ProjectionReconciliation)) *recoveryv1.ProjectionReconciliation {
		o := desiredScheduled(nil, rec, every)
		o.ResourceVersion = "42"
		for _, m := range mut {
			m(o)
		}
		return o
	}
	noOwner := func(o *recoveryv1.ProjectionReconciliation) { o.OwnerReferences = nil }
	otherUID := func(o *recoveryv1.ProjectionReconciliation) { o.OwnerReferences[0].UID = "an-older-recovery" }

	tests := []struct {
		name     string
		every    time.Duration
		rec      *recoveryv1.ProjectionRecovery
		existing *recoveryv1.ProjectionReconciliation
		want     scheduleAction
		check    func(t *testing.T, obj *recoveryv1.ProjectionReconciliation)
	}{
		{name: "off, none: nothing", every: 0, rec: rec, want: scheduleNothing},
		{name: "off, ours: delete what an earlier on created", every: 0, rec: rec, existing: ours(), want: scheduleDelete},
		{name: "off, a user's object of that name: untouched", every: 0, rec: rec, existing: ours(noOwner), want: scheduleNothing},
		{name: "on, none: create", every: every, rec: rec, want: scheduleCreate, check: func(t *testing.T, o *recoveryv1.ProjectionReconciliation) {
			c := metav1.GetControllerOf(o)
			if o.Name != "venue-a-scheduled" || o.Namespace != "ns" || c == nil || c.UID != rec.UID || c.Kind != "ProjectionRecovery" ||
				c.APIVersion != recoveryv1.GroupVersion.String() || c.BlockOwnerDeletion == nil || !*c.BlockOwnerDeletion {
				t.Fatalf("object %s/%s owner %+v: want venue-a-scheduled controlled by the recovery", o.Namespace, o.Name, c)
			}
			if o.Labels[LabelManagedBy] != ManagedBySchedule {
				t.Fatalf("labels %v: want %s=%s", o.Labels, LabelManagedBy, ManagedBySchedule)
			}
			if o.Spec.RecoveryRef.Name != "venue-a" || o.Spec.Schedule == nil || o.Spec.Schedule.Interval.Duration != every {
				t.Fatalf("spec %+v: want recoveryRef venue-a, schedule every %s", o.Spec, every)
			}
			if o.Spec.Approval != nil || o.Spec.Rollback != nil || o.Spec.RepairDSNSecretRef != nil {
				t.Fatalf("spec %+v: a scheduled reconciliation must never be able to apply", o.Spec)
			}
		}},
		{name: "on, ours up to date: nothing", every: every, rec: rec, existing: ours(), want: scheduleNothing},
		{name: "on, ours with a user's extra label and staleAfter: nothing", every: every, rec: rec, existing: ours(func(o *recoveryv1.ProjectionReconciliation) {
			o.Labels["team"] = "desk-1"
			o.Spec.StaleAfter = &metav1.Duration{Duration: time.Hour}
		}), want: scheduleNothing},
		{name: "on, ours with another interval (the flag changed, or an edit): update", every: every, rec: rec,
			existing: ours(func(o *recoveryv1.ProjectionReconciliation) { o.Spec.Schedule.Interval.Duration = time.Hour }),
			want:     scheduleUpdate, check: func(t *testing.T, o *recoveryv1.ProjectionReconciliation) {
				if o.Spec.Schedule.Interval.Duration != every || o.ResourceVersion != "42" {
					t.Fatalf("interval %s rv %s: want %s on the read resourceVersion", o.Spec.Schedule.Interval.Duration, o.ResourceVersion, every)
				}
			}},
		{name: "on, ours carrying an approval and a repair DSN: stripped, staleAfter kept", every: every, rec: rec,
			existing: ours(func(o *recoveryv1.ProjectionReconciliation) {
				o.Spec.Approval = &recoveryv1.ReconciliationApproval{PlanID: "plan-1", Approver: "alice"}
				o.Spec.RepairDSNSecretRef = &recoveryv1.SecretKeySelector{Name: "repair", Key: "dsn"}
				o.Spec.StaleAfter = &metav1.Duration{Duration: time.Hour}
			}),
			want: scheduleUpdate, check: func(t *testing.T, o *recoveryv1.ProjectionReconciliation) {
				if o.Spec.Approval != nil || o.Spec.RepairDSNSecretRef != nil || o.Spec.StaleAfter == nil || o.Spec.StaleAfter.Duration != time.Hour {
					t.Fatalf("spec %+v: want approval and repair DSN removed, staleAfter kept", o.Spec)
				}
			}},
		{name: "on, ours carrying a rollback: stripped", every: every, rec: rec,
			existing: ours(func(o *recoveryv1.ProjectionReconciliation) {
				o.Spec.Rollback = &recoveryv1.ReconciliationRollback{CorrelationID: "c", Approver: "alice"}
			}), want: scheduleUpdate, check: func(t *testing.T, o *recoveryv1.ProjectionReconciliation) {
				if o.Spec.Rollback != nil {
					t.Fatalf("spec %+v: want the rollback removed", o.Spec)
				}
			}},
		{name: "on, ours without the label: update restores it", every: every, rec: rec,
			existing: ours(func(o *recoveryv1.ProjectionReconciliation) { o.Labels = nil }),
			want:     scheduleUpdate, check: func(t *testing.T, o *recoveryv1.ProjectionReconciliation) {
				if o.Labels[LabelManagedBy] != ManagedBySchedule {
					t.Fatalf("labels %v", o.Labels)
				}
			}},
		{name: "on, a user's object of that name: blocked, untouched", every: every, rec: rec, existing: ours(noOwner), want: scheduleBlocked},
		{name: "on, controlled by an older recovery of the same name: blocked until collected", every: every, rec: rec, existing: ours(otherUID), want: scheduleBlocked},
		{name: "on, ours naming another recovery (immutable): delete to recreate", every: every, rec: rec,
			existing: ours(func(o *recoveryv1.ProjectionReconciliation) { o.Spec.RecoveryRef.Name = "venue-b" }), want: scheduleDelete},
		{name: "on, the recovery is being deleted: nothing new", every: every, rec: deleting, want: scheduleNothing},
		{name: "off, the recovery is being deleted: left to the garbage collector", every: 0, rec: deleting, existing: ours(), want: scheduleNothing},
		{name: "on, the scheduled object is being deleted: wait for it", every: every, rec: rec,
			existing: ours(func(o *recoveryv1.ProjectionReconciliation) {
				o.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
			}), want: scheduleNothing},
		{name: "on, a name too long for an object: blocked", every: every, rec: longName, want: scheduleBlocked},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before *recoveryv1.ProjectionReconciliation
			if tc.existing != nil {
				before = tc.existing.DeepCopy()
			}
			d := decideSchedule(tc.every, tc.rec, tc.existing)
			if d.action != tc.want || d.why == "" {
				t.Fatalf("decideSchedule = %q (%s), want %q", d.action, d.why, tc.want)
			}
			switch d.action {
			case scheduleCreate, scheduleUpdate, scheduleDelete:
				if d.obj == nil {
					t.Fatalf("%s without an object", d.action)
				}
			}
			if tc.existing != nil && !equality.Semantic.DeepEqual(tc.existing, before) {
				t.Fatal("decideSchedule mutated the object it read (the informer cache's copy)")
			}
			if tc.check != nil {
				tc.check(t, d.obj)
			}
		})
	}
}
