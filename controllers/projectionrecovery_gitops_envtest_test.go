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
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// The field managers a GitOps tool uses: server-side apply (Flux, Argo CD
// with ServerSideApply=true) and a client-side update (kubectl apply, Argo
// CD's default). Neither may ever compete with the controller for a field.
const (
	gitopsApplyManager  = "gitops-ssa"
	gitopsUpdateManager = "gitops-csa"
)

// applyRecovery server-side applies the desired ProjectionRecovery (only
// what a Git repository holds: apiVersion, kind, name, namespace, spec).
func applyRecovery(t *testing.T, desired *recoveryv1.ProjectionRecovery) {
	t.Helper()
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&desired.Spec)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": recoveryv1.GroupVersion.String(),
		"kind":       "ProjectionRecovery",
		"metadata":   map[string]any{"name": desired.Name, "namespace": desired.Namespace},
		"spec":       spec,
	}}
	if err := k8sClient.Patch(context.Background(), u, client.Apply, client.FieldOwner(gitopsApplyManager), client.ForceOwnership); err != nil {
		t.Fatalf("server-side apply: %v", err)
	}
}

// statusEntries are the managedFields entries of the status subresource.
func statusEntries(obj *recoveryv1.ProjectionRecovery) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for _, e := range obj.ManagedFields {
		if e.Subresource == "status" {
			out = append(out, e)
		}
	}
	return out
}

// TestGitOps_ReapplyingAnUnchangedResourceWritesNothing: a GitOps tool
// re-applies the resource on every sync. Re-applied unchanged, client-side
// or server-side, it must not change the object (no watch event, so no
// reconcile is triggered) and the controller must write no status over a
// settle period spanning several periodic cycles; the controller never owns
// a spec field, so an apply never conflicts with it.
func TestGitOps_ReapplyingAnUnchangedResourceWritesNothing(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "gitops", 60, 0.2)
	createSecret(t, ns, "gitops-db", map[string]string{"dsn": f.dsn})
	desired := &recoveryv1.ProjectionRecovery{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gitops"},
		Spec: recoveryv1.ProjectionRecoverySpec{
			Scope:         f.scope,
			Source:        recoveryv1.SourceSpec{URL: f.url},
			Database:      recoveryv1.DatabaseSpec{DSNSecretRef: recoveryv1.SecretKeySelector{Name: "gitops-db", Key: "dsn"}},
			PageSize:      64,
			PagesPerCycle: 4,
			// Short, so the settle period below spans several periodic cycles.
			Interval: &metav1.Duration{Duration: time.Second},
		},
	}
	applyRecovery(t, desired)
	settled, _ := waitState(t, ns, desired.Name, 90*time.Second, "CURRENT at the boundary", isCurrentAt(f.boundary()))

	// Settled: the last status write happened; none follows while nothing changes.
	time.Sleep(1500 * time.Millisecond)
	settled = getRecovery(t, ns, desired.Name)
	if len(statusEntries(settled)) == 0 {
		t.Fatalf("no managedFields entry for the status subresource: %+v", settled.ManagedFields)
	}

	t.Run("client-side update with the same spec", func(t *testing.T) {
		cur := getRecovery(t, ns, desired.Name)
		cur.Spec = *desired.Spec.DeepCopy()
		if err := k8sClient.Update(context.Background(), cur, client.FieldOwner(gitopsUpdateManager)); err != nil {
			t.Fatalf("update: %v", err)
		}
		if cur.ResourceVersion != settled.ResourceVersion {
			t.Fatalf("an unchanged update changed the object: resourceVersion %s -> %s", settled.ResourceVersion, cur.ResourceVersion)
		}
	})
	t.Run("server-side apply with the same spec", func(t *testing.T) {
		applyRecovery(t, desired)
		if got := getRecovery(t, ns, desired.Name); got.ResourceVersion != settled.ResourceVersion {
			t.Fatalf("an unchanged apply changed the object: resourceVersion %s -> %s", settled.ResourceVersion, got.ResourceVersion)
		}
	})

	// Settle over several intervals: the periodic cycles verify, find
	// nothing new and write no status.
	time.Sleep(4 * time.Second)
	after := getRecovery(t, ns, desired.Name)
	if after.ResourceVersion != settled.ResourceVersion {
		t.Errorf("the object changed while nothing did: resourceVersion %s -> %s, status %+v", settled.ResourceVersion, after.ResourceVersion, after.Status)
	}
	before, now := statusEntries(settled), statusEntries(after)
	if len(before) != len(now) || !before[0].Time.Equal(now[0].Time) {
		t.Errorf("the status subresource was written: managedFields %+v -> %+v", before, now)
	}

	t.Run("the controller never writes spec", func(t *testing.T) {
		for _, e := range after.ManagedFields {
			t.Logf("managedFields: manager %q operation %s subresource %q", e.Manager, e.Operation, e.Subresource)
		}
		for _, e := range after.ManagedFields {
			if e.Manager == gitopsApplyManager || e.Manager == gitopsUpdateManager {
				continue
			}
			var fields map[string]any
			if e.FieldsV1 != nil {
				if err := json.Unmarshal(e.FieldsV1.Raw, &fields); err != nil {
					t.Fatal(err)
				}
			}
			if _, ok := fields["f:spec"]; ok {
				t.Errorf("manager %q (%s %s) owns spec fields: %s", e.Manager, e.Operation, e.Subresource, e.FieldsV1.Raw)
			}
		}
		var specOwner bool
		for _, e := range after.ManagedFields {
			if e.Manager == gitopsApplyManager && e.FieldsV1 != nil && strings.Contains(string(e.FieldsV1.Raw), `"f:spec"`) {
				specOwner = true
			}
		}
		if !specOwner {
			t.Errorf("the GitOps apply does not own spec: %+v", after.ManagedFields)
		}
	})
}

// TestGitOps_AutoRecoveryOffSettlesForKstatus: with auto-recovery off (the
// chart's default) a scope that is behind reaches a settled kstatus verdict,
// Failed with Stalled=True AutoRecoveryDisabled, read from the real API
// server: `kstatus wait` and a Flux health check end instead of waiting
// forever on InProgress.
func TestGitOps_AutoRecoveryOffSettlesForKstatus(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "gitopsro", 40, 0.3)
	lbl, sel := shard(t, "gitopsro")
	stop, _, err := startManager("gitopsro", sel, false, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	obj := f.recovery(ns, "gitopsro", lbl, nil)
	var res *kstatus.Result
	eventually(t, 30*time.Second, "a settled kstatus verdict", func() (bool, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(recoveryv1.GroupVersion.WithKind("ProjectionRecovery"))
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), u); err != nil {
			return false, err
		}
		if _, found, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); !found {
			return false, nil // no status yet: kstatus has nothing to read
		}
		r, err := kstatus.Compute(u)
		if err != nil {
			return false, err
		}
		res = r
		return r.Status != kstatus.InProgressStatus && r.Status != kstatus.UnknownStatus, nil
	})
	got := getRecovery(t, ns, obj.Name)
	if res.Status != kstatus.FailedStatus || got.Status.Reason != recoveryv1.ReasonAutoRecoveryDisabled || got.Status.Lag == 0 {
		t.Fatalf("kstatus = %s (%s), status %+v; want Failed, AutoRecoveryDisabled, lag > 0", res.Status, res.Message, got.Status)
	}
}
