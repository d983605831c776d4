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
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

func sampleRecovery(ns, name, scope string) *recoveryv1.ProjectionRecovery {
	return &recoveryv1.ProjectionRecovery{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: recoveryv1.ProjectionRecoverySpec{
			Scope:    scope,
			Source:   recoveryv1.SourceSpec{URL: "http://127.0.0.1:1"},
			Database: recoveryv1.DatabaseSpec{DSNSecretRef: recoveryv1.SecretKeySelector{Name: "db", Key: "dsn"}},
		},
	}
}

func getRecovery(t testing.TB, ns, name string) *recoveryv1.ProjectionRecovery {
	t.Helper()
	obj := &recoveryv1.ProjectionRecovery{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("get: %v", err)
	}
	return obj
}

// TestEnvtest_StatusWrittenAfterCreate: the manager observes a new resource
// and writes status through the status subresource (here: the database the
// Secret names is unreachable, so the scope is RETRYING); read back with a
// non-cached client.
func TestEnvtest_StatusWrittenAfterCreate(t *testing.T) {
	ns := newNamespace(t)
	createSecret(t, ns, "db", map[string]string{"dsn": "postgres://app:s3cr3t-pw@127.0.0.1:1/projection?connect_timeout=2"})
	obj := sampleRecovery(ns, "venue-a", "venue-a")
	if err := k8sClient.Create(context.Background(), obj); err != nil {
		t.Fatalf("create: %v", err)
	}
	// Server-side defaults from the CRD schema.
	got := getRecovery(t, ns, "venue-a")
	if got.Spec.PageSize != recoveryv1.DefaultPageSize || got.Spec.Interval == nil || got.Spec.Interval.Duration != recoveryv1.DefaultInterval {
		t.Fatalf("schema defaults not applied: pageSize=%d interval=%v", got.Spec.PageSize, got.Spec.Interval)
	}
	eventually(t, 20*time.Second, "status.observedGeneration and conditions", func() (bool, error) {
		got = getRecovery(t, ns, "venue-a")
		c := meta.FindStatusCondition(got.Status.Conditions, recoveryv1.ConditionReconciling)
		return got.Status.ObservedGeneration == got.Generation && c != nil, nil
	})
	rc := meta.FindStatusCondition(got.Status.Conditions, recoveryv1.ConditionReconciling)
	if rc.Status != metav1.ConditionTrue || rc.Reason != recoveryv1.ReasonRetrying || rc.ObservedGeneration != got.Generation {
		t.Fatalf("Reconciling condition = %+v, want True/%s", rc, recoveryv1.ReasonRetrying)
	}
	if got.Status.State != recoveryv1.StateRetrying || got.Status.Reason != "DATABASE_UNAVAILABLE" {
		t.Fatalf("state/reason = %s/%s, want RETRYING/DATABASE_UNAVAILABLE", got.Status.State, got.Status.Reason)
	}
	if strings.Contains(got.Status.Message, "s3cr3t-pw") {
		t.Fatalf("status message leaks the DSN password: %q", got.Status.Message)
	}
	if !containsString(got.Finalizers, recoveryv1.FinalizerName) {
		t.Fatalf("finalizer %s not added: %v", recoveryv1.FinalizerName, got.Finalizers)
	}
}

// TestEnvtest_MissingSecretStalls: a reference to a Secret that does not exist
// is an operator problem: Stalled=True with a message naming the reference.
func TestEnvtest_MissingSecretStalls(t *testing.T) {
	ns := newNamespace(t)
	obj := sampleRecovery(ns, "no-secret", "venue-b")
	if err := k8sClient.Create(context.Background(), obj); err != nil {
		t.Fatalf("create: %v", err)
	}
	eventually(t, 20*time.Second, "Stalled=True SecretNotFound", func() (bool, error) {
		got := getRecovery(t, ns, "no-secret")
		c := meta.FindStatusCondition(got.Status.Conditions, recoveryv1.ConditionStalled)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == recoveryv1.ReasonSecretNotFound &&
			strings.Contains(c.Message, `spec.database.dsnSecretRef: Secret "db" not found`), nil
	})
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
