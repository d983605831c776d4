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

// Package controllers holds the ProjectionRecovery and ProjectionReconciliation
// reconcilers: the Kubernetes half of the operator. Reconcile is thin: get,
// finalizer, a slice of small phases over a scope struct, one optimistically
// locked status write, requeue. The catch-up cycle itself is
// internal/catchup's (one Engine.Run per reconcile); decisions live in pure
// functions with an injected clock.
package controllers

import (
	"context"
	"errors"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/catchup"
	"github.com/projection-recovery/projection-recovery/internal/completeness"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// ProjectionRecoveryReconciler reconciles ProjectionRecovery objects.
type ProjectionRecoveryReconciler struct {
	client.Client
	// APIReader reads Secret values without a cache: the manager never holds
	// the data of Secrets it does not reference.
	APIReader client.Reader
	// WatchSecrets keeps a metadata-only watch on Secrets (names and
	// resourceVersions): an idle cycle reuses the values it read before while
	// their resourceVersion is unchanged (0 Secret reads), and a rotation
	// wakes the referencing resources at once. Needs list and watch on
	// Secrets; off, every cycle gets its Secrets and `get` suffices.
	WatchSecrets bool
	Recorder     events.EventRecorder
	Clock        clock.PassiveClock

	// AutoRecovery enables writes to SQL. Off (the default), the controller
	// reports completeness read-only (NFR-APR01: disabled by default).
	AutoRecovery bool
	// MaxConcurrentReconciles bounds parallel scopes on this manager.
	MaxConcurrentReconciles int
	// Owner identifies this manager in the fenced lease (FR-APR08). Two
	// managers must never share one.
	Owner string

	Connections *Connections
	Registry    *completeness.Registry
	Metrics     *Metrics

	// secretValues are the values read under WatchSecrets, by resourceVersion.
	secretValues secretValues
	// progress remembers each scope's recent verified event counts (status.progress).
	progress progressTracker
	// carry keeps the first unit of each catching-up scope's next cycle,
	// fetched while its cycle's last unit committed (catchup.CarriedUnit).
	carry *catchup.CarryOver
	// proofs is what this manager saw each scope's member prove of its
	// chain: an idle answer certifies a scope only on a proof it holds
	// (catchup.ProofLedger). Made once, on first use (proofLedger), so a
	// reconciler driven without SetupWithManager remembers its proofs too.
	proofs     *catchup.ProofLedger
	proofsOnce sync.Once
	// Triggers enqueues resources from outside the cluster: the NATS
	// reconnect edge (FR-APR10). Optional.
	Triggers <-chan event.GenericEvent
	// OnPageCommitted, when set, is called after every committed page (tests).
	OnPageCommitted func(owner string, res store.PageResult)
}

// recoveryScope carries one reconcile's inputs and outputs between phases.
type recoveryScope struct {
	obj     *recoveryv1.ProjectionRecovery
	now     time.Time
	secrets resolvedSecrets

	// cycle is the outcome of the page cycle, nil when none ran.
	cycle *catchup.Result
	// state/reason/message is this reconcile's outcome; an empty state means
	// no cycle ran and reason says why.
	state   recoveryv1.RecoveryState
	reason  string
	message string
	// done stops the remaining phases (a missing Secret, suspend...).
	done bool
	// carried is the unit the previous cycle fetched for this one, if any.
	carried *catchup.CarriedUnit
	// reconsRead: the reconciliations of this recovery were read; drift is
	// what their reports know (nil: none open), reconciliations how many.
	reconsRead      bool
	drift           *recoveryv1.OpenDrift
	reconciliations int
}

// phase is one small step of a reconcile. A phase that cannot continue sets
// scope.done; an error aborts the reconcile and controller-runtime retries it.
type phase func(ctx context.Context, s *recoveryScope) error

// RBAC: exactly the verbs of this reconciler's calls; docs/security.md ("The
// manager's own rights") says which call needs each.
// +kubebuilder:rbac:groups=recovery.projection.io,resources=projectionrecoveries,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=recovery.projection.io,resources=projectionrecoveries/status,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=recovery.projection.io,resources=projectionreconciliations,verbs=get;list;watch

// Reconcile runs one bounded cycle for one scope and writes status once.
func (r *ProjectionRecoveryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	// Whatever this reconcile does, the unit the previous cycle carried for
	// it does not outlive it: used by its cycle, or dropped here.
	carried := r.carry.Take(req.String())
	defer carried.Discard()

	obj := &recoveryv1.ProjectionRecovery{}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	if !obj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, obj)
	}
	if !controllerutil.ContainsFinalizer(obj, recoveryv1.FinalizerName) {
		// The finalizer exists so that deleting the resource releases the
		// scope's lease; without it another manager would wait a full lease
		// duration before it could take the scope over.
		patch := client.MergeFrom(obj.DeepCopy())
		controllerutil.AddFinalizer(obj, recoveryv1.FinalizerName)
		if err := r.Patch(ctx, obj, patch); err != nil {
			return ctrl.Result{}, err
		}
	}

	s := &recoveryScope{obj: obj, now: r.Clock.Now(), carried: carried}
	before := obj.DeepCopy()
	var phaseErr error
	for _, p := range r.phases() {
		if phaseErr = p(ctx, s); phaseErr != nil || s.done {
			break
		}
	}

	if ctx.Err() != nil {
		// The manager is shutting down: whatever the cancelled cycle saw is
		// an artefact of the cancellation. Write nothing and report no error
		// (a clean shutdown logs no "Reconciler error").
		r.Registry.CycleEnded(obj.Namespace, obj.Name, obj.Spec.Scope, r.Clock.Now(), completenessOf(&before.Status))
		log.V(1).Info("reconcile cancelled; status left as it was")
		return ctrl.Result{}, nil
	}
	if phaseErr != nil {
		// The generation was not evaluated: keep the previous conditions and
		// observedGeneration, and let controller-runtime retry with its rate
		// limiter (an error never comes with a RequeueAfter).
		return ctrl.Result{}, phaseErr
	}

	result := r.computeStatus(s)
	err := r.writeStatus(ctx, before, obj)
	switch {
	case apierrors.IsConflict(err):
		// Another manager (or this one, through a lagging cache) wrote status
		// since it was read: compute again from a fresh read soon. Not an
		// error: it is how several managers share one object.
		log.V(1).Info("status changed since it was read; requeueing")
		r.Registry.CycleEnded(obj.Namespace, obj.Name, obj.Spec.Scope, r.Clock.Now(), completenessOf(&before.Status))
		return ctrl.Result{RequeueAfter: conflictRequeue}, nil
	case apierrors.IsNotFound(err) || (err != nil && ctx.Err() != nil):
		return ctrl.Result{}, nil // deleted, or shutting down
	case err != nil:
		return ctrl.Result{}, err // controller-runtime logs it and retries with its rate limiter
	}
	r.publish(ctx, before, obj) // an unchanged status publishes no transition

	return result, nil
}

