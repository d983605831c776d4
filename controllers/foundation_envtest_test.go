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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
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

// TestEnvtest_PrinterColumns: kubectl get projectionrecoveries, run with the
// project's kubectl against the real apiserver, shows the printer columns.
func TestEnvtest_PrinterColumns(t *testing.T) {
	ns := newNamespace(t)
	createSecret(t, ns, "db", map[string]string{"dsn": "postgres://app@127.0.0.1:1/projection?connect_timeout=2"})
	if err := k8sClient.Create(context.Background(), sampleRecovery(ns, "cols", "venue-cols")); err != nil {
		t.Fatalf("create: %v", err)
	}
	user, err := testEnv.AddUser(envtest.User{Name: "viewer", Groups: []string{"system:masters"}}, restCfg)
	if err != nil {
		t.Fatalf("add user: %v", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, resource := range []string{"projectionrecoveries", "prec"} {
		t.Run(resource, func(t *testing.T) {
			cmd := exec.Command(filepath.Join(assets, "kubectl"), "--kubeconfig", kcPath, "get", resource, "-n", ns)
			var out, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("kubectl get %s: %v: %s", resource, err, stderr.String())
			}
			header := strings.Fields(strings.SplitN(out.String(), "\n", 2)[0])
			want := []string{"NAME", "SCOPE", "STATE", "VERIFIED", "BOUNDARY", "LAG", "REASON", "DRIFT", "AGE"}
			if strings.Join(header, " ") != strings.Join(want, " ") {
				t.Fatalf("kubectl get %s header = %v, want %v\n%s", resource, header, want, out.String())
			}
			if !strings.Contains(out.String(), "venue-cols") {
				t.Fatalf("kubectl get %s does not show the scope:\n%s", resource, out.String())
			}
			t.Logf("kubectl get %s:\n%s", resource, out.String())
		})
	}
}

// TestEnvtest_APIServerRefusesBadSpecs: CRD validation (OpenAPI and CEL) makes
// the API server itself refuse bad specs, with messages a user understands.
func TestEnvtest_APIServerRefusesBadSpecs(t *testing.T) {
	ns := newNamespace(t)
	base := func() map[string]any {
		return map[string]any{
			"scope":    "venue-z",
			"source":   map[string]any{"url": "https://member-0.exchange.svc:8443"},
			"database": map[string]any{"dsnSecretRef": map[string]any{"name": "db", "key": "dsn"}},
		}
	}
	cases := []struct {
		name   string
		mutate func(spec map[string]any)
		want   string
	}{
		{"negative page size", func(s map[string]any) { s["pageSize"] = int64(-5) }, "spec.pageSize: Invalid value: -5: spec.pageSize in body should be greater than or equal to 1"},
		{"page size too large", func(s map[string]any) { s["pageSize"] = int64(100000) }, "spec.pageSize in body should be less than or equal to 10000"},
		{"zero pages per cycle", func(s map[string]any) { s["pagesPerCycle"] = int64(-1) }, "spec.pagesPerCycle in body should be greater than or equal to 1"},
		{"malformed url", func(s map[string]any) { s["source"] = map[string]any{"url": "member-0:8443/not a url"} }, "source.url must be an absolute http:// or https:// URL"},
		{"ftp url", func(s map[string]any) { s["source"] = map[string]any{"url": "ftp://member-0"} }, "source.url must be an absolute http:// or https:// URL"},
		{"tls over http", func(s map[string]any) {
			s["source"] = map[string]any{"url": "http://member-0", "tls": map[string]any{"serverName": "member-0"}}
		}, "source.tls requires an https:// url"},
		{"bearer token over http", func(s map[string]any) {
			s["source"] = map[string]any{"url": "http://member-0", "tokenSecretRef": map[string]any{"name": "member-token", "key": "token"}}
		}, "source.tokenSecretRef requires an https:// url: a bearer token sent over plain http travels in cleartext"},
		{"missing secret reference", func(s map[string]any) { s["database"] = map[string]any{} }, "spec.database.dsnSecretRef: Required value"},
		{"secret reference without name", func(s map[string]any) {
			s["database"] = map[string]any{"dsnSecretRef": map[string]any{"key": "dsn"}}
		}, "spec.database.dsnSecretRef.name: Required value"},
		{"interval too short", func(s map[string]any) { s["interval"] = "10ms" }, "interval must be between 1s and 24h"},
		{"unparsable duration", func(s map[string]any) { s["leaseDuration"] = "soon" }, "spec.leaseDuration"},
		{"backoff base above cap", func(s map[string]any) { s["backoff"] = map[string]any{"base": "2m", "cap": "1m"} }, "backoff.base must not exceed backoff.cap"},
		{"cycle longer than lease", func(s map[string]any) { s["cycleTimeout"] = "60s"; s["leaseDuration"] = "30s" }, "cycleTimeout must be shorter than leaseDuration"},
		{"bad scope", func(s map[string]any) { s["scope"] = "Venue A" }, "spec.scope in body should match"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := base()
			tc.mutate(spec)
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": recoveryv1.GroupVersion.String(),
				"kind":       "ProjectionRecovery",
				"metadata":   map[string]any{"namespace": ns, "name": "bad-" + string(rune('a'+i))},
				"spec":       spec,
			}}
			err := k8sClient.Create(context.Background(), u)
			if err == nil {
				t.Fatalf("the API server accepted a bad spec (%s)", tc.name)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %q\nwant it to contain %q", err.Error(), tc.want)
			}
		})
	}

	t.Run("changed scope", func(t *testing.T) {
		obj := sampleRecovery(ns, "immutable", "venue-imm")
		if err := k8sClient.Create(context.Background(), obj); err != nil {
			t.Fatalf("create: %v", err)
		}
		// The controller adds its finalizer concurrently: retry on conflicts
		// until the API server answers about the scope itself.
		var err error
		for i := 0; i < 20; i++ {
			cur := getRecovery(t, ns, "immutable")
			cur.Spec.Scope = "venue-other"
			if err = k8sClient.Update(context.Background(), cur); err == nil || !apierrors.IsConflict(err) {
				break
			}
		}
		if err == nil || !strings.Contains(err.Error(), "scope is immutable") {
			t.Fatalf("update of scope: err = %v, want a refusal saying the scope is immutable", err)
		}
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
