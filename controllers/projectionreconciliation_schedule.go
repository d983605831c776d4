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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// Scheduled reconciliation of every scope, off by default: drift is reported
// as an Event and a metric, so an alert can fire before a user notices.
// With --reconcile-every set, every ProjectionRecovery this
// manager reconciles gets a ProjectionReconciliation "<recovery>-scheduled"
// whose spec.schedule.interval is the flag; the reconciliation controller
// runs its dry runs, and their findings raise the DriftFound Warning event
// and the projection_reconciliation_drift_findings gauge (the alert path).
const (
	// LabelManagedBy marks objects the operator manages: a user can tell a
	// scheduled reconciliation from their own (kubectl get precon -l ...).
	LabelManagedBy = "recovery.projection.io/managed-by"
	// ManagedBySchedule is LabelManagedBy's value on scheduled reconciliations.
	ManagedBySchedule = "schedule"
	// scheduledSuffix names a recovery's scheduled reconciliation.
	scheduledSuffix = "-scheduled"
	// recoveryKind is the kind of the owner reference.
	recoveryKind = "ProjectionRecovery"
)

// Event reasons of the scheduler (on the ProjectionRecovery).
const (
	ReasonScheduleCreated = "ScheduledReconciliationCreated"
	ReasonScheduleRemoved = "ScheduledReconciliationRemoved"
	ReasonScheduleBlocked = "ScheduledReconciliationBlocked"
)

// ScheduledReconciliationName is the name of a recovery's scheduled
// ProjectionReconciliation.
func ScheduledReconciliationName(recovery string) string { return recovery + scheduledSuffix }

// ProjectionReconciliationScheduler keeps one scheduled ProjectionReconciliation
// per ProjectionRecovery when Every is set, and removes the ones it created
// when Every is 0 (off: the operator's earlier "on" leaves nothing running).
// It never sets an approval, a rollback or a repair DSN: a scheduled run
// only reports and plans.
type ProjectionReconciliationScheduler struct {
	client.Client
	Recorder events.EventRecorder
	// Every is the --reconcile-every interval; 0 is off.
	Every time.Duration
}

// scheduleAction is what one reconcile of the scheduler does.
type scheduleAction string

const (
	scheduleNothing scheduleAction = ""
	scheduleCreate  scheduleAction = "create"
	scheduleUpdate  scheduleAction = "update"
	scheduleDelete  scheduleAction = "delete"
	// scheduleBlocked: the object cannot be managed (its name is taken by an
	// object this recovery does not control, or too long); a human decides.
	scheduleBlocked scheduleAction = "blocked"
)

// scheduleDecision is the pure decision of one reconcile; obj is the object
// to create, update (a copy of the existing one, resourceVersion kept for
// the optimistic lock) or delete.
type scheduleDecision struct {
	action scheduleAction
	why    string
	obj    *recoveryv1.ProjectionReconciliation
}

// decideSchedule chooses what to do with a recovery's scheduled
// reconciliation given the flag and the existing object (nil: none).
// Invariants (what breaks without them):
//   - only an object this recovery controls (owner reference, controller,
//     same UID) is ever updated or deleted: a user's own ProjectionReconciliation
//     that happens to carry the name is never overwritten or removed;
//   - the managed spec never carries an approval, a rollback or a repair DSN:
//     a scheduled run only reports and plans, for its whole life (an edit is
//     reverted; a human repairs through a ProjectionReconciliation of their own);
//   - off (every 0) removes what an earlier "on" created, so turning the flag
//     off stops the dry runs and their alerts;
//   - a recovery being deleted gets nothing new: the garbage collector
//     removes its scheduled reconciliation with it.
func decideSchedule(every time.Duration, rec *recoveryv1.ProjectionRecovery, existing *recoveryv1.ProjectionReconciliation) scheduleDecision {
	name := ScheduledReconciliationName(rec.Name)
	ours := existing != nil && controlledBy(existing, rec)
	switch {
	case !rec.DeletionTimestamp.IsZero():
		return scheduleDecision{why: "the recovery is being deleted: its scheduled reconciliation goes with it"}
	case existing != nil && !existing.DeletionTimestamp.IsZero():
		return scheduleDecision{why: "the scheduled reconciliation is being deleted; its deletion event brings the next decision"}
	case every <= 0 && ours:
		return scheduleDecision{action: scheduleDelete, obj: existing, why: "--reconcile-every is off: removing the scheduled reconciliation it created"}
	case every <= 0:
		return scheduleDecision{why: "--reconcile-every is off"}
	case existing == nil && len(validation.IsDNS1123Subdomain(name)) > 0:
		return scheduleDecision{action: scheduleBlocked, why: "the name " + name + " is not a valid object name (the recovery's name is too long)"}
	case existing == nil:
		return scheduleDecision{action: scheduleCreate, obj: desiredScheduled(nil, rec, every), why: "no scheduled reconciliation yet"}
	case !ours:
		return scheduleDecision{action: scheduleBlocked, why: "ProjectionReconciliation " + name + " exists and is not controlled by this recovery: left untouched"}
	case existing.Spec.RecoveryRef.Name != rec.Name:
		// recoveryRef is immutable (CEL): an update could never fix it.
		return scheduleDecision{action: scheduleDelete, obj: existing, why: "the scheduled reconciliation references another recovery: recreating it"}
	}
	want := desiredScheduled(existing.DeepCopy(), rec, every)
	if equality.Semantic.DeepEqual(want.Spec, existing.Spec) && equality.Semantic.DeepEqual(want.Labels, existing.Labels) {
		return scheduleDecision{why: "up to date"}
	}
	return scheduleDecision{action: scheduleUpdate, obj: want, why: "the scheduled reconciliation differs from the flag (interval, label, or an approval it must not carry)"}
}

