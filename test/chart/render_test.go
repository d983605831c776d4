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
	"encoding/base64"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
)

// everySwitch turns on every optional part of the chart at once.
var everySwitch = []string{
	"--set", "leaderElection.enabled=true", "--set", "replicaCount=2",
	"--set", "metrics.secure=true", "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true",
	"--set", "networkPolicy.enabled=true", "--set", "dashboard.enabled=true",
	"--set", "watchNamespaces={dry-a,dry-b}", "--set", "reconcileEvery=1h",
	"--set", "writeSliceBudget=50ms",
	"--set", "image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	"--set", "imagePullSecrets[0].name=regcred", "--set", "extraArgs={--sync-period=1h}",
	"--set", "podAnnotations.team=trading", "--set", "podLabels.tier=ops",
	"--set", "nodeSelector.kubernetes\\.io/os=linux", "--set", "tolerations[0].operator=Exists",
	"--set", "natsURL=nats://nats.trading.svc:4222",
	"--set", "migrate.enabled=true", "--set", "migrate.dsnSecretRef.name=owner-db",
}

// TestChart_ServerSideDryRun: every render the chart supports is accepted, object by
// object, by the real API server (server-side apply, dry run): schemas, CEL
// rules of the CRDs, RBAC object validation, admission. The kind inventory of
// each render is logged for the release notes.
func TestChart_ServerSideDryRun(t *testing.T) {
	cl := sharedCluster(t)
	cl.namespace(t, "chart-dry", "dry-a", "dry-b")
	profile := filepath.Join(chartDir(t), "values-auto-recovery-local.yaml")
	for _, tc := range []struct {
		name string
		args []string
		want []string // kinds the render must contain
	}{
		{"default", nil, []string{"Deployment", "ClusterRole", "ServiceAccount", "ValidatingAdmissionPolicy"}},
		{"auto-recovery-local profile", []string{"-f", profile}, []string{"ProjectionRecovery", "Job", "Secret", "ConfigMap"}},
		{"leader election", []string{"--set", "leaderElection.enabled=true"}, []string{"Role", "RoleBinding"}},
		{"every optional switch", everySwitch, []string{"PodDisruptionBudget", "ServiceMonitor", "PrometheusRule", "NetworkPolicy", "Role"}},
		{"every optional switch with the profile", append([]string{"-f", profile}, everySwitch...), []string{"ProjectionRecovery", "ServiceMonitor"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, "dry", "chart-dry", tc.args...)
			for _, k := range tc.want {
				if !slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == k }) {
					t.Errorf("the render has no %s", k)
				}
			}
			if refused := cl.apply(context.Background(), objs, "chart-dry", true); len(refused) > 0 {
				t.Fatalf("the API server refused %d of %d objects:\n%s", len(refused), len(objs), strings.Join(refused, "\n"))
			}
			t.Logf("%s: %d objects accepted (%s)", tc.name, len(objs), kindCounts(objs))
		})
	}
}

// TestChart_LeaderElectionRightsOnlyInTheReleaseNamespace: the Lease rights
// are a Role in the release namespace, bound to the manager, and no
// ClusterRole of the chart grants leases.
func TestChart_LeaderElectionRightsOnlyInTheReleaseNamespace(t *testing.T) {
	objs := render(t, "le", "ops", "--set", "leaderElection.enabled=true", "--set", "watchNamespaces={team-a}")
	var roles []string
	for _, o := range objs {
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rules {
			res, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
			if !slices.Contains(res, "leases") {
				continue
			}
			if o.GetKind() != "Role" {
				t.Errorf("%s %s grants leases; only a Role in the release namespace may", o.GetKind(), o.GetName())
			}
			roles = append(roles, o.GetNamespace()+"/"+o.GetName())
		}
	}
	if len(roles) == 0 {
		t.Fatal("leader election on, yet no Role grants leases")
	}
	for _, r := range roles {
		if !strings.HasPrefix(r, "ops/") {
			t.Errorf("Role %s grants leases outside the release namespace ops", r)
		}
	}
	if rb := find(objs, "RoleBinding", "le-projection-recovery-leader-election"); rb == nil || rb.GetNamespace() != "ops" {
		t.Fatalf("no leader-election RoleBinding in ops: %v", rb)
	}
}

