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
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

type recheckOptions struct {
	*options
	wait    bool
	timeout time.Duration
}

// recheckPoll is the time between two reads while --wait waits: status
// changes once per reconcile, so a faster poll only loads the API server.
const recheckPoll = 500 * time.Millisecond

func newRecheckCommand(o *options) *cobra.Command {
	ro := &recheckOptions{options: o, timeout: 5 * time.Minute}
	cmd := &cobra.Command{
		Use:   "recheck NAME",
		Short: "Run a ProjectionRecovery's cycle now; --wait for its verdict",
		Long: `Ask for a cycle of a ProjectionRecovery now, instead of at its next interval
(after a repair, an incident, or a member that came back): the plugin sets
the recovery.projection.io/requested-at annotation to a fresh value, which
runs one reconcile at once. With --wait it then waits until
status.lastHandledRequestedAt echoes that value (the manager's reconcile
evaluated the request: its cycle ran, or the reason says why none ran, e.g.
Suspended) and prints the scope as that reconcile left it.

A scope still CATCHING_UP after the request goes on at once, cycle after
cycle; --wait returns after the first one.

Exit codes: 0 requested (with --wait: handled, and the scope is not BLOCKED),
1 error (not found, --wait timed out), 2 usage, 3 refused by the API server
(no permission to patch the resource) or, with --wait, the scope is BLOCKED.`,
		Example: `  kubectl projection recheck venue-a
  kubectl projection recheck venue-a --wait --timeout 2m`,
		Args:              exactlyOneName("ProjectionRecovery"),
		ValidArgsFunction: completeRecoveries(o),
		RunE:              func(cmd *cobra.Command, args []string) error { return ro.run(cmd.Context(), args[0]) },
	}
	// No shorthand: -w is --watch (status, and kubectl); a -w that waited
	// here and watched there would do the wrong one for someone.
	cmd.Flags().BoolVar(&ro.wait, "wait", false, "Wait until the manager handled the request, then print the scope's state")
	cmd.Flags().DurationVar(&ro.timeout, "timeout", ro.timeout, "How long --wait waits for the request to be handled")
	return cmd
}

func (ro *recheckOptions) run(ctx context.Context, name string) error {
	if ro.timeout <= 0 {
		return usageErr(fmt.Errorf("--timeout %s must be positive", ro.timeout))
	}
	c, err := ro.client()
	if err != nil {
		return err
	}
	ns, err := ro.namespace()
	if err != nil {
		return err
	}
	r := &recoveryv1.ProjectionRecovery{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, r); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("ProjectionRecovery %s/%s not found", ns, name)
		}
		return readFailed(fmt.Errorf("reading ProjectionRecovery %s/%s: %w", ns, name, err))
	}
	// The value only has to be new: the manager echoes it, it never parses it.
	value := ro.now().UTC().Format(time.RFC3339Nano)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{recoveryv1.AnnotationRequestedAt: value}}})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, r, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		return fmt.Errorf("requesting a cycle of %s/%s: %w", ns, name, err)
	}
	out := ro.streams.Out
	if r.Spec.Suspend {
		fmt.Fprintf(ro.streams.ErrOut, "warning: %s/%s is suspended (spec.suspend): no cycle runs until it is resumed\n", esc(ns), esc(name))
	}
	if !ro.wait {
		fmt.Fprintf(out, "Requested a cycle of %s/%s (scope %s) at %s. Follow with 'kubectl projection status --watch', or pass --wait.\n",
			esc(ns), esc(name), esc(r.Spec.Scope), value)
		return nil
	}
	handled, err := ro.waitHandled(ctx, c, client.ObjectKeyFromObject(r), value)
	if err != nil {
		return err
	}
	if err := writeRecoveryTable(out, []recoveryv1.ProjectionRecovery{*handled}, false, ro.now()); err != nil {
		return err
	}
	if m := strings.TrimSpace(handled.Status.Message); m != "" {
		fmt.Fprintf(out, "\n%s\n", esc(m))
	}
	if handled.Status.State == recoveryv1.StateBlocked {
		return errSilentRefusal
	}
	return nil
}

// waitHandled polls until status.lastHandledRequestedAt is value. A failed
// read is retried until the timeout: a wait must survive an API server
// restart. It returns the object as the reconcile that handled the request
// left it.
func (ro *recheckOptions) waitHandled(ctx context.Context, c client.Client, key client.ObjectKey, value string) (*recoveryv1.ProjectionRecovery, error) {
	ctx, cancel := context.WithTimeout(ctx, ro.timeout)
	defer cancel()
	tick := time.NewTicker(recheckPoll)
	defer tick.Stop()
	var last error
	for {
		r := &recoveryv1.ProjectionRecovery{}
		switch err := c.Get(ctx, key, r); {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("ProjectionRecovery %s was deleted while waiting", key)
		case err != nil:
			last = err
		case r.Status.LastHandledRequestedAt == value:
			return r, nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				msg := fmt.Sprintf("the request %s of %s was not handled within %s: is a manager running for it (its label selector, its namespaces)?", value, key, ro.timeout)
				if last != nil {
					msg += fmt.Sprintf(" Last read failed: %v", last)
				}
				return nil, errors.New(msg)
			}
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}
