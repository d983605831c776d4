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
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/completeness"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/reconstore"
)

// ProjectionReconciliationReconciler reconciles ProjectionReconciliation
// objects: dry runs (report, plan, rehearsal), approved applies and
// rollbacks of one scope, through internal/reconstore's workflow. Reconcile
// is thin: get, resolve references, ONE action chosen by the pure
// decideReconciliation, one optimistically locked status write.
type ProjectionReconciliationReconciler struct {
	client.Client
	// APIReader reads Secrets and the referenced ProjectionRecovery without
	// a cache (no cluster-wide Secret watch; a recovery outside the
	// manager's label selector is still found).
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Clock is injected into every age check and plan expiry of the workflow.
	Clock clock.PassiveClock
	// ApproverServiceAccounts lists the service accounts (namespace:name)
	// whose approvals and rollbacks are executed; any other service
	// account is refused whatever its RBAC allows.
	ApproverServiceAccounts []string
	// QueueClock times the work queue's requeues (a schedule's next dry
	// run, retries); nil is real time. It must read the same time as Clock:
	// a requeue that falls due on one clock and is decided on the other
	// would run early (decided not yet due) or late.
	QueueClock clock.WithTicker
	// Connections are this controller's pools and source clients (its own:
	// it never creates recovery's schema and runs no outbox publisher).
	Connections *Connections
	Metrics     *ReconciliationMetrics
	// Telemetry counts every dry run, apply and rollback on /metrics
	// (ReconciliationTelemetry); nil: logged only.
	Telemetry *reconstore.Telemetry
	// MaxConcurrentReconciles is how many reconciliations run at once (0:
	// one): one large scope's dry run must not hold up every other's apply.
	MaxConcurrentReconciles int
	// RunTimeout bounds one dry run, apply or rollback (0:
	// DefaultReconciliationRunTimeout). A run past it is cancelled: a dry
	// run reports nothing and is retried, an apply reverts what it wrote.
	RunTimeout time.Duration
	// MaxSnapshotRecords caps each side of a scope's read (0: reconstore's
	// default); a larger scope is refused snapshot_too_large and Stalled.
	MaxSnapshotRecords int64
	// DetectCPU is the share of one CPU a scheduled dry run's detection
	// takes at most (recon.Pace, dryRunPace); 0: unpaced.
	DetectCPU float64
	// Registry is this manager's completeness registry, the recovery
	// controller's: a scheduled dry run waits while it shows a catch-up
	// (waitForCatchUps). nil: only the database's cursors are asked.
	Registry *completeness.Registry
}

// DefaultReconciliationRunTimeout bounds a run when RunTimeout is 0.
const DefaultReconciliationRunTimeout = 10 * time.Minute

// DefaultReconciliationDetectCPU is the manager's default share of one CPU
// for a scheduled dry run's detection (--reconciliation-detect-cpu).
const DefaultReconciliationDetectCPU = recon.DefaultDetectCPU

func (r *ProjectionReconciliationReconciler) runTimeout() time.Duration {
	if r.RunTimeout > 0 {
		return r.RunTimeout
	}
	return DefaultReconciliationRunTimeout
}

// reconScope carries one reconcile's inputs and outputs between phases.
type reconScope struct {
	obj      *recoveryv1.ProjectionReconciliation
	now      time.Time
	recovery *recoveryv1.ProjectionRecovery
	secrets  resolvedSecrets
	// repairDSN is the projection_reconciliation role's DSN ("" when the
	// spec has no repairDsnSecretRef: report and plan only).
	repairDSN string
	decision  reconDecision
	// binding is approvalBinding as read before the Secrets were resolved.
	binding string
	// stallReason/stallMessage: a missing reference, only a human fixes it.
	stallReason, stallMessage string
	// runError is why the last dry run failed (condition message).
	runError string
	// repaired is set after a successful apply or rollback.
	repaired bool
	done     bool
	// waiting is set when a scheduled dry run waits for a catch-up
	// (waitForCatchUps): the status message; nothing ran.
	waiting string
	// unconfirmed is set when confirmLive found the cached object is not
	// the API server's current one: nothing was done, nothing is written.
	unconfirmed liveVerdict
}