// TestChart_WatchNamespacesScopesSecretRead: watchNamespaces empty reads
// Secrets through the ClusterRole (documented); set, only Roles in the listed
// namespaces grant Secrets, and the manager is told to watch exactly them.
func TestChart_WatchNamespacesScopesSecretRead(t *testing.T) {
	for _, tc := range []struct {
		name          string
		args          []string
		clusterSecret bool
		roleNS        []string
		flag          string
	}{
		{"cluster-wide by default", nil, true, nil, ""},
		{"two namespaces", []string{"--set", "watchNamespaces={team-a,team-b}"}, false, []string{"team-a", "team-b"}, "--watch-namespace=team-a,team-b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, "wn", "ops", tc.args...)
			var clusterSecret bool
			var roleNS []string
			for _, o := range objs {
				if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
					continue
				}
				if slices.Contains(userRoles, o.GetName()) {
					continue // the roles for people, not the manager's
				}
				rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
				for _, r := range rules {
					res, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
					if slices.Contains(res, "secrets") {
						if o.GetKind() == "ClusterRole" {
							clusterSecret = true
						} else {
							roleNS = append(roleNS, o.GetNamespace())
						}
					}
				}
			}
			if clusterSecret != tc.clusterSecret || !slices.Equal(roleNS, tc.roleNS) {
				t.Fatalf("cluster-wide Secret read %v (want %v), Roles with Secrets in %v (want %v)", clusterSecret, tc.clusterSecret, roleNS, tc.roleNS)
			}
			args := deploymentArgs(t, objs)
			hasFlag := slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--watch-namespace") })
			if (tc.flag == "" && hasFlag) || (tc.flag != "" && !slices.Contains(args, tc.flag)) {
				t.Fatalf("manager args %v, want watch flag %q", args, tc.flag)
			}
		})
	}
}

// userRoles are the chart's ClusterRoles for people (userRoles.create).
var userRoles = []string{"projection-recovery-view", "projection-recovery-edit", "projection-reconciliation-approver"}

// TestChart_Names: names never repeat the chart name, and the overrides win.
func TestChart_Names(t *testing.T) {
	for _, tc := range []struct {
		release string
		args    []string
		want    string
	}{
		{"projection-recovery", nil, "projection-recovery"},
		{"prod", nil, "prod-projection-recovery"},
		{"prod", []string{"--set", "nameOverride=recovery"}, "prod-recovery"},
		{"prod", []string{"--set", "fullnameOverride=pr"}, "pr"},
	} {
		t.Run(tc.release+strings.Join(tc.args, ""), func(t *testing.T) {
			objs := render(t, tc.release, "ops", tc.args...)
			if find(objs, "Deployment", tc.want) == nil || find(objs, "ServiceAccount", tc.want) == nil {
				t.Fatalf("no Deployment and ServiceAccount named %q in %s", tc.want, kindCounts(objs))
			}
		})
	}
}

