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
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

const drainUsage = `Usage: manager drain --namespace NAMESPACE [--selector LABELS] [--timeout DURATION]

Deletes the ProjectionReconciliations and ProjectionRecoveries of NAMESPACE
that match LABELS, then waits until they are gone: until the running manager
has released each scope's PostgreSQL lease and removed its finalizer. The
chart's auto-recovery-local profile runs it as a pre-delete hook, so that
helm uninstall deletes the profile's own resources while the manager and
its PostgreSQL still run. It fails when they are not gone within the
timeout (is the manager running?).

Flags:
`

// drainOptions are the flags of `manager drain`.
type drainOptions struct {
	namespace string
	selector  string
	timeout   time.Duration
}

// newDrainFlagSet binds the flags of `manager drain` to o; its usage prints
// drainUsage and the flags to the set's output.
func newDrainFlagSet(o *drainOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("manager drain", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), drainUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.namespace, "namespace", "", "namespace whose resources are deleted (required)")
	fs.StringVar(&o.selector, "selector", "", "label selector of the resources to delete (empty: every one in the namespace)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long to wait for the finalizers")
	return fs
}

// drainMain is main's entry for `manager drain`: in-cluster (or KUBECONFIG)
// credentials, cancelled on SIGINT or SIGTERM.
func drainMain(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runDrain(ctx, ctrl.GetConfig, args, os.Stdout)
}

// runDrain implements `manager drain`. Without it a release that owns a
// ProjectionRecovery (the local profile's sample) cannot be uninstalled:
// helm deletes the resource and the manager together, and the finalizer
// that only the manager removes is left behind with nobody to remove it.
func runDrain(ctx context.Context, config func() (*rest.Config, error), args []string, out io.Writer) error {
	var o drainOptions
	fs := newDrainFlagSet(&o)
	fs.SetOutput(out)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.namespace == "" || fs.NArg() > 0 {
		return &usageError{fmt.Errorf("drain: --namespace is required and takes no arguments")}
	}
	selector, err := labels.Parse(o.selector)
	if err != nil {
		return &usageError{fmt.Errorf("drain: --selector: %w", err)}
	}
	cfg, err := config()
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(recoveryv1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	match := []client.ListOption{client.InNamespace(o.namespace), client.MatchingLabelsSelector{Selector: selector}}
	// Reconciliations first: a running one holds its scope's lease, and the
	// recovery's finalizer waits for it.
	for _, obj := range []client.Object{&recoveryv1.ProjectionReconciliation{}, &recoveryv1.ProjectionRecovery{}} {
		opts := []client.DeleteAllOfOption{client.InNamespace(o.namespace), client.MatchingLabelsSelector{Selector: selector}}
		if err := c.DeleteAllOf(ctx, obj, opts...); err != nil {
			return fmt.Errorf("drain: deleting %T in %s: %w", obj, o.namespace, err)
		}
	}
	for {
		left, err := remaining(ctx, c, match)
		if err == nil && len(left) == 0 {
			fmt.Fprintf(out, "drain: no ProjectionReconciliation or ProjectionRecovery left in %s\n", o.namespace)
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("drain: listing what is left in %s: %w", o.namespace, err)
			}
			return fmt.Errorf("drain: still present after %s in %s: %s (their finalizer %s is removed by a running manager)",
				o.timeout, o.namespace, strings.Join(left, ", "), recoveryv1.FinalizerName)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// remaining names the matching resources that still exist.
func remaining(ctx context.Context, c client.Client, match []client.ListOption) ([]string, error) {
	var names []string
	var recons recoveryv1.ProjectionReconciliationList
	if err := c.List(ctx, &recons, match...); err != nil {
		return nil, err
	}
	for _, r := range recons.Items {
		names = append(names, "projectionreconciliation/"+r.Name)
	}
	var recs recoveryv1.ProjectionRecoveryList
	if err := c.List(ctx, &recs, match...); err != nil {
		return nil, err
	}
	for _, r := range recs.Items {
		names = append(names, "projectionrecovery/"+r.Name)
	}
	return names, nil
}
