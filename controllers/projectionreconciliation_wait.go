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
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// ReasonWaitingForCatchUp: a scheduled dry run is due and waits for a
// catch-up of its database to end (recon.ScheduledWait); Reconciling.
const ReasonWaitingForCatchUp = "WaitingForCatchUp"

// catchUpWaitPoll is how often a waiting scheduled dry run looks again. Its
// own recovery's end of catch-up wakes it at once (waitWatch); another
// scope's within this.
const catchUpWaitPoll = 15 * time.Second

// waitForCatchUps turns a scheduled dry run into a wait while its recovery,
// another recovery of this manager (its completeness registry) or another
// scope of its database (the cursors, any manager's) is catching up
// (recon.ScheduledWait). A dry run without a schedule (a person asked)
// never waits. When the database cannot be asked, the dry run goes ahead
// and reports that failure itself.
func (r *ProjectionReconciliationReconciler) waitForCatchUps(ctx context.Context, s *reconScope) error {
	if s.decision.action != reconDryRun || s.obj.Spec.Schedule == nil {
		return nil
	}
	c := recon.CatchUps{Own: recoveryCatchingUp(s.recovery)}
	if !c.Own && r.Registry != nil {
		c.Manager = r.Registry.CatchingUp(s.now, recon.CatchUpActiveWithin)
	}
	if !c.Own && c.Manager == "" {
		wf, _, err := r.workflow(ctx, s, "", nil)
		if err == nil {
			c.Database, err = wf.CatchUpUnderWay(ctx)
		}
		if err != nil {
			logf.FromContext(ctx).V(1).Info("could not ask which scopes are catching up; the dry run goes ahead", "error", redact(err.Error(), s.secrets))
			return nil
		}
	}
	due := scheduleDueSince(s.obj)
	wait, why := recon.ScheduledWait(c, due, s.now)
	if !wait {
		if why != "" {
			logf.FromContext(ctx).Info("scheduled dry run no longer waits", "why", why)
		}
		return nil
	}
	left := due.Add(recon.ScheduledWaitLimit).Sub(s.now)
	s.waiting = "the scheduled dry run is due and waits: " + why + "; it starts when the catch-up ends, or at " +
		due.Add(recon.ScheduledWaitLimit).UTC().Format(time.RFC3339) + " at the latest"
	s.decision = reconDecision{why: "scheduled dry run waits: " + why, requeueAfter: max(time.Second, min(catchUpWaitPoll, left))}
	return nil
}

// recoveryCatchingUp: the recovery has not reached CURRENT since it began
// (CATCHING_UP, or no cycle yet and not suspended), as its status says. A
// RETRYING, BLOCKED or CURRENT recovery is not: a dry run of it is wanted.
func recoveryCatchingUp(rec *recoveryv1.ProjectionRecovery) bool {
	switch {
	case rec.Spec.Suspend:
		return false
	case rec.Status.State == recoveryv1.StateCatchingUp:
		return true
	case rec.Status.State != "":
		return false
	}
	c := meta.FindStatusCondition(rec.Status.Conditions, recoveryv1.ConditionReady)
	return c == nil || c.Reason == recoveryv1.ReasonAwaitingFirstCycle
}

// scheduleDueSince is when the scheduled dry run fell due: an interval
// after the last run, or the object's creation for the first. The wait
// limit counts from it.
func scheduleDueSince(obj *recoveryv1.ProjectionReconciliation) time.Time {
	if at := obj.Status.LastRunAt; at != nil && obj.Spec.Schedule != nil {
		return at.Add(obj.Spec.Schedule.Interval.Duration)
	}
	return obj.CreationTimestamp.Time
}

// waitWatch wakes the scheduled reconciliations of a recovery whose state
// changed (its catch-up ended, typically): the reconciliations list is the
// cache's, filtered here (a namespace's reconciliations are few).
func (r *ProjectionReconciliationReconciler) waitWatch() (client.Object, handler.EventHandler, predicate.Predicate) {
	toScheduled := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list recoveryv1.ProjectionReconciliationList
		if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
			logf.FromContext(ctx).Error(err, "listing reconciliations to wake after a recovery's state changed", "recovery", o.GetName())
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			if pr := &list.Items[i]; pr.Spec.RecoveryRef.Name == o.GetName() && pr.Spec.Schedule != nil {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pr)})
			}
		}
		return out
	})
	stateChanged := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*recoveryv1.ProjectionRecovery)
			n, ok2 := e.ObjectNew.(*recoveryv1.ProjectionRecovery)
			return ok1 && ok2 && recoveryCatchingUp(o) && !recoveryCatchingUp(n)
		},
	}
	return &recoveryv1.ProjectionRecovery{}, toScheduled, stateChanged
}
