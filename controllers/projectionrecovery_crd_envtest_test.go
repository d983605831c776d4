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
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// hostileSpec is a valid spec as a map, for tests that break one part of it.
func hostileBase() map[string]any {
	return map[string]any{
		"scope":    "venue-h",
		"source":   map[string]any{"url": "http://127.0.0.1:1"},
		"database": map[string]any{"dsnSecretRef": map[string]any{"name": "db", "key": "dsn"}},
	}
}

// TestEnvtest_HostileSpecsAreRefusedWithAMessage: huge strings, odd
// durations, wrong types and unknown fields never reach etcd. Each is refused
// by the API server itself (OpenAPI bounds, CEL, strict field validation), as
// Invalid or BadRequest, with a message naming the field.
func TestEnvtest_HostileSpecsAreRefusedWithAMessage(t *testing.T) {
	ns := newNamespace(t)
	huge := strings.Repeat("a", 1<<20)
	cases := []struct {
		name   string
		mutate func(s map[string]any)
		want   string
	}{
		{"1 MiB scope", func(s map[string]any) { s["scope"] = huge }, "spec.scope"},
		{"1 MiB url", func(s map[string]any) { s["source"] = map[string]any{"url": "https://" + huge} }, "spec.source.url"},
		{"1 MiB secret name", func(s map[string]any) {
			s["database"] = map[string]any{"dsnSecretRef": map[string]any{"name": huge, "key": "dsn"}}
		}, "spec.database.dsnSecretRef.name"},
		{"1 MiB server name", func(s map[string]any) {
			s["source"] = map[string]any{"url": "https://m", "tls": map[string]any{"serverName": huge}}
		}, "spec.source.tls.serverName"},
		{"1 MiB duration", func(s map[string]any) { s["interval"] = huge }, "spec.interval"},
		{"duration in years", func(s map[string]any) { s["interval"] = "1y" }, "spec.interval"},
		{"negative duration", func(s map[string]any) { s["leaseDuration"] = "-30s" }, "leaseDuration must be between 5s and 10m"},
		{"overflowing duration", func(s map[string]any) { s["cycleTimeout"] = "9999999999999999h" }, "spec.cycleTimeout"},
		{"exponent duration", func(s map[string]any) { s["interval"] = "1e3s" }, "spec.interval"},
		{"request timeout below 1s", func(s map[string]any) {
			s["source"] = map[string]any{"url": "http://m", "requestTimeout": "500ms"}
		}, "source.requestTimeout must be between 1s and 30m"},
		{"request timeout above 30m", func(s map[string]any) {
			s["source"] = map[string]any{"url": "http://m", "requestTimeout": "1h"}
		}, "source.requestTimeout must be between 1s and 30m"},
		{"request timeout as a number", func(s map[string]any) {
			s["source"] = map[string]any{"url": "http://m", "requestTimeout": 30}
		}, "spec.source.requestTimeout"},
		{"empty duration", func(s map[string]any) { s["interval"] = "" }, "spec.interval"},
		{"full-width digits", func(s map[string]any) { s["interval"] = "５s" }, "spec.interval"},
		{"page size as a word", func(s map[string]any) { s["pageSize"] = "ten" }, "spec.pageSize"},
		{"page size as a fraction", func(s map[string]any) { s["pageSize"] = 1.5 }, "spec.pageSize"},
		{"page size beyond int64", func(s map[string]any) { s["pageSize"] = 1e30 }, "spec.pageSize"},
		{"suspend as a string", func(s map[string]any) { s["suspend"] = "yes" }, "spec.suspend"},
		{"source as a string", func(s map[string]any) { s["source"] = "http://m" }, "spec.source"},
		{"database as a list", func(s map[string]any) { s["database"] = []any{"db"} }, "spec.database"},
		{"backoff as a number", func(s map[string]any) { s["backoff"] = 5 }, "spec.backoff"},
		{"null scope", func(s map[string]any) { s["scope"] = nil }, "spec.scope"},
		{"control characters in the scope", func(s map[string]any) { s["scope"] = "venue\x00a" }, "spec.scope"},
		{"newline in the url", func(s map[string]any) { s["source"] = map[string]any{"url": "http://m\nHost: evil"} }, "source.url"},
		{"misspelt field", func(s map[string]any) { s["pageSzie"] = 10 }, `unknown field "spec.pageSzie"`},
		{"unknown nested field", func(s map[string]any) {
			s["source"] = map[string]any{"url": "http://m", "insecureSkipVerify": true}
		}, `unknown field "spec.source.insecureSkipVerify"`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := hostileBase()
			tc.mutate(spec)
			u := recoveryObject(ns, "hostile-"+strconv.Itoa(i), spec)
			err := k8sClient.Create(context.Background(), u, client.FieldValidation(metav1.FieldValidationStrict))
			if err == nil {
				t.Fatalf("the API server accepted a hostile spec (%s)", tc.name)
			}
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Fatalf("refusal is %v (reason %q), want Invalid or BadRequest", err, apierrors.ReasonForError(err))
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || len(msg) > 64<<10 {
				t.Fatalf("error (%d bytes) = %.400q\nwant it to name %q", len(msg), msg, tc.want)
			}
		})
	}
}

