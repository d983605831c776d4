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

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// reconcileSecrets resolves every Secret reference of the spec. A missing
// Secret or key stalls the resource with a message naming the reference; it is
// not retried with backoff because only an operator can fix it (the next
// periodic check picks the fix up).
func (r *ProjectionRecoveryReconciler) reconcileSecrets(ctx context.Context, s *recoveryScope) error {
	var err error
	if s.secrets, err = r.secretReader().recoverySecrets(ctx, s.obj); err != nil {
		return r.secretPhaseError(s, err)
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

// secretReader reads this controller's Secrets: from the values remembered
// under WatchSecrets when the informer shows them unchanged, else from the
// API server.
func (r *ProjectionRecoveryReconciler) secretReader() secretReader {
	sr := secretReader{api: r.APIReader}
	if r.WatchSecrets {
		sr.values, sr.clock = &r.secretValues, r.Clock
		if r.Client != nil {
			sr.meta = r.Client
		}
	}
	return sr
}
