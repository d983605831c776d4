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

// Command kstatuscheck is `make e2e`'s reading of a release the way GitOps
// tools read it: every object of a manifest (`helm get manifest`) fetched
// from the API server and computed by kstatus (sigs.k8s.io/cli-utils), the
// library Flux and Argo CD-style health checks build on. It waits until all
// are Current and exits 1 naming those that are not by the deadline.
//
//	helm get manifest R -n NS | kstatuscheck -n NS --timeout 2m
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

func main() {
	ns := flag.String("n", "default", "namespace of the manifest's namespaced objects that name none")
	timeout := flag.Duration("timeout", 2*time.Minute, "how long to wait for every object to be Current")
	flag.Parse()
	objs, err := decode(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kstatuscheck: reading the manifest:", err)
		os.Exit(2)
	}
	if len(objs) == 0 {
		fmt.Fprintln(os.Stderr, "kstatuscheck: the manifest holds no object")
		os.Exit(2)
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kstatuscheck: kubeconfig:", err)
		os.Exit(2)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kstatuscheck:", err)
		os.Exit(2)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kstatuscheck:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var rows []string
	for {
		var pending int
		rows, pending = readAll(ctx, mapper, dyn, objs, *ns)
		if pending == 0 || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	sort.Strings(rows)
	failed := false
	for _, r := range rows {
		fmt.Println(r)
		if r[:len("Current ")] != "Current " {
			failed = true
		}
	}
	if failed {
		fmt.Fprintln(os.Stderr, "kstatuscheck: not every object of the release is Current")
		os.Exit(1)
	}
	fmt.Printf("==> all %d objects of the release are Current (kstatus)\n", len(rows))
}

// readAll computes every object's status; pending counts those not Current.
func readAll(ctx context.Context, mapper meta.RESTMapper, dyn dynamic.Interface, objs []*unstructured.Unstructured, ns string) ([]string, int) {
	rows := make([]string, 0, len(objs))
	pending := 0
	for _, o := range objs {
		st, msg := compute(ctx, mapper, dyn, o, ns)
		if st != kstatus.CurrentStatus {
			pending++
		}
		rows = append(rows, fmt.Sprintf("%-11s %s/%s: %s", st, o.GetKind(), o.GetName(), msg))
	}
	return rows, pending
}

func compute(ctx context.Context, mapper meta.RESTMapper, dyn dynamic.Interface, o *unstructured.Unstructured, ns string) (kstatus.Status, string) {
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return kstatus.UnknownStatus, "no API for it: " + err.Error()
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		objNS := o.GetNamespace()
		if objNS == "" {
			objNS = ns
		}
		ri = dyn.Resource(m.Resource).Namespace(objNS)
	}
	live, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
	if err != nil {
		return kstatus.NotFoundStatus, err.Error()
	}
	res, err := kstatus.Compute(live)
	if err != nil {
		return kstatus.UnknownStatus, err.Error()
	}
	return res.Status, res.Message
}

// decode reads every object of a multi-document YAML stream.
func decode(r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}