// desiredScheduled sets what the scheduler owns on obj (a new object when
// nil): the label, the controller owner reference, recoveryRef, the
// schedule, and no approval, rollback or repair DSN. staleAfter is the
// user's to tune.
func desiredScheduled(obj *recoveryv1.ProjectionReconciliation, rec *recoveryv1.ProjectionRecovery, every time.Duration) *recoveryv1.ProjectionReconciliation {
	if obj == nil {
		obj = &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{
			Namespace: rec.Namespace, Name: ScheduledReconciliationName(rec.Name),
			// Controller: garbage-collected with the recovery. BlockOwnerDeletion:
			// a foreground deletion of the recovery waits for it.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: recoveryv1.GroupVersion.String(), Kind: recoveryKind,
				Name: rec.Name, UID: rec.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		}}
		obj.Spec.RecoveryRef.Name = rec.Name
	}
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	obj.Labels[LabelManagedBy] = ManagedBySchedule
	obj.Spec.Schedule = &recoveryv1.ReconciliationSchedule{Interval: metav1.Duration{Duration: every}}
	obj.Spec.Approval, obj.Spec.Rollback, obj.Spec.RepairDSNSecretRef = nil, nil, nil
	return obj
}

// controlledBy: obj's controller owner reference is this very recovery (its
// UID, not only its name: a recreated recovery does not adopt the old one's).
func controlledBy(obj *recoveryv1.ProjectionReconciliation, rec *recoveryv1.ProjectionRecovery) bool {
	c := metav1.GetControllerOfNoCopy(obj)
	return c != nil && c.UID == rec.UID && c.Kind == recoveryKind
}

// RBAC: the scheduled reconciliation is created, updated (optimistic lock)
// and deleted (preconditions) whole; finalizers update on the recovery: its
// owner reference sets blockOwnerDeletion, which clusters running the
// OwnerReferencesPermissionEnforcement admission plugin only allow to a
// client that may update the owner's finalizers.
// +kubebuilder:rbac:groups=recovery.projection.io,resources=projectionreconciliations,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=recovery.projection.io,resources=projectionrecoveries,verbs=get;list;watch
// +kubebuilder:rbac:groups=recovery.projection.io,resources=projectionrecoveries/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile applies decideSchedule for one ProjectionRecovery.
func (r *ProjectionReconciliationScheduler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	rec := &recoveryv1.ProjectionRecovery{}
	if err := r.Get(ctx, req.NamespacedName, rec); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	existing := &recoveryv1.ProjectionReconciliation{}
	switch err := r.Get(ctx, client.ObjectKey{Namespace: rec.Namespace, Name: ScheduledReconciliationName(rec.Name)}, existing); {
	case apierrors.IsNotFound(err):
		existing = nil
	case err != nil:
		return ctrl.Result{}, err
	}
	d := decideSchedule(r.Every, rec, existing)
	var err error
	switch d.action {
	case scheduleCreate:
		err = r.Create(ctx, d.obj)
	case scheduleUpdate:
		err = r.Update(ctx, d.obj) // optimistic lock: the resourceVersion read
	case scheduleDelete:
		err = client.IgnoreNotFound(r.Delete(ctx, d.obj, client.Preconditions{UID: &d.obj.UID, ResourceVersion: &d.obj.ResourceVersion}))
	}
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
		// The cache lagged behind the API server: decide again on a fresh read.
		log.V(1).Info("scheduled reconciliation changed since it was read; requeueing", "action", string(d.action))
		return ctrl.Result{RequeueAfter: conflictRequeue}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	switch d.action {
	case scheduleCreate:
		r.event(rec, d.obj, corev1.EventTypeNormal, ReasonScheduleCreated, "Create", "dry run every "+r.Every.String()+
			"; drift is reported as DriftFound events and projection_reconciliation_drift_findings")
	case scheduleDelete:
		r.event(rec, nil, corev1.EventTypeNormal, ReasonScheduleRemoved, "Delete", d.why)
	case scheduleBlocked:
		r.event(rec, nil, corev1.EventTypeWarning, ReasonScheduleBlocked, "Create", d.why)
	}
	log.V(1).Info("scheduled reconciliation reconciled", "action", string(d.action), "why", d.why, "every", r.Every.String())
	return ctrl.Result{}, nil
}

// event records an Event on the recovery (recordEvent). A nil related
// stays a nil interface: a typed nil pointer would not.
func (r *ProjectionReconciliationScheduler) event(rec *recoveryv1.ProjectionRecovery, related *recoveryv1.ProjectionReconciliation, typ, reason, action, note string) {
	var rel client.Object
	if related != nil {
		rel = related
	}
	recordEvent(r.Recorder, rec, rel, typ, reason, action, note)
}

// SetupWithManager registers the scheduler. It watches the ProjectionRecoveries
// of the manager's cache (its --watch-label-selector shard) and the
// reconciliations they control: deleting or editing a managed object brings
// it back as the flag says.
func (r *ProjectionReconciliationScheduler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		// A recovery matters by its existence only: status writes (every
		// cycle) must not wake the scheduler.
		For(&recoveryv1.ProjectionRecovery{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// The child's spec, labels and owner references are what the
		// scheduler owns; its status (every dry run) is not.
		Owns(&recoveryv1.ProjectionReconciliation{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, ownerRefsChangedPredicate()))).
		Named("projectionreconciliation-schedule").
		Complete(r)
}

// ownerRefsChangedPredicate passes updates that change owner references (a
// user orphaning a managed object).
func ownerRefsChangedPredicate() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld != nil && e.ObjectNew != nil &&
			!equality.Semantic.DeepEqual(e.ObjectOld.GetOwnerReferences(), e.ObjectNew.GetOwnerReferences())
	}}
}