// TestEnvtest_RandomSpecsAreRefusedOrReconciled: seeded random specs, mixing
// valid and hostile values field by field. Each one is either refused by the
// API server with a message, or accepted and then reconciled (status written
// for its generation, conditions valid) without a panic in any reconcile.
// PROJECTION_HOSTILE_SEED replays a run; the seed is logged.
func TestEnvtest_RandomSpecsAreRefusedOrReconciled(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PROJECTION_HOSTILE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("PROJECTION_HOSTILE_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (replay: PROJECTION_HOSTILE_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ns := newNamespace(t)
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		StringData: map[string]string{"dsn": "postgres://projection:hostile@127.0.0.1:1/exchange?sslmode=disable&connect_timeout=1"}}
	if err := k8sClient.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	panicsBefore := reconcilePanics(t)

	const n = 40
	var accepted []string
	refused := 0
	for i := range n {
		spec := randomSpec(rng)
		name := fmt.Sprintf("random-%d", i)
		err := k8sClient.Create(ctx, recoveryObject(ns, name, spec), client.FieldValidation(metav1.FieldValidationStrict))
		switch {
		case err == nil:
			accepted = append(accepted, name)
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			if !strings.Contains(err.Error(), "spec") {
				t.Errorf("spec %v refused without naming a field: %v", spec, err)
			}
			refused++
		default:
			t.Fatalf("spec %v: unexpected error %v", spec, err)
		}
	}
	t.Logf("%d specs: %d refused by the API server, %d accepted", n, refused, len(accepted))
	if len(accepted) == 0 || refused == 0 {
		t.Fatalf("the generator should produce both kinds (seed %d): %d accepted, %d refused", seed, len(accepted), refused)
	}
	for _, name := range accepted {
		obj, _ := waitState(t, ns, name, 60*time.Second, "status written for its generation", func(o *recoveryv1.ProjectionRecovery) bool {
			return o.Status.ObservedGeneration == o.Generation && len(o.Status.Conditions) >= 2
		})
		if errs := metav1validation.ValidateConditions(obj.Status.Conditions, field.NewPath("status", "conditions")); len(errs) > 0 {
			t.Errorf("%s: invalid conditions: %v", name, errs.ToAggregate())
		}
	}
	if after := reconcilePanics(t); after != panicsBefore {
		t.Fatalf("reconcile panicked %v times on accepted specs (seed %d)", after-panicsBefore, seed)
	}
}

// randomSpec builds a spec field by field: each field takes a valid or
// boundary value most of the time and a hostile one otherwise, so that a run
// sees both specs the API server refuses and specs it admits.
func randomSpec(rng *rand.Rand) map[string]any {
	pick := func(good, bad []any) any {
		if rng.IntN(8) == 0 {
			return bad[rng.IntN(len(bad))]
		}
		return good[rng.IntN(len(good))]
	}
	l := func(vals ...any) []any { return vals }
	spec := map[string]any{
		"scope": pick(l("venue-r"+strconv.Itoa(rng.IntN(100000)), "a"+strconv.Itoa(rng.IntN(100000)), "ok.dot_us-"+strconv.Itoa(rng.IntN(100000))),
			l(strings.Repeat("z", 64), "Upper", "-lead", "trail.", "", "a b")),
		"source": map[string]any{"url": pick(l("http://127.0.0.1:1", "https://member-0.exchange.svc:8443", "https://[::1]:1/base", "https://"+strings.Repeat("h", 2000)),
			l("http://", "ftp://m", "https://"+strings.Repeat("h", 2100), "not a url", ""))},
		"database": map[string]any{"dsnSecretRef": map[string]any{
			"name": pick(l("db", "missing", strings.Repeat("d", 253)), l("Bad_Name", strings.Repeat("d", 254), "")),
			"key":  pick(l("dsn", "other.key", strings.Repeat("k", 253)), l("a/b", "", strings.Repeat("k", 254)))}},
	}
	optional := map[string]func() any{
		"pageSize":      func() any { return pick(l(int64(1), int64(10000), int64(1000)), l(int64(10001), int64(0), int64(-1))) },
		"pagesPerCycle": func() any { return pick(l(int64(1), int64(1000), int64(20)), l(int64(1001), int64(0))) },
		"cycleTimeout":  func() any { return pick(l("1s", "4s", "20s"), l("999ms", "11m", "x", "1y")) },
		"interval":      func() any { return pick(l("1s", "24h", "30s", "1.5s", "1h30m"), l("25h", "500ms", "-1s")) },
		"leaseDuration": func() any { return pick(l("5s", "10m", "30s", "2m"), l("4s", "11m", "")) },
		"backoff": func() any {
			return map[string]any{"base": pick(l("100ms", "1s"), l("99ms", "11m")), "cap": pick(l("1s", "1h", "5m"), l("2h", "500ms"))}
		},
		"suspend": func() any { return pick(l(true, false), l("yes", 1)) },
	}
	for k, gen := range optional {
		if rng.IntN(2) == 0 {
			spec[k] = gen()
		}
	}
	return spec
}

func recoveryObject(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": recoveryv1.GroupVersion.String(),
		"kind":       "ProjectionRecovery",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec":       spec,
	}}
}

// reconcilePanics sums controller-runtime's recovered reconcile panics over
// every controller of this test binary.
func reconcilePanics(t *testing.T) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range families {
		if mf.GetName() != "controller_runtime_reconcile_panics_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += counterValue(m)
		}
	}
	return sum
}

func counterValue(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return 0
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
