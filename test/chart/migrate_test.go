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
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestChart_MigrateJob: the schema step runs outside the local profile too.
// migrate.enabled with migrate.dsnSecretRef renders `manager migrate` as a
// pre-install/pre-upgrade hook Job reading the owner's DSN from that
// Secret (the database exists before the release, and the new manager must
// not start on an older schema); the profile keeps its post-install Job on
// its own DSN; by default there is none; migrate.enabled without a Secret
// fails the render, naming the value. The Job mounts no ServiceAccount
// token.
func TestChart_MigrateJob(t *testing.T) {
	profile := filepath.Join(chartDir(t), "values-auto-recovery-local.yaml")
	for _, tc := range []struct {
		name               string
		args               []string
		hook, secret, key  string
		wantJob, wantRenew bool
	}{
		{name: "default", wantJob: false},
		{name: "owner's Secret", args: []string{"--set", "migrate.enabled=true", "--set", "migrate.dsnSecretRef.name=projection-owner-db",
			"--set", "migrate.dsnSecretRef.key=owner-dsn"}, wantJob: true, hook: "pre-install,pre-upgrade", secret: "projection-owner-db", key: "owner-dsn"},
		{name: "local profile", args: []string{"-f", profile}, wantJob: true, hook: "post-install,post-upgrade", secret: "m-projection-recovery-local-dsn", key: "dsn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := find(render(t, "m", "ops", tc.args...), "Job", "m-projection-recovery-migrate")
			if !tc.wantJob {
				if job != nil {
					t.Fatal("a migrate Job renders by default")
				}
				return
			}
			if job == nil {
				t.Fatal("no migrate Job")
			}
			if h := job.GetAnnotations()["helm.sh/hook"]; h != tc.hook {
				t.Fatalf("hook %q, want %q", h, tc.hook)
			}
			c := firstContainer(t, job)
			if args, _, _ := unstructured.NestedStringSlice(c, "args"); len(args) == 0 || args[0] != "migrate" {
				t.Fatalf("args %v, want manager migrate", args)
			}
			env, _, _ := unstructured.NestedSlice(c, "env")
			name, _, _ := unstructured.NestedString(env[0].(map[string]any), "name")
			ref, _, _ := unstructured.NestedStringMap(env[0].(map[string]any), "valueFrom", "secretKeyRef")
			if name != "PROJECTION_DSN" || ref["name"] != tc.secret || ref["key"] != tc.key {
				t.Fatalf("env %s from %v, want PROJECTION_DSN from %s/%s", name, ref, tc.secret, tc.key)
			}
			if mount, ok, _ := unstructured.NestedBool(job.Object, "spec", "template", "spec", "automountServiceAccountToken"); !ok || mount {
				t.Fatal("the migrate pod mounts a ServiceAccount token it never uses")
			}
		})
	}
	if _, err := helmErr(t, "template", "m", chartDir(t), "--kube-version", kubeVersion, "--set", "migrate.enabled=true"); err == nil ||
		!strings.Contains(err.Error(), "migrate.dsnSecretRef.name") {
		t.Fatalf("migrate.enabled without a Secret rendered (%v), want an error naming migrate.dsnSecretRef.name", err)
	}
}

// TestChart_PodsAreRestricted: the pod of every workload and Job the chart
// renders (the migrate Job outside the profile and in it, the manager, the
// profile's PostgreSQL, member and drain Job) is admitted by the API
// server's Pod Security admission in a namespace enforcing the restricted
// level (server-side dry run). Enforcement applies to pods, not to their
// templates, so each template is submitted as a Pod. A pod that breaks the
// level is refused in the same namespace: the check can fail.
func TestChart_PodsAreRestricted(t *testing.T) {
	cl := sharedCluster(t)
	ctx := context.Background()
	const ns = "chart-restricted"
	if err := cl.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	dryCreate := func(p *corev1.Pod) error {
		p.Namespace = ns
		return cl.c.Create(ctx, p, client.DryRunAll)
	}
	loose := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "loose"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if err := dryCreate(loose); err == nil || !strings.Contains(err.Error(), "restricted") {
		t.Fatalf("a pod without any securityContext was admitted (%v): Pod Security admission does not enforce here", err)
	}

	profile := filepath.Join(chartDir(t), "values-auto-recovery-local.yaml")
	seen := map[string]bool{}
	for _, args := range [][]string{
		{"--set", "migrate.enabled=true", "--set", "migrate.dsnSecretRef.name=owner-db"},
		{"-f", profile},
	} {
		for _, o := range render(t, "r", ns, args...) {
			if o.GetKind() != "Deployment" && o.GetKind() != "Job" {
				continue
			}
			tmpl, _, _ := unstructured.NestedMap(o.Object, "spec", "template")
			var pod corev1.Pod
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pod); err != nil {
				t.Fatal(err)
			}
			pod.Name = strings.ToLower(o.GetKind()) + "-" + o.GetName()
			if err := dryCreate(&pod); err != nil {
				t.Errorf("%s %s: its pod is refused under the restricted level: %v", o.GetKind(), o.GetName(), err)
			}
			seen[o.GetKind()+"/"+o.GetName()] = true
		}
	}
	for _, want := range []string{"Job/r-projection-recovery-migrate", "Deployment/r-projection-recovery", "Job/r-projection-recovery-drain"} {
		if !seen[want] {
			t.Errorf("%s was not checked (rendered: %v)", want, slices.Sorted(func(yield func(string) bool) {
				for k := range seen {
					if !yield(k) {
						return
					}
				}
			}))
		}
	}
}

// TestChart_DocsNameTheReaderRolesAsRendered: the ClusterRoles a scraper
// and a completeness reader are bound to are named after the fullname (a
// release "prod" gets prod-projection-recovery-metrics-reader), and every
// doc of the chart and of docs/ spells them that way: `<release>-...` would
// send a user to bind a role that does not exist for any release whose name
// lacks the chart's.
func TestChart_DocsNameTheReaderRolesAsRendered(t *testing.T) {
	objs := render(t, "prod", "ops", "--set", "metrics.secure=true")
	for _, role := range []string{"metrics-reader", "completeness-reader"} {
		if find(objs, "ClusterRole", "prod-projection-recovery-"+role) == nil {
			t.Errorf("no ClusterRole prod-projection-recovery-%s rendered for release prod", role)
		}
	}
	root := filepath.Join(chartDir(t), "..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(chartDir(t), "values.yaml"), filepath.Join(chartDir(t), "templates", "NOTES.txt"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, role := range []string{"metrics-reader", "completeness-reader"} {
			if strings.Contains(string(raw), "<release>-"+role) {
				t.Errorf("%s names <release>-%s; the chart names it <fullname>-%s", f, role, role)
			}
		}
	}
}
