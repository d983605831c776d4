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
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// externalManager is the real manager binary (cmd/manager, default flags
// but the listeners) on the test's API server: what a user runs, measured
// from its own /metrics, so its CPU and heap are its own and not the test
// process's (members, harness, API client).
type externalManager struct {
	proc    *testenv.Process
	metrics string
	pprof   string // http://addr/debug/pprof
}

// binary is cmd/<name> built from this tree once per test binary
// (testenv.Binary: make's build when make test runs, else the same flags).
func binary(t testing.TB, name string) string {
	p, err := testenv.Binary(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startExternalManager runs the manager with auto-recovery on, watching
// the resources labelled selector, as owner.
func startExternalManager(t testing.TB, owner, selector string) *externalManager {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: restCfg.Host, CertificateAuthorityData: restCfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: restCfg.CertData, ClientKeyData: restCfg.KeyData, Token: restCfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	pport, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	paddr := fmt.Sprintf("127.0.0.1:%d", pport)
	proc, err := testenv.StartProcess(filepath.Join(dir, "manager.log"), []string{"KUBECONFIG=" + kubeconfig}, binary(t, "manager"),
		"--enable-auto-recovery", "--watch-label-selector="+selector, "--owner-id="+owner, "--max-concurrent-reconciles=4",
		"--metrics-bind-address="+addr, "--pprof-bind-address="+paddr, "--health-probe-bind-address=0", "--completeness-bind-address=0", "--log-level=warn")
	if err != nil {
		t.Fatal(err)
	}
	m := &externalManager{proc: proc, metrics: "http://" + addr + "/metrics", pprof: "http://" + paddr + "/debug/pprof"}
	t.Cleanup(func() {
		proc.Stop(30 * time.Second)
		if t.Failed() {
			if log, err := os.ReadFile(filepath.Join(dir, "manager.log")); err == nil {
				t.Logf("manager %s log:\n%s", owner, log)
			}
		}
	})
	eventually(t, 60*time.Second, "the manager's metrics endpoint", func() (bool, error) {
		if !proc.Alive() {
			return false, fmt.Errorf("the manager exited: %v", proc.Err)
		}
		resp, err := http.Get(m.metrics)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return m
}

// scrape sums every sample of each metric family (histograms: their
// counts) on the manager's /metrics.
func (m *externalManager) scrape(t testing.TB) map[string]float64 {
	t.Helper()
	resp, err := http.Get(m.metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, mf := range families {
		for _, s := range mf.GetMetric() {
			switch {
			case s.Counter != nil:
				out[name] += s.Counter.GetValue()
			case s.Gauge != nil:
				out[name] += s.Gauge.GetValue()
			case s.Histogram != nil:
				out[name] += float64(s.Histogram.GetSampleCount())
			case s.Untyped != nil:
				out[name] += s.Untyped.GetValue()
			}
		}
	}
	return out
}

// scrapeCost is what one scrape of the manager's /metrics costs the
// manager (CPU, to the 10 ms of /proc's clock ticks; the median of five) and
// how many series it returns: a Prometheus scraping it every interval adds
// that to the manager's idle CPU.
func (m *externalManager) scrapeCost(t testing.TB) (time.Duration, int) {
	t.Helper()
	var costs []time.Duration
	series := 0
	for range 5 {
		c0, err := m.proc.CPU()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(m.metrics)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		c1, err := m.proc.CPU()
		if err != nil {
			t.Fatal(err)
		}
		costs = append(costs, c1-c0)
		series = 0
		for _, l := range bytes.Split(body, []byte("\n")) {
			if len(l) > 0 && l[0] != '#' {
				series++
			}
		}
	}
	slices.Sort(costs)
	return costs[len(costs)/2], series
}

// cpuProfile fetches a CPU profile of the manager over d into path.
func (m *externalManager) cpuProfile(t testing.TB, d time.Duration, path string) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("%s/profile?seconds=%d", m.pprof, int(d.Seconds())))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		t.Fatal(err)
	}
}