// RBAC: exactly the verbs of this reconciler's calls (README, "Least
// privilege"); it never writes its own object, only its status.
// +kubebuilder:rbac:groups=recovery.projection.io,resources=projectionreconciliations,verbs=get;list;watch
// +kubebuilder:rbac:groups=recovery.projection.io,resources=projectionreconciliations/status,verbs=update
// +kubebuilder:rbac:groups=recovery.projection.io,resources=projectionrecoveries,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile runs at most one dry run, apply or rollback and writes status once.
func (r *ProjectionReconciliationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	obj := &recoveryv1.ProjectionReconciliation{}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.forget(req.Namespace, req.Name)
			r.Connections.Forget(reconKey(req.Namespace, req.Name, false))
			r.Connections.Forget(reconKey(req.Namespace, req.Name, true))
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &reconScope{obj: obj, now: r.Clock.Now()}
	s.decision = decideReconciliation(&obj.Spec, &obj.Status, obj.Generation, s.now)
	before := obj.DeepCopy()
	for _, p := range []func(context.Context, *reconScope) error{r.confirmLive, r.resolveRecovery, r.bind, r.resolveSecrets, r.waitForCatchUps, r.act} {
		if err := p(ctx, s); err != nil {
			return ctrl.Result{}, err // not evaluated: status untouched, rate-limited retry
		}
		if s.done {
			break
		}
	}
	if ctx.Err() != nil {
		return ctrl.Result{}, nil // shutting down: what a cancelled run saw is an artefact
	}
	switch s.unconfirmed {
	case liveGone:
		log.Info("not executing: the object was deleted or replaced since the cache read it", "uid", string(obj.UID))
		return ctrl.Result{}, nil
	case liveBehind:
		// The watch event of the change is on its way; the requeue covers
		// a status-only change, which the predicates do not pass.
		log.V(1).Info("the cache is behind the API server; waiting for it before executing", "cachedResourceVersion", obj.ResourceVersion)
		return ctrl.Result{RequeueAfter: conflictRequeue}, nil
	}
	r.computeStatus(s)
	if err := r.writeStatus(ctx, before, obj, s.decision.action == reconApply || s.decision.action == reconRollback); err != nil {
		if apierrors.IsConflict(err) {
			log.V(1).Info("status changed since it was read; requeueing")
			return ctrl.Result{RequeueAfter: conflictRequeue}, nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.publish(s, before)
	log.V(1).Info("reconciliation reconciled", "action", string(s.decision.action), "why", s.decision.why, "runState", string(obj.Status.RunState))
	if s.stallReason != "" {
		return ctrl.Result{RequeueAfter: reconRetry}, nil // the next periodic check picks an operator's fix up
	}
	if s.waiting != "" {
		return ctrl.Result{RequeueAfter: s.decision.requeueAfter}, nil // still due: deciding again would not wait
	}
	// The next decision (a schedule, a retry) is computed on the status just written.
	next := decideReconciliation(&obj.Spec, &obj.Status, obj.Generation, r.Clock.Now())
	if next.action != reconNothing {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{RequeueAfter: next.requeueAfter}, nil
}

// confirmLive: an apply or rollback runs only when an uncached read shows
// the same object (UID), unchanged (resourceVersion), not being deleted.
// The cache may still hold an approval withdrawn or edited a moment ago;
// executing it would change money-moving rows on an instruction nobody
// holds any more. Dry runs and idle reconciles never pay this read.
func (r *ProjectionReconciliationReconciler) confirmLive(ctx context.Context, s *reconScope) error {
	d := s.decision
	if d.action != reconApply && d.action != reconRollback {
		return nil
	}
	live := &recoveryv1.ProjectionReconciliation{}
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.obj), live)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("confirming the %s against the API server: %w", d.action, err)
	}
	if v := classifyLive(s.obj, live, apierrors.IsNotFound(err)); v != liveCurrent {
		s.unconfirmed, s.done = v, true
	}
	return nil
}

