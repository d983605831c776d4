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

Deletes the ProjectionRecoveries of NAMESPACE that match LABELS, and the
ProjectionReconciliations that match LABELS or reconcile one of those
recoveries, then waits until they are gone: until the running manager
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
	// recovery's finalizer waits for it. That includes the ones a person
	// created for a selected recovery without the release's labels: left
	// behind, they would outlive their recovery and could hold its lease.
	recons, err := bound(ctx, c, o.namespace, match)
	if err != nil {
		return fmt.Errorf("drain: listing in %s: %w", o.namespace, err)
	}
	for i := range recons {
		if err := c.Delete(ctx, &recons[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("drain: deleting projectionreconciliation/%s in %s: %w", recons[i].Name, o.namespace, err)
		}
	}
	opts := []client.DeleteAllOfOption{client.InNamespace(o.namespace), client.MatchingLabelsSelector{Selector: selector}}
	if err := c.DeleteAllOf(ctx, &recoveryv1.ProjectionRecovery{}, opts...); err != nil {
		return fmt.Errorf("drain: deleting ProjectionRecoveries in %s: %w", o.namespace, err)
	}
	for {
		left, err := remaining(ctx, c, o.namespace, recons, match)
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

// bound lists the reconciliations drain deletes: those matching the
// selector, and those whose recoveryRef names a matching recovery.
func bound(ctx context.Context, c client.Client, ns string, match []client.ListOption) ([]recoveryv1.ProjectionReconciliation, error) {
	var recs recoveryv1.ProjectionRecoveryList
	if err := c.List(ctx, &recs, match...); err != nil {
		return nil, err
	}
	selected := make(map[string]bool, len(recs.Items))
	for _, r := range recs.Items {
		selected[r.Name] = true
	}
	var labelled, all recoveryv1.ProjectionReconciliationList
	if err := c.List(ctx, &labelled, match...); err != nil {
		return nil, err
	}
	if err := c.List(ctx, &all, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := labelled.Items
	seen := make(map[string]bool, len(out))
	for _, r := range out {
		seen[r.Name] = true
	}
	for _, r := range all.Items {
		if !seen[r.Name] && selected[r.Spec.RecoveryRef.Name] {
			out = append(out, r)
		}
	}
	return out, nil
}

// remaining names the resources drain deleted that still exist: the
// reconciliations it deleted (by name: once their recovery is gone, its
// name no longer selects them) and the matching recoveries.
func remaining(ctx context.Context, c client.Client, ns string, recons []recoveryv1.ProjectionReconciliation, match []client.ListOption) ([]string, error) {
	var names []string
	for _, r := range recons {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.Name}, &recoveryv1.ProjectionReconciliation{})
		if err == nil {
			names = append(names, "projectionreconciliation/"+r.Name)
		} else if client.IgnoreNotFound(err) != nil {
			return nil, err
		}
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