// TestChart_ProfileAppliesAndIsConsistent: the auto-recovery-local profile is
// applied for real (server-side) to the control plane: every object is
// accepted, the sample ProjectionRecovery is stored as valid, and it is wired
// to what the profile renders: its DSN Secret and key exist, the DSN names
// the rendered PostgreSQL Service, its source is the rendered member Service,
// the member's descriptor is the one PostgreSQL's selected run carries
// (computed here by the member's own Go code), and the schema Job reads the
// same DSN. No pod runs in envtest; this is what can be proved without one.
func TestChart_ProfileAppliesAndIsConsistent(t *testing.T) {
	cl := sharedCluster(t)
	ctx := context.Background()
	const ns = "local"
	cl.namespace(t, ns)
	objs := render(t, "lab", ns, "-f", filepath.Join(chartDir(t), "values-auto-recovery-local.yaml"))
	if refused := cl.apply(ctx, objs, ns, false); len(refused) > 0 {
		t.Fatalf("the API server refused:\n%s", strings.Join(refused, "\n"))
	}
	t.Logf("profile: %d objects applied (%s)", len(objs), kindCounts(objs))

	var pr recoveryv1.ProjectionRecovery
	if err := cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "local"}, &pr); err != nil {
		t.Fatalf("the sample ProjectionRecovery was not stored: %v", err)
	}
	var sec unstructured.Unstructured
	sec.SetAPIVersion("v1")
	sec.SetKind("Secret")
	if err := cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: pr.Spec.Database.DSNSecretRef.Name}, &sec); err != nil {
		t.Fatalf("the DSN Secret %q of the sample recovery: %v", pr.Spec.Database.DSNSecretRef.Name, err)
	}
	enc, _, _ := unstructured.NestedString(sec.Object, "data", pr.Spec.Database.DSNSecretRef.Key)
	dsn, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(dsn) == 0 {
		t.Fatalf("Secret %s has no key %q: %v", sec.GetName(), pr.Spec.Database.DSNSecretRef.Key, err)
	}
	pgHost := fmt.Sprintf("@lab-projection-recovery-postgres.%s.svc:5432/", ns)
	if find(objs, "Service", "lab-projection-recovery-postgres") == nil || !strings.Contains(string(dsn), pgHost) {
		t.Fatalf("the DSN does not name the rendered PostgreSQL Service %s", pgHost)
	}
	if want := fmt.Sprintf("http://lab-projection-recovery-member.%s.svc:8090", ns); pr.Spec.Source.URL != want || find(objs, "Service", "lab-projection-recovery-member") == nil {
		t.Fatalf("source URL %q, want the rendered member Service %q", pr.Spec.Source.URL, want)
	}

	// The selected run must carry the member's descriptor hash, or recovery
	// refuses the scope: compute it with the member's own code.
	member := find(objs, "Deployment", "lab-projection-recovery-member")
	if member == nil {
		t.Fatal("no member Deployment")
	}
	margs := containerArgs(t, member)
	desc := engine.Descriptor{EngineID: flagValue(margs, "--engine-id"), Scope: flagValue(margs, "--scope"),
		Instruments: strings.Split(flagValue(margs, "--instruments"), ",")}
	if err := desc.Normalize().Validate(); err != nil {
		t.Fatal(err)
	}
	if desc.Scope != pr.Spec.Scope {
		t.Fatalf("member scope %q, recovery scope %q", desc.Scope, pr.Spec.Scope)
	}
	initCM := find(objs, "ConfigMap", "lab-projection-recovery-postgres-init")
	runSQL, _, _ := unstructured.NestedString(initCM.Object, "data", "02-run.sql")
	if !strings.Contains(runSQL, "'"+desc.Hash()+"'") || !strings.Contains(runSQL, "'"+desc.Scope+"'") {
		t.Fatalf("the selected run does not carry the member's descriptor %s (hash %s):\n%s", desc.Canonical(), desc.Hash(), runSQL)
	}

	// The schema step reads the same DSN and runs `manager migrate`.
	job := find(objs, "Job", "lab-projection-recovery-migrate")
	if job == nil {
		t.Fatal("no schema Job")
	}
	c := firstContainer(t, job)
	if args, _, _ := unstructured.NestedStringSlice(c, "args"); len(args) == 0 || args[0] != "migrate" {
		t.Fatalf("schema Job args %v, want manager migrate", args)
	}
	env, _, _ := unstructured.NestedSlice(c, "env")
	ref, _, _ := unstructured.NestedString(env[0].(map[string]any), "valueFrom", "secretKeyRef", "name")
	if ref != pr.Spec.Database.DSNSecretRef.Name {
		t.Fatalf("schema Job reads Secret %q, the recovery %q", ref, pr.Spec.Database.DSNSecretRef.Name)
	}
	if args := deploymentArgs(t, objs); !slices.Contains(args, "--enable-auto-recovery=true") ||
		!slices.Contains(args, fmt.Sprintf("--nats-url=nats://lab-projection-recovery-member.%s.svc:4222", ns)) {
		t.Fatalf("manager args %v: want auto-recovery on and the member's NATS", args)
	}
}

