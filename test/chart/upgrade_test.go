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

package chart

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// previousChart is the chart as it was at commit 917fd29 (before values
// schema, namespaced Roles and the local environment), packaged with
// `git archive 917fd29 charts/projection-recovery | tar -x && helm package`:
// the release a user upgrades from. Kept as a file so the test does not
// depend on the clone's history.
const previousChart = "testdata/projection-recovery-917fd29.tgz"

// TestChart_UpgradeFromPreviousChart is the CRD upgrade story, run as a user
// runs it on an empty control plane: install the previous chart (its crds/
// create the CRDs), store a ProjectionRecovery, apply the working tree's
// CRDs with `kubectl apply --server-side --force-conflicts` (Helm never
// upgrades crds/), then `helm upgrade --reset-then-reuse-values` to the
// working tree chart (the new keys take their defaults, the user's stay). The
// resource survives, the CRDs are now owned by that apply (so the next one
// updates them), and the upgraded templates are live: the manager's
// ClusterRole lost the verbs it never used.
func TestChart_UpgradeFromPreviousChart(t *testing.T) {
	cl, err := startCluster(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const release, ns = "pr", "ops"
	kc := []string{"--kubeconfig", cl.kubeconfig, "--namespace", ns}

	// A value the user set at install must survive the upgrade.
	helm(t, append([]string{"install", release, previousChart, "--create-namespace", "--set", "logLevel=debug"}, kc...)...)
	obj := &recoveryv1.ProjectionRecovery{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "venue-a"},
		Spec: recoveryv1.ProjectionRecoverySpec{Scope: "venue-a", Source: recoveryv1.SourceSpec{URL: "http://member.trading.svc:8090"},
			Database: recoveryv1.DatabaseSpec{DSNSecretRef: recoveryv1.SecretKeySelector{Name: "db", Key: "dsn"}}},
	}
	if err := cl.c.Create(ctx, obj); err != nil {
		t.Fatalf("a ProjectionRecovery on the previous chart's CRD: %v", err)
	}
	var before rbacv1.ClusterRole
	if err := cl.c.Get(ctx, client.ObjectKey{Name: "pr-projection-recovery"}, &before); err != nil {
		t.Fatal(err)
	}

	// The documented CRD step, with the real kubectl.
	kubectl := exec.Command(filepath.Join(cl.assets, "kubectl"), "--kubeconfig", cl.kubeconfig,
		"apply", "--server-side", "--force-conflicts", "-f", filepath.Join(chartDir(t), "crds"))
	if out, err := kubectl.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply --server-side the CRDs: %v\n%s", err, out)
	}
	helm(t, append([]string{"upgrade", release, chartDir(t), "--reset-then-reuse-values"}, kc...)...)

	status := helm(t, append([]string{"status", release, "-o", "json"}, kc...)...)
	if !strings.Contains(status, `"version":2`) || !strings.Contains(status, `"status":"deployed"`) {
		t.Fatalf("after the upgrade the release is not revision 2, deployed: %.300s", status)
	}
	var got recoveryv1.ProjectionRecovery
	if err := cl.c.Get(ctx, client.ObjectKeyFromObject(obj), &got); err != nil || got.UID != obj.UID {
		t.Fatalf("the ProjectionRecovery did not survive the upgrade: %v", err)
	}
	entries, err := os.ReadDir(filepath.Join(chartDir(t), "crds"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := strings.TrimSuffix(strings.TrimPrefix(e.Name(), "recovery.projection.io_"), ".yaml") + ".recovery.projection.io"
		var crd apiextensionsv1.CustomResourceDefinition
		if err := cl.c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(crd.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
			return m.Operation == metav1.ManagedFieldsOperationApply && m.Manager == "kubectl"
		}) {
			t.Errorf("CRD %s is not owned by the server-side apply: the next upgrade's apply would conflict", name)
		}
	}
	var after rbacv1.ClusterRole
	if err := cl.c.Get(ctx, client.ObjectKey{Name: "pr-projection-recovery"}, &after); err != nil {
		t.Fatal(err)
	}
	if !grants(before.Rules, "projectionrecoveries", "update") || grants(after.Rules, "projectionrecoveries", "update") {
		t.Fatalf("the upgrade did not replace the manager's ClusterRole: update on projectionrecoveries before %v, after %v",
			grants(before.Rules, "projectionrecoveries", "update"), grants(after.Rules, "projectionrecoveries", "update"))
	}
	var dep appsv1.Deployment
	if err := cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pr-projection-recovery"}, &dep); err != nil {
		t.Fatal(err)
	}
	if args := dep.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--metrics-secure=false") || !slices.Contains(args, "--log-level=debug") {
		t.Fatalf("the Deployment was not upgraded with the new defaults and the user's logLevel=debug: args %v", args)
	}
}

func grants(rules []rbacv1.PolicyRule, resource, verb string) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb)
	})
}