// conflictRequeue is how soon a reconcile whose status write lost an
// optimistic-lock race runs again.
const conflictRequeue = 250 * time.Millisecond

func (r *ProjectionRecoveryReconciler) phases() []phase {
	return []phase{
		r.reconcileScopeClaim,
		r.reconcileSuspend,
		r.reconcileSecrets,
		r.reconcileRepairs,
		r.reconcileCycle,
	}
}

// reconcileSuspend stops before any work when spec.suspend is set.
func (r *ProjectionRecoveryReconciler) reconcileSuspend(_ context.Context, s *recoveryScope) error {
	if s.obj.Spec.Suspend {
		s.reason, s.message, s.done = recoveryv1.ReasonSuspended, "spec.suspend is true: no cycle runs", true
	}
	return nil
}

// finalize releases what the resource holds, then drops the finalizer.
func (r *ProjectionRecoveryReconciler) finalize(ctx context.Context, obj *recoveryv1.ProjectionRecovery) error {
	if !controllerutil.ContainsFinalizer(obj, recoveryv1.FinalizerName) {
		return nil
	}
	r.releaseLease(ctx, obj)
	r.Connections.Forget(resourceKey(obj))
	r.proofLedger().Forget(resourceKey(obj))
	r.Registry.Forget(obj.Namespace, obj.Name)
	r.progress.Forget(client.ObjectKeyFromObject(obj))
	r.Metrics.forget(obj)
	patch := client.MergeFrom(obj.DeepCopy())
	controllerutil.RemoveFinalizer(obj, recoveryv1.FinalizerName)
	if err := r.Patch(ctx, obj, patch); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// SetupWithManager registers the controller.
func (r *ProjectionRecoveryReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Owner == "" {
		return errors.New("ProjectionRecoveryReconciler: Owner must be set (the lease identity of this manager)")
	}
	if r.Connections == nil {
		r.Connections = &Connections{ApplySchema: r.AutoRecovery}
	}
	if r.Registry == nil {
		r.Registry = completeness.NewRegistry(r.Clock.Now)
	}
	if r.Metrics == nil {
		r.Metrics = NewMetrics(nil)
	}
	if err := mgr.Add(manager.RunnableFunc(r.Connections.Start)); err != nil {
		return err
	}
	r.carry = catchup.NewCarryOver(max(1, r.MaxConcurrentReconciles))
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		r.carry.StopAll() // no fetch of a carried unit outlives the manager
		return nil
	})); err != nil {
		return err
	}
	// Shutdown releases every lease this manager holds (FR-APR10), after the
	// reconcile contexts were cancelled and in-flight pages rolled back: the
	// release waits on the lease row lock an in-flight page holds.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Connections.ReleaseAll(rctx, r.Owner); err != nil { // every namespace's leaseOwner
			// Not an error of the manager: a database that is gone at
			// shutdown keeps our lease until it expires (one lease
			// duration), which the fence makes safe. The text is redacted
			// by construction: store errors never carry the DSN.
			ctrl.Log.WithName("projectionrecovery").Info("some leases could not be released at shutdown; they expire on their own", "owner", r.Owner, "err", err.Error())
		}
		return nil
	})); err != nil {
		return err
	}
	b, err := r.setupScopeClaim(mgr, ctrl.NewControllerManagedBy(mgr))
	if err != nil {
		return err
	}
	if b, err = r.setupSecretWatch(mgr, b); err != nil {
		return err
	}
	if b, err = r.setupRepairWatch(mgr, b); err != nil {
		return err
	}
	if r.Triggers != nil {
		b = b.WatchesRawSource(crsource.Channel(r.Triggers, &handler.EnqueueRequestForObject{}))
	}
	return b.
		For(&recoveryv1.ProjectionRecovery{}, builder.WithPredicates(
			// Status patches must not re-trigger a reconcile: only spec
			// changes (generation), finalizer/deletion changes and the
			// controller's own RequeueAfter schedule cycles.
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletingPredicate()),
		)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.MaxConcurrentReconciles)}).
		Named("projectionrecovery").
		Complete(r)
}

// deletingPredicate passes updates that mark the object for deletion, so the
// finalizer runs even when the API server does not bump the generation.
func deletingPredicate() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectNew != nil && !e.ObjectNew.GetDeletionTimestamp().IsZero()
		},
	}
}
