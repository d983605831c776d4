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
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// samplesDir holds the manifests a user copies (applied by its kustomization).
var samplesDir = filepath.Join("..", "config", "samples")

// sampleObjects decodes every document of one sample file.
func sampleObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// kustomizedSamples are the files config/samples/kustomization.yaml applies.
func kustomizedSamples(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(samplesDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatal(err)
	}
	paths := make([]string, 0, len(k.Resources))
	for _, r := range k.Resources {
		paths = append(paths, filepath.Join(samplesDir, r))
	}
	return paths
}

// TestSamples_CarryNoSecret: no sample holds a Secret. The Secrets are the
// user's (created with their own role's DSN, docs/database-role.md): a sample
// that carried one would overwrite it on `kubectl apply` with whatever DSN
// the sample spells, and the manager would connect as that role.
func TestSamples_CarryNoSecret(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(samplesDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples in %s: %v", samplesDir, err)
	}
	for _, f := range files {
		for _, o := range sampleObjects(t, f) {
			if o.GetKind() == "Secret" {
				t.Errorf("%s holds Secret %q: samples reference Secrets, the user creates them", f, o.GetName())
			}
		}
	}
}

// TestEnvtest_SamplesAreAccepted: the samples a user copies into Git pass
// the API server's validation as written, strict field validation included,
// so that a field renamed or bounded in the CRD cannot leave them behind.
// The Secret the recovery references is created first, as the documented
// separate step; the reconciliation sample is a dry run of the recovery
// sample.
func TestEnvtest_SamplesAreAccepted(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	var objs []*unstructured.Unstructured
	for _, f := range kustomizedSamples(t) {
		objs = append(objs, sampleObjects(t, f)...)
	}
	kinds := map[string]int{}
	var recovery, reconciliation *unstructured.Unstructured
	for _, u := range objs {
		kinds[u.GetKind()]++
		switch u.GetKind() {
		case "ProjectionRecovery":
			recovery = u
		case "ProjectionReconciliation":
			reconciliation = u
		}
	}
	if kinds["ProjectionRecovery"] != 1 || kinds["ProjectionReconciliation"] != 1 || len(objs) != 2 {
		t.Fatalf("the samples hold %v, want one ProjectionRecovery and one ProjectionReconciliation", kinds)
	}
	secret, _, _ := unstructured.NestedString(recovery.Object, "spec", "database", "dsnSecretRef", "name")
	key, _, _ := unstructured.NestedString(recovery.Object, "spec", "database", "dsnSecretRef", "key")
	if err := k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret},
		StringData: map[string]string{key: "postgres://projection_recovery@127.0.0.1:1/projection"}}); err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		u.SetNamespace(ns)
		// No manager of the suite takes it: validation is what is tested.
		u.SetLabels(map[string]string{shardLabel: "samples"})
		if err := k8sClient.Create(ctx, u, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
			t.Fatalf("%s %s refused: %v", u.GetKind(), u.GetName(), err)
		}
	}
	got := getRecovery(t, ns, recovery.GetName())
	if d := got.Spec.Source.EffectiveRequestTimeout(); d != recoveryv1.DefaultRequestTimeout {
		t.Fatalf("sample's source.requestTimeout = %v, want the documented default %v", d, recoveryv1.DefaultRequestTimeout)
	}
	var rc recoveryv1.ProjectionReconciliation
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: reconciliation.GetName()}, &rc); err != nil {
		t.Fatal(err)
	}
	if rc.Spec.RecoveryRef.Name != got.Name || rc.Spec.Approval != nil || rc.Spec.Rollback != nil {
		t.Fatalf("reconciliation sample %+v: want a dry run (no approval, no rollback) of recovery %s", rc.Spec, got.Name)
	}
}