// resolveRecovery reads the referenced ProjectionRecovery (same namespace).
func (r *ProjectionReconciliationReconciler) resolveRecovery(ctx context.Context, s *reconScope) error {
	rec := &recoveryv1.ProjectionRecovery{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.obj.Namespace, Name: s.obj.Spec.RecoveryRef.Name}, rec)
	switch {
	case apierrors.IsNotFound(err):
		s.stallReason, s.stallMessage, s.done = ReasonRecoveryNotFound, "spec.recoveryRef: ProjectionRecovery \""+s.obj.Spec.RecoveryRef.Name+"\" not found in this namespace", true
		return nil
	case err != nil:
		return err
	}
	s.recovery = rec
	return nil
}

// bind records what a plan made now, or an approval executed now, is bound
// to (approvalBinding). It reads before resolveSecrets, so a Secret
// rewritten in between shows as a change rather than passing unseen.
func (r *ProjectionReconciliationReconciler) bind(ctx context.Context, s *reconScope) error {
	if s.decision.action == reconNothing {
		return nil
	}
	var err error
	s.binding, err = approvalBinding(ctx, r.APIReader, s.obj, s.recovery)
	return err
}

// resolveSecrets resolves the recovery's Secrets exactly as the recovery
// controller does (secretReader.recoverySecrets, same messages), then the
// optional repairDsnSecretRef. It reads through the uncached API reader.
func (r *ProjectionReconciliationReconciler) resolveSecrets(ctx context.Context, s *reconScope) error {
	sr := secretReader{api: r.APIReader}
	sec, err := sr.recoverySecrets(ctx, s.recovery)
	var missing *secretMissingError
	if errors.As(err, &missing) {
		s.stallReason, s.stallMessage, s.done = recoveryv1.ReasonSecretNotFound, "recovery "+s.recovery.Name+": "+missing.Error(), true
		return nil
	}
	if err != nil {
		return err
	}
	s.secrets = sec
	if ref := s.obj.Spec.RepairDSNSecretRef; ref != nil {
		dsn, err := sr.value(ctx, s.obj.Namespace, "spec.repairDsnSecretRef", ref)
		if errors.As(err, &missing) {
			s.stallReason, s.stallMessage, s.done = recoveryv1.ReasonSecretNotFound, missing.Error(), true
			return nil
		}
		if err != nil {
			return err
		}
		s.repairDSN = dsn
	}
	return nil
}

// reconKey names a reconciliation's use of a pool in Connections (two uses:
// the recovery role's DSN and the repair role's).
func reconKey(ns, name string, repair bool) string {
	if repair {
		return "reconciliation-repair:" + ns + "/" + name
	}
	return "reconciliation:" + ns + "/" + name
}

// SetupWithManager registers the controller.
func (r *ProjectionReconciliationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Connections == nil {
		r.Connections = &Connections{}
	}
	if r.Metrics == nil {
		r.Metrics = NewReconciliationMetrics(nil)
	}
	// Shutdown closes this controller's pools and clients: it holds no
	// lease to release, but a pool left open keeps its connections and its
	// health-check goroutine for as long as the process lives, which for a
	// manager embedded in a longer-lived process (the envtest suite) is
	// after the manager stopped.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		r.Connections.Close()
		return nil
	})); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		// Status writes do not re-trigger: spec changes (generation) and the
		// requeue schedule (retries, spec.schedule) do.
		// An annotation change (kubectl annotate ...requested-at) asks for an
		// evaluation now: a due schedule runs, nothing else changes.
		For(&recoveryv1.ProjectionReconciliation{}, builder.WithPredicates(
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Named("projectionreconciliation")
	// A scheduled dry run waiting for its recovery's catch-up starts when it ends.
	obj, h, p := r.waitWatch()
	b = b.Watches(obj, h, builder.WithPredicates(p))
	opts := controller.Options{MaxConcurrentReconciles: max(1, r.MaxConcurrentReconciles)}
	if qc := r.QueueClock; qc != nil {
		opts.NewQueue = func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			return workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name, Clock: qc})
		}
	}
	return b.WithOptions(opts).Complete(r)
}

// nowTime is the injected clock as a status time.
func nowTime(t time.Time) *metav1.Time { return ptrTime(t) }
