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

package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// TestDrain_WaitsForTheFinalizer: `manager drain` (the local profile's
// pre-delete hook) deletes only the selected resources of its namespace
// and returns only once they are gone; while the finalizer stays (no
// manager running) it fails at its timeout naming what is left, so that
// helm uninstall stops instead of deleting the manager under a resource
// it still has to let go. Against a real kube-apiserver (envtest).
func TestDrain_WaitsForTheFinalizer(t *testing.T) {
	env, cfg, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(recoveryv1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "drain"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	create := func(name string, lbl map[string]string) {
		t.Helper()
		r := &recoveryv1.ProjectionRecovery{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbl, Finalizers: []string{recoveryv1.FinalizerName}},
			Spec: recoveryv1.ProjectionRecoverySpec{
				Scope:    name,
				Source:   recoveryv1.SourceSpec{URL: "http://member.drain.svc:8090"},
				Database: recoveryv1.DatabaseSpec{DSNSecretRef: recoveryv1.SecretKeySelector{Name: "db", Key: "dsn"}},
			},
		}
		if err := c.Create(ctx, r); err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
	}
	release := map[string]string{"app.kubernetes.io/instance": "rel"}
	create("ours", release)
	create("theirs", map[string]string{"app.kubernetes.io/instance": "another"})
	// A person's reconciliations carry no release label: the one of a
	// drained recovery goes with it, the other release's stays.
	reconcile := func(name, recovery string) {
		t.Helper()
		pr := &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: recoveryv1.ProjectionReconciliationSpec{RecoveryRef: recoveryv1.RecoveryReference{Name: recovery}}}
		if err := c.Create(ctx, pr); err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
	}
	reconcile("ours-repair", "ours")
	reconcile("theirs-repair", "theirs")
	getRecon := func(name string) error {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &recoveryv1.ProjectionReconciliation{})
	}
	cfgFn := func() (*rest.Config, error) { return cfg, nil }
	args := []string{"--namespace=" + ns, "--selector=app.kubernetes.io/instance=rel"}
	get := func(name string) (*recoveryv1.ProjectionRecovery, error) {
		var r recoveryv1.ProjectionRecovery
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &r)
		return &r, err
	}

	t.Run("fails at its timeout while the finalizer stays", func(t *testing.T) {
		var out bytes.Buffer
		err := runDrain(ctx, cfgFn, append(args, "--timeout=2s"), &out)
		if err == nil || !strings.Contains(err.Error(), "projectionrecovery/ours") || !strings.Contains(err.Error(), recoveryv1.FinalizerName) {
			t.Fatalf("err = %v, want a timeout naming projectionrecovery/ours and the finalizer", err)
		}
		if r, err := get("ours"); err != nil || r.DeletionTimestamp == nil {
			t.Fatalf("ours: err %v, deletionTimestamp %v: want it deleted and held by its finalizer", err, r.DeletionTimestamp)
		}
	})

	t.Run("returns once the finalizer is removed", func(t *testing.T) {
		go func() {
			time.Sleep(time.Second)
			r, err := get("ours")
			if err != nil {
				return
			}
			r.Finalizers = nil
			_ = c.Update(ctx, r)
		}()
		var out bytes.Buffer
		if err := runDrain(ctx, cfgFn, append(args, "--timeout=30s"), &out); err != nil {
			t.Fatalf("drain: %v", err)
		}
		if _, err := get("ours"); !apierrors.IsNotFound(err) {
			t.Fatalf("ours after drain: %v, want NotFound", err)
		}
		if err := getRecon("ours-repair"); !apierrors.IsNotFound(err) {
			t.Fatalf("the reconciliation of a drained recovery: %v, want NotFound", err)
		}
		if !strings.Contains(out.String(), "no ProjectionReconciliation or ProjectionRecovery left") {
			t.Fatalf("output %q", out.String())
		}
	})

	t.Run("leaves other releases' resources alone", func(t *testing.T) {
		r, err := get("theirs")
		if err != nil || r.DeletionTimestamp != nil {
			t.Fatalf("theirs: err %v, deletionTimestamp %v: drain deleted a resource it did not select", err, r.DeletionTimestamp)
		}
		if err := getRecon("theirs-repair"); err != nil {
			t.Fatalf("theirs-repair: %v: drain deleted a reconciliation of a recovery it did not select", err)
		}
	})

	t.Run("usage errors", func(t *testing.T) {
		for _, a := range [][]string{nil, {"--namespace=x", "extra"}, {"--namespace=x", "--selector=a in ("}} {
			var ue *usageError
			err := runDrain(ctx, cfgFn, a, &bytes.Buffer{})
			if err == nil || !errors.As(err, &ue) {
				t.Fatalf("%q: err = %v, want a usage error", a, err)
			}
		}
	})
}
