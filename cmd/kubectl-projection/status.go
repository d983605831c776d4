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
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/progress"
	"github.com/projection-recovery/projection-recovery/internal/troubleshoot"
)

type statusOptions struct {
	*options
	allNamespaces bool
	watch         bool
	interval      time.Duration
	output        string
}

func newStatusCommand(o *options) *cobra.Command {
	so := &statusOptions{options: o, interval: 2 * time.Second}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every ProjectionRecovery: scope, state, verified/boundary, lag, reason, last verification",
		Long: `Show every ProjectionRecovery of the namespace (or of all namespaces with -A):
scope, state, verified and boundary sequence, lag, reason and the age of the
last successful verification.

With --watch the table is redrawn every --interval, with a progress bar per
CATCHING_UP scope, its rate (verified events per second, as status.progress)
and an ETA, computed by the manager's estimator from successive
observations of status.eventCount, verifiedThroughSeq and lag over the last
30 seconds. The ETA divides what is left (the lag in events) by the closing
speed (the rate minus the boundary's own growth): "never at this rate"
means the scope is not gaining.

Exit codes: 0 ok, 1 error, 2 usage, 3 at least one scope is BLOCKED (not with --watch).`,
		Example: `  kubectl projection status -A
  kubectl projection status --watch
  kubectl projection status -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return so.run(cmd.Context()) },
	}
	cmd.Flags().BoolVarP(&so.allNamespaces, "all-namespaces", "A", false, "List the ProjectionRecoveries of every namespace")
	cmd.Flags().BoolVarP(&so.watch, "watch", "w", false, "Redraw until interrupted, with progress bars, rate and ETA for CATCHING_UP scopes")
	cmd.Flags().DurationVar(&so.interval, "interval", so.interval, "Time between two observations with --watch (at least 100ms)")
	outputFlag(cmd, &so.output)
	return cmd
}

func (so *statusOptions) list(ctx context.Context) ([]recoveryv1.ProjectionRecovery, error) {
	c, err := so.client()
	if err != nil {
		return nil, err
	}
	var opts []client.ListOption
	if !so.allNamespaces {
		ns, err := so.namespace()
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.InNamespace(ns))
	}
	var list recoveryv1.ProjectionRecoveryList
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, readFailed(fmt.Errorf("listing ProjectionRecoveries: %w", err))
	}
	items := list.Items
	sort.Slice(items, func(i, j int) bool {
		if items[i].Namespace != items[j].Namespace {
			return items[i].Namespace < items[j].Namespace
		}
		return items[i].Name < items[j].Name
	})
	return items, nil
}

func (so *statusOptions) run(ctx context.Context) error {
	p, err := printerFor(so.output)
	if err != nil {
		return err
	}
	if so.watch && p != nil {
		return usageErr(fmt.Errorf("--watch draws progress bars: it cannot be combined with -o %s", so.output))
	}
	if so.interval < 100*time.Millisecond {
		return usageErr(fmt.Errorf("--interval %s is below 100ms", so.interval))
	}
	if so.watch {
		return so.watchLoop(ctx)
	}
	items, err := so.list(ctx)
	if err != nil {
		return err
	}
	if p != nil {
		list := &recoveryv1.ProjectionRecoveryList{Items: items}
		for i := range list.Items {
			list.Items[i].SetGroupVersionKind(recoveryv1.GroupVersion.WithKind("ProjectionRecovery"))
		}
		if err := p.PrintObj(list, so.streams.Out); err != nil {
			return err
		}
	} else if len(items) == 0 {
		fmt.Fprintln(so.streams.ErrOut, "No ProjectionRecovery found.")
	} else if err := writeRecoveryTable(so.streams.Out, items, so.allNamespaces, so.now()); err != nil {
		return err
	}
	if anyBlocked(items) {
		return errSilentRefusal
	}
	return nil
}

// anyBlocked is the status exit decision: a BLOCKED scope writes nothing
// until someone acts, so a script watching the fleet must see it (exit 3).
func anyBlocked(items []recoveryv1.ProjectionRecovery) bool {
	for i := range items {
		if items[i].Status.State == recoveryv1.StateBlocked {
			return true
		}
	}
	return false
}

// writeRecoveryTable prints one line per scope, every string field through
// esc (a tab or line feed in a reason would otherwise shift columns or
// forge a row).
func writeRecoveryTable(out io.Writer, items []recoveryv1.ProjectionRecovery, allNamespaces bool, now time.Time) error {
	w := printers.GetNewTabWriter(out)
	if allNamespaces {
		fmt.Fprint(w, "NAMESPACE\t")
	}
	fmt.Fprintln(w, "NAME\tSCOPE\tSTATE\tVERIFIED\tBOUNDARY\tLAG\tREASON\tLAST VERIFIED")
	for i := range items {
		r := &items[i]
		if allNamespaces {
			fmt.Fprintf(w, "%s\t", esc(r.Namespace))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n",
			esc(r.Name), esc(r.Spec.Scope), esc(orDash(string(r.Status.State))), r.Status.VerifiedThroughSeq,
			r.Status.ObservedBoundarySeq, r.Status.Lag, esc(orDash(r.Status.Reason)),
			ago(r.Status.LastSuccessfulVerification, now))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	writePointers(out, items, allNamespaces)
	return nil
}

// writePointers prints, under the table, one line per resource that needs
// someone (attention), linking the troubleshooting entry of its code: the
// table says what is wrong, the entry what to check and do. The link is
// the entry's anchor computed from the code (letters, digits, '-' and '_'
// only), so a hostile reason cannot forge it; the code itself goes through
// esc like every other field.
func writePointers(out io.Writer, items []recoveryv1.ProjectionRecovery, allNamespaces bool) {
	first := true
	for i := range items {
		r := &items[i]
		code, ok := attention(&r.Status)
		if !ok {
			continue
		}
		if first {
			fmt.Fprintln(out)
			first = false
		}
		name := r.Name
		if allNamespaces {
			name = key(r)
		}
		url := troubleshoot.DocURL
		if code != "" {
			url = troubleshoot.CodeURL(code)
		}
		fmt.Fprintf(out, "%s: %s, see %s\n", esc(name), esc(orDash(code)), url)
	}
}

// attention reports whether a resource needs someone, and its code: it
// keeps failing or is refused (RETRYING, BLOCKED), waits on an operator
// (Stalled=True: a missing Secret or schema, auto-recovery off while
// behind, a duplicate scope), or is not Ready without making progress. A
// scope that is CURRENT, catching up or suspended needs nothing. The code
// is status.reason (a refusal code, or the reason of a state-less
// situation), else the Stalled or Ready condition's reason.
func attention(st *recoveryv1.ProjectionRecoveryStatus) (string, bool) {
	ready := meta.FindStatusCondition(st.Conditions, recoveryv1.ConditionReady)
	stalled := meta.FindStatusCondition(st.Conditions, recoveryv1.ConditionStalled)
	reconciling := meta.FindStatusCondition(st.Conditions, recoveryv1.ConditionReconciling)
	isTrue := func(c *metav1.Condition) bool { return c != nil && c.Status == metav1.ConditionTrue }
	switch {
	case st.State == recoveryv1.StateRetrying, st.State == recoveryv1.StateBlocked:
	case isTrue(stalled):
	case ready != nil && ready.Status == metav1.ConditionFalse && !isTrue(reconciling):
	default:
		return "", false
	}
	if st.Reason != "" {
		return st.Reason, true
	}
	for _, c := range []*metav1.Condition{stalled, ready} {
		if c != nil && c.Reason != "" {
			return c.Reason, true
		}
	}
	return "", true
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ago renders a past instant as kubectl does ("5m", "2d") plus " ago".
func ago(t *metav1.Time, now time.Time) string {
	if t == nil {
		return "never"
	}
	return duration.HumanDuration(now.Sub(t.Time)) + " ago"
}

// watchFrame renders one redraw: the table, then a progress line per
// CATCHING_UP scope with the estimate from its samples.
func watchFrame(out io.Writer, items []recoveryv1.ProjectionRecovery, allNamespaces bool, now time.Time, est map[string]progress.Estimate) error {
	if err := writeRecoveryTable(out, items, allNamespaces, now); err != nil {
		return err
	}
	first := true
	for i := range items {
		r := &items[i]
		if r.Status.State != recoveryv1.StateCatchingUp {
			continue
		}
		if first {
			fmt.Fprintln(out)
			first = false
		}
		e := est[key(r)]
		fmt.Fprintf(out, "%s %s %d/%d  %s  %s\n", esc(key(r)), progressBar(r.Status.VerifiedThroughSeq, r.Status.ObservedBoundarySeq, 30),
			r.Status.VerifiedThroughSeq, r.Status.ObservedBoundarySeq, formatRate(e), formatETA(e))
	}
	return nil
}

func key(r *recoveryv1.ProjectionRecovery) string { return r.Namespace + "/" + r.Name }

// observeFrame records one listing, taken at now, in tr and renders its
// frame: the estimates come from the status fields of successive listings.
func observeFrame(out io.Writer, tr *progress.Tracker[string], items []recoveryv1.ProjectionRecovery, allNamespaces bool, now time.Time) error {
	seen := map[string]bool{}
	est := map[string]progress.Estimate{}
	for i := range items {
		r := &items[i]
		k := key(r)
		// Only a CATCHING_UP scope keeps samples: one that leaves the
		// state and comes back starts a fresh series.
		if r.Status.State == recoveryv1.StateCatchingUp {
			seen[k] = true
			est[k] = tr.Observe(k, progress.Sample{At: now, Events: r.Status.EventCount, Verified: r.Status.VerifiedThroughSeq, Lag: r.Status.Lag})
		}
	}
	tr.Retain(func(k string) bool { return seen[k] })
	return watchFrame(out, items, allNamespaces, now, est)
}

// watchLoop polls and redraws until the context ends (Ctrl-C). Polling, not
// a watch stream: the estimate needs samples at a known cadence anyway, and
// status is written once per reconcile cycle. A failed listing is shown and
// retried: a watch must survive an API server restart.
func (so *statusOptions) watchLoop(ctx context.Context) error {
	tr := &progress.Tracker[string]{}
	clear := isTerminal(so.streams.Out)
	tick := time.NewTicker(so.interval)
	defer tick.Stop()
	for {
		items, err := so.list(ctx)
		now := so.now()
		if clear {
			fmt.Fprint(so.streams.Out, "\x1b[H\x1b[2J")
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintf(so.streams.Out, "%s  error: %s (retrying every %s)\n", now.Format(time.TimeOnly), esc(err.Error()), so.interval)
		} else {
			fmt.Fprintf(so.streams.Out, "%s  every %s, Ctrl-C to stop\n", now.Format(time.TimeOnly), so.interval)
			if err := observeFrame(so.streams.Out, tr, items, so.allNamespaces, now); err != nil {
				return err
			}
			if !clear {
				fmt.Fprintln(so.streams.Out)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func isTerminalReader(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
