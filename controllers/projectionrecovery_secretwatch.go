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
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// Secret watch (WatchSecrets): a metadata-only informer of Secrets, so an
// idle cycle reads none (docs/performance.md, "Idle cost at 1,000 scopes").
// Invariant: a value is reused only under the exact resourceVersion it was
// read at; anything looser would use a rotated password stale until the
// manager restarts.

// secretRefsIndexField indexes ProjectionRecoveries by the names of the
// Secrets their spec references, so a Secret event finds its recoveries in
// the cache without a list of the whole namespace.
const secretRefsIndexField = "spec.secretRefs"

// secretValueTTL drops a remembered value unused for this long (the resource
// was deleted or now references another Secret), so the manager does not
// keep credentials it no longer uses.
const secretValueTTL = time.Hour

// secretRefNames are the Secret names obj's spec references.
func secretRefNames(obj *recoveryv1.ProjectionRecovery) []string {
	names := []string{obj.Spec.Database.DSNSecretRef.Name}
	if ref := obj.Spec.Source.TokenSecretRef; ref != nil {
		names = append(names, ref.Name)
	}
	if tls := obj.Spec.Source.TLS; tls != nil && tls.CASecretRef != nil {
		names = append(names, tls.CASecretRef.Name)
	}
	return names
}

// secretKey names one referenced key of one Secret.
type secretKey struct{ namespace, name, key string }

type secretValue struct {
	resourceVersion string
	value           string
	used            time.Time
}

// secretValues remembers values read from the API server, by the
// resourceVersion they were read at. Safe for concurrent reconciles.
type secretValues struct {
	mu sync.Mutex
	m  map[secretKey]secretValue
}

// get returns the value read at resourceVersion rv, if that is what is held.
func (c *secretValues) get(k secretKey, rv string, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	if !ok || rv == "" || v.resourceVersion != rv {
		return "", false
	}
	v.used = now
	c.m[k] = v
	return v.value, true
}

// put remembers a value read at rv, and drops values unused for
// secretValueTTL.
func (c *secretValues) put(k secretKey, rv, value string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[secretKey]secretValue{}
	}
	for old, v := range c.m {
		if now.Sub(v.used) > secretValueTTL {
			delete(c.m, old)
		}
	}
	c.m[k] = secretValue{resourceVersion: rv, value: value, used: now}
}

// forget drops every value of one Secret (it was deleted).
func (c *secretValues) forget(namespace, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if k.namespace == namespace && k.name == name {
			delete(c.m, k)
		}
	}
}

// setupSecretWatch registers the secret-name index and the metadata-only
// Secret watch: a Secret created, changed (a new resourceVersion) or deleted
// wakes the ProjectionRecoveries referencing it.
func (r *ProjectionRecoveryReconciler) setupSecretWatch(mgr ctrl.Manager, b *builder.TypedBuilder[reconcile.Request]) (*builder.TypedBuilder[reconcile.Request], error) {
	if !r.WatchSecrets {
		return b, nil
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &recoveryv1.ProjectionRecovery{}, secretRefsIndexField, func(o client.Object) []string {
		if pr, ok := o.(*recoveryv1.ProjectionRecovery); ok {
			return secretRefNames(pr)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("indexing ProjectionRecoveries by %s: %w", secretRefsIndexField, err)
	}
	h := handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.enqueueReferencing(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.enqueueReferencing(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.secretValues.forget(e.Object.GetNamespace(), e.Object.GetName())
			r.enqueueReferencing(ctx, e.Object, q)
		},
	}
	// Resyncs deliver updates with an unchanged resourceVersion: nothing
	// changed, nothing to wake.
	return b.Watches(&corev1.Secret{}, h, builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})), nil
}

// enqueueReferencing wakes every ProjectionRecovery in the Secret's
// namespace that references it.
func (r *ProjectionRecoveryReconciler) enqueueReferencing(ctx context.Context, secret client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	var list recoveryv1.ProjectionRecoveryList
	if err := r.List(ctx, &list, client.InNamespace(secret.GetNamespace()), client.MatchingFields{secretRefsIndexField: secret.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the ProjectionRecoveries referencing a Secret", "secret", client.ObjectKeyFromObject(secret))
		return
	}
	for i := range list.Items {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
}
