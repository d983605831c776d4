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
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// kubeVersion is what helm template assumes: a helm built with `go install`
// defaults to Kubernetes v1.20, which the chart's kubeVersion refuses. Against
// a real API server (install, upgrade) helm asks the server instead.
const kubeVersion = "1.37.0"

func TestMain(m *testing.M) {
	code := m.Run()
	stopShared()
	pgtest.Shutdown()
	if helmHomeDir != "" {
		_ = os.RemoveAll(helmHomeDir)
	}
	os.Exit(code)
}

func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func chartDir(t testing.TB) string {
	return filepath.Join(repoRoot(t), "charts", "projection-recovery")
}

var helmVersionLine = regexp.MustCompile(`(?m)^HELM_VERSION \?= (\S+)$`)

// helmBin is $HELM (make test sets it to the Makefile's $(HELM)), else the
// Makefile's bin/helm-<HELM_VERSION>, built by make when missing: the same
// binary chart-check uses, never one found on PATH.
func helmBin(t testing.TB) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	root := repoRoot(t)
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := helmVersionLine.FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile has no HELM_VERSION ?= line")
	}
	bin := filepath.Join(root, "bin", "helm-"+string(m[1]))
	if _, err := os.Stat(bin); err != nil {
		if out, err := exec.Command("make", "-C", root, bin).CombinedOutput(); err != nil {
			t.Fatalf("building helm with make %s: %v\n%s", bin, err, out)
		}
	}
	return bin
}

// helm runs the helm binary with an isolated home (no repositories, cache or
// plugins of the machine) and returns its stdout; a failure fails the test
// with stderr.
func helm(t testing.TB, args ...string) string {
	t.Helper()
	out, err := helmErr(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func helmErr(t testing.TB, args ...string) (string, error) {
	t.Helper()
	home := helmHome(t)
	cmd := exec.Command(helmBin(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return stdout.String(), nil
}

var (
	helmHomeOnce sync.Once
	helmHomeDir  string
)

func helmHome(t testing.TB) string {
	helmHomeOnce.Do(func() {
		var err error
		if helmHomeDir, err = os.MkdirTemp("", "chart-test-helm-"); err != nil {
			t.Fatal(err)
		}
	})
	return helmHomeDir
}

// render is `helm template` of the working tree chart.
func render(t testing.TB, release, namespace string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out := helm(t, append([]string{"template", release, chartDir(t), "--namespace", namespace, "--kube-version", kubeVersion}, args...)...)
	return decodeObjects(t, out)
}

// decodeObjects splits a multi-document YAML stream into objects, skipping
// empty documents (a template that renders nothing).
func decodeObjects(t testing.TB, manifest string) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if len(u.Object) == 0 {
			continue
		}
		objs = append(objs, u)
	}
}

// kindCounts is "Kind=n, ..." sorted by kind: the closing note's inventory.
func kindCounts(objs []*unstructured.Unstructured) string {
	n := map[string]int{}
	for _, o := range objs {
		n[o.GetKind()]++
	}
	kinds := make([]string, 0, len(n))
	for k := range n {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s=%d", k, n[k])
	}
	return strings.Join(parts, ", ")
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// cluster is one real control plane (envtest: kube-apiserver + etcd, RBAC
// authorization, ServiceAccount tokens) with an admin client and kubeconfig.
type cluster struct {
	env        *envtest.Environment
	cfg        *rest.Config
	c          client.Client
	kubeconfig string // the admin's, for helm and kubectl
	assets     string
}

var (
	sharedOnce sync.Once
	shared     *cluster
	sharedErr  error
)

// sharedCluster starts (once per test binary) a control plane with the
// chart's CRDs and the ServiceMonitor and PrometheusRule stand-ins installed.
func sharedCluster(t testing.TB) *cluster {
	t.Helper()
	sharedOnce.Do(func() {
		shared, sharedErr = startCluster([]string{filepath.Join(chartDir(t), "crds"), filepath.Join("testdata", "servicemonitor-crd.yaml"),
			filepath.Join("testdata", "prometheusrule-crd.yaml")})
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func stopShared() {
	if shared != nil {
		shared.stop()
	}
}

// startCluster starts a control plane with the given CRD paths installed
// (none: an empty cluster, as a first `helm install` meets it).
func startCluster(crdPaths []string) (*cluster, error) {
	assets, err := testenv.AssetsDir()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, CRDDirectoryPaths: crdPaths, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	cl := &cluster{env: env, cfg: cfg, assets: assets}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, rbacv1.AddToScheme, apiextensionsv1.AddToScheme, recoveryv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	if cl.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		_ = env.Stop()
		return nil, err
	}
	admin, err := env.AddUser(envtest.User{Name: "chart-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	f, err := os.CreateTemp("", "chart-test-kubeconfig-")
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	if _, err := f.Write(kc); err != nil {
		_ = env.Stop()
		return nil, err
	}
	_ = f.Close()
	cl.kubeconfig = f.Name()
	return cl, nil
}

func (cl *cluster) stop() {
	_ = os.Remove(cl.kubeconfig)
	_ = cl.env.Stop()
}

func (cl *cluster) namespace(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		err := cl.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// apply sends every object to the API server as a server-side apply (dry run
// only when dryRun), in the release namespace unless it names its own; it
// returns one error line per refused object.
func (cl *cluster) apply(ctx context.Context, objs []*unstructured.Unstructured, namespace string, dryRun bool) []string {
	var refused []string
	for _, o := range objs {
		o = o.DeepCopy()
		namespaced, err := cl.c.IsObjectNamespaced(o)
		if err != nil {
			refused = append(refused, fmt.Sprintf("%s %s: %v", o.GetKind(), o.GetName(), err))
			continue
		}
		if namespaced && o.GetNamespace() == "" {
			o.SetNamespace(namespace)
		}
		opts := []client.PatchOption{client.ForceOwnership, client.FieldOwner("chart-test")}
		if dryRun {
			opts = append(opts, client.DryRunAll)
		}
		if err := cl.c.Patch(ctx, o, client.Apply, opts...); err != nil { //nolint:staticcheck // unstructured objects have no apply configuration
			refused = append(refused, fmt.Sprintf("%s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err))
		}
	}
	return refused
}

// tokenKubeconfig writes a kubeconfig that authenticates with token only (no
// client certificate): the identity a pod of that ServiceAccount would have.
func (cl *cluster) tokenKubeconfig(t testing.TB, token string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cl.cfg.Host, CertificateAuthorityData: cl.cfg.CAData}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["sa"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "sa"}
	kc.CurrentContext = "sa"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// firstContainer is the first container of a workload's pod template.
func firstContainer(t testing.TB, o *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		t.Fatalf("%s %s has no container", o.GetKind(), o.GetName())
	}
	return cs[0].(map[string]any)
}

func containerArgs(t testing.TB, o *unstructured.Unstructured) []string {
	t.Helper()
	args, _, _ := unstructured.NestedStringSlice(firstContainer(t, o), "args")
	return args
}

// deploymentArgs are the manager's args: the Deployment whose container is
// named manager.
func deploymentArgs(t testing.TB, objs []*unstructured.Unstructured) []string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			if name, _, _ := unstructured.NestedString(firstContainer(t, o), "name"); name == "manager" {
				return containerArgs(t, o)
			}
		}
	}
	t.Fatal("no manager Deployment rendered")
	return nil
}

// flagValue is the value of --name=value in args ("" when absent).
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}