// TestChart_DashboardRendersWhenShipped: dashboard.enabled renders a
// ConfigMap carrying the shipped JSON with the sidecar label, in the
// override namespace; without the file it renders nothing.
func TestChart_DashboardRendersWhenShipped(t *testing.T) {
	objs := render(t, "g", "ops", "--set", "dashboard.enabled=true", "--set", "dashboard.namespace=monitoring")
	cm := find(objs, "ConfigMap", "g-projection-recovery-dashboard")
	shipped := fileExists(filepath.Join(chartDir(t), "dashboards", "projection-recovery.json"))
	if !shipped {
		if cm != nil {
			t.Fatal("no dashboard file, yet a dashboard ConfigMap rendered")
		}
		t.Log("the chart ships no dashboards/projection-recovery.json: nothing rendered, as intended")
		return
	}
	if cm == nil || cm.GetNamespace() != "monitoring" || cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Fatalf("dashboard ConfigMap %v: want it in monitoring with grafana_dashboard=1", cm)
	}
	if j, _, _ := unstructured.NestedString(cm.Object, "data", "projection-recovery.json"); !strings.HasPrefix(strings.TrimSpace(j), "{") {
		t.Fatalf("the ConfigMap does not carry the dashboard JSON: %.80q", j)
	}
	if find(render(t, "g", "ops"), "ConfigMap", "g-projection-recovery-dashboard") != nil {
		t.Fatal("the dashboard renders with dashboard.enabled=false")
	}
}

// TestChart_WriteSliceBudget: writeSliceBudget becomes the manager's
// --write-slice-budget (absent by default: the manager's own default), and
// the values schema refuses what is not a Go duration.
func TestChart_WriteSliceBudget(t *testing.T) {
	for _, tc := range []struct {
		set, want string
	}{
		{"", ""},
		{"50ms", "--write-slice-budget=50ms"},
		{"-1s", "--write-slice-budget=-1s"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			var args []string
			if tc.set != "" {
				args = []string{"--set", "writeSliceBudget=" + tc.set}
			}
			got := deploymentArgs(t, render(t, "wsb", "ops", args...))
			has := slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "--write-slice-budget") })
			if (tc.want == "" && has) || (tc.want != "" && !slices.Contains(got, tc.want)) {
				t.Fatalf("manager args %v, want %q", got, tc.want)
			}
		})
	}
	if _, err := helmErr(t, "template", "wsb", chartDir(t), "--set", "writeSliceBudget=fast"); err == nil || !strings.Contains(err.Error(), "writeSliceBudget") {
		t.Fatalf("writeSliceBudget=fast rendered (%v), want the values schema to refuse it", err)
	}
}

// TestChart_WatchSecrets (docs/performance.md, "Idle cost at 1,000 scopes"):
// watchSecrets (default true) becomes --watch-secrets and keeps list and
// watch on Secrets, in the ClusterRole or in each watched namespace's Role;
// false drops both verbs, so the manager may only get Secrets.
func TestChart_WatchSecrets(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		flag  string
		verbs []string
	}{
		{"default", nil, "--watch-secrets=true", []string{"get", "list", "watch"}},
		{"off", []string{"--set", "watchSecrets=false"}, "--watch-secrets=false", []string{"get"}},
		{"off in namespaces", []string{"--set", "watchSecrets=false", "--set", "watchNamespaces={team-a}"}, "--watch-secrets=false", []string{"get"}},
		{"on in namespaces", []string{"--set", "watchNamespaces={team-a}"}, "--watch-secrets=true", []string{"get", "list", "watch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, "ws", "ops", tc.args...)
			var rules int
			for _, o := range objs {
				if (o.GetKind() != "ClusterRole" && o.GetKind() != "Role") || slices.Contains(userRoles, o.GetName()) {
					continue
				}
				rs, _, _ := unstructured.NestedSlice(o.Object, "rules")
				for _, r := range rs {
					res, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
					if !slices.Contains(res, "secrets") {
						continue
					}
					rules++
					verbs, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "verbs")
					if !slices.Equal(verbs, tc.verbs) {
						t.Fatalf("%s %s grants %v on Secrets, want %v", o.GetKind(), o.GetName(), verbs, tc.verbs)
					}
				}
			}
			if rules != 1 {
				t.Fatalf("%d Secret rules, want 1", rules)
			}
			if args := deploymentArgs(t, objs); !slices.Contains(args, tc.flag) {
				t.Fatalf("manager args %v, want %s", args, tc.flag)
			}
		})
	}
	if _, err := helmErr(t, "template", "ws", chartDir(t), "--set", "watchSecrets=maybe"); err == nil || !strings.Contains(err.Error(), "watchSecrets") {
		t.Fatalf("watchSecrets=maybe rendered (%v), want the values schema to refuse it", err)
	}
}
