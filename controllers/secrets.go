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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// resolvedSecrets holds credentials read for one reconcile. They live only in
// memory for the duration of the reconcile: never in status, events or logs.
type resolvedSecrets struct {
	dsn   string
	token string
	ca    []byte
}

// String hides the values if a scope is ever logged by accident.
func (resolvedSecrets) String() string { return "resolvedSecrets{redacted}" }

// secretMissingError names the missing reference without its content.
type secretMissingError struct {
	field, name, key string
	keyMissing       bool
}

func (e *secretMissingError) Error() string {
	if e.keyMissing {
		return fmt.Sprintf("%s: Secret %q has no key %q", e.field, e.name, e.key)
	}
	return fmt.Sprintf("%s: Secret %q not found", e.field, e.name)
}

// secretReader reads the values Secret references name, for both
// controllers: through the uncached API reader (the manager never caches the
// data of Secrets it does not reference), or, when values is set (the
// recovery controller's WatchSecrets), from the value last read while the
// metadata-only informer (meta) shows the Secret at the resourceVersion it
// was read at.
type secretReader struct {
	api client.Reader
	// meta reads Secrets' metadata from the informer; nil: no lookup.
	meta client.Reader
	// values remembers what was read, by resourceVersion; nil: nothing is
	// remembered.
	values *secretValues
	clock  clock.PassiveClock
}

// recoverySecrets resolves every Secret reference of a recovery's spec, in
// the order of its fields. On an error it returns what it resolved before
// (a *secretMissingError names the reference without its content).
func (sr secretReader) recoverySecrets(ctx context.Context, obj *recoveryv1.ProjectionRecovery) (resolvedSecrets, error) {
	spec := &obj.Spec
	ns := obj.Namespace
	var sec resolvedSecrets
	var err error
	if sec.dsn, err = sr.value(ctx, ns, "spec.database.dsnSecretRef", &spec.Database.DSNSecretRef); err != nil {
		return sec, err
	}
	if ref := spec.Source.TokenSecretRef; ref != nil {
		if sec.token, err = sr.value(ctx, ns, "spec.source.tokenSecretRef", ref); err != nil {
			return sec, err
		}
	}
	if spec.Source.TLS != nil && spec.Source.TLS.CASecretRef != nil {
		ca, err := sr.value(ctx, ns, "spec.source.tls.caSecretRef", spec.Source.TLS.CASecretRef)
		if err != nil {
			return sec, err
		}
		sec.ca = []byte(ca)
	}
	return sec, nil
}

// value reads one referenced key; field names the reference in errors.
func (sr secretReader) value(ctx context.Context, ns, field string, ref *recoveryv1.SecretKeySelector) (string, error) {
	if v, ok := sr.cached(ctx, ns, ref); ok {
		return v, nil
	}
	sec := &corev1.Secret{}
	if err := sr.api.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return "", &secretMissingError{field: field, name: ref.Name, key: ref.Key}
		}
		return "", fmt.Errorf("reading %s: %w", field, err)
	}
	v, ok := sec.Data[ref.Key]
	if !ok || len(v) == 0 {
		return "", &secretMissingError{field: field, name: ref.Name, key: ref.Key, keyMissing: true}
	}
	sr.remember(ns, ref, sec.ResourceVersion, string(v))
	return string(v), nil
}

// cached is the remembered value of ref when the informer shows the Secret
// at the resourceVersion it was read at. Any doubt (not in the informer,
// another version, an informer error) is a miss: the caller reads from the
// API server.
func (sr secretReader) cached(ctx context.Context, ns string, ref *recoveryv1.SecretKeySelector) (string, bool) {
	if sr.values == nil || sr.meta == nil {
		return "", false
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := sr.meta.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, meta); err != nil {
		return "", false
	}
	return sr.values.get(secretKey{ns, ref.Name, ref.Key}, meta.ResourceVersion, sr.clock.Now())
}

// remember keeps a value just read from the API server.
func (sr secretReader) remember(ns string, ref *recoveryv1.SecretKeySelector, rv, value string) {
	if sr.values != nil {
		sr.values.put(secretKey{ns, ref.Name, ref.Key}, rv, value, sr.clock.Now())
	}
}
