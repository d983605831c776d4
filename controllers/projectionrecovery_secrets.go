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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// reconcileSecrets resolves every Secret reference of the spec. A missing
// Secret or key stalls the resource with a message naming the reference; it is
// not retried with backoff because only an operator can fix it (the next
// periodic check picks the fix up).
func (r *ProjectionRecoveryReconciler) reconcileSecrets(ctx context.Context, s *recoveryScope) error {
	spec := &s.obj.Spec
	ns := s.obj.Namespace
	var err error
	if s.secrets.dsn, err = r.secretValue(ctx, ns, "spec.database.dsnSecretRef", &spec.Database.DSNSecretRef); err != nil {
		return r.secretPhaseError(s, err)
	}
	if ref := spec.Source.TokenSecretRef; ref != nil {
		if s.secrets.token, err = r.secretValue(ctx, ns, "spec.source.tokenSecretRef", ref); err != nil {
			return r.secretPhaseError(s, err)
		}
	}
	if spec.Source.TLS != nil && spec.Source.TLS.CASecretRef != nil {
		ca, err := r.secretValue(ctx, ns, "spec.source.tls.caSecretRef", spec.Source.TLS.CASecretRef)
		if err != nil {
			return r.secretPhaseError(s, err)
		}
		s.secrets.ca = []byte(ca)
	}
	return nil
}

func (r *ProjectionRecoveryReconciler) secretPhaseError(s *recoveryScope, err error) error {
	var missing *secretMissingError
	if errors.As(err, &missing) {
		s.reason, s.message, s.done = recoveryv1.ReasonSecretNotFound, missing.Error(), true
		return nil
	}
	return err
}

func (r *ProjectionRecoveryReconciler) secretValue(ctx context.Context, ns, field string, ref *recoveryv1.SecretKeySelector) (string, error) {
	if v, ok := r.cachedSecretValue(ctx, ns, ref); ok {
		return v, nil
	}
	sec := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return "", &secretMissingError{field: field, name: ref.Name, key: ref.Key}
		}
		return "", fmt.Errorf("reading %s: %w", field, err)
	}
	v, ok := sec.Data[ref.Key]
	if !ok || len(v) == 0 {
		return "", &secretMissingError{field: field, name: ref.Name, key: ref.Key, keyMissing: true}
	}
	r.rememberSecretValue(ns, ref, sec.ResourceVersion, string(v))
	return string(v), nil
}
