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
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// scheme knows our API group and the built-in types (SelfSubjectReview).
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(recoveryv1.AddToScheme(s))
	return s
}()

// options is the state one invocation shares across its command: the
// streams, kubectl's standard connection flags, the clock (injected so the
// expiry and ETA decisions are testable) and whether a command started
// (exitCode tells a usage error from a failure by it).
type options struct {
	streams genericiooptions.IOStreams
	config  *genericclioptions.ConfigFlags
	now     func() time.Time
	started bool

	c client.Client
}

func newOptions(streams genericiooptions.IOStreams) *options {
	return &options{streams: streams, config: genericclioptions.NewConfigFlags(false), now: time.Now}
}

// client is a direct (non-cached) typed client for the flags' cluster.
func (o *options) client() (client.Client, error) {
	if o.c != nil {
		return o.c, nil
	}
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-projection"
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to the API server %s: %w", cfg.Host, err)
	}
	o.c = c
	return c, nil
}

// namespace is --namespace, else the kubeconfig context's, else "default".
func (o *options) namespace() (string, error) {
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("resolving the namespace: %w", err)
	}
	return ns, nil
}

const rootLong = `kubectl projection: projection recovery and reconciliation from the command line.

  status            every ProjectionRecovery: scope, state, progress, lag, reason (--watch: progress bars, rate, ETA)
  report NAME       a ProjectionReconciliation's report: clean or not, counts, top findings with their cause, the last outcome and what it left in place
  plan NAME         its repair plan: planId, fingerprint, expiry, actions, manual findings, rehearsal verdict
  approve NAME      approve the plan as the user the API server authenticates (type the planId to confirm)
  rollback NAME     ask to roll the last successful apply (or --run ID) back (type its correlation id to confirm)
  recheck NAME      run a ProjectionRecovery's cycle now (--wait: until the manager handled it, then its state)

Exit codes (stable, for scripts):
  0  done (report: no finding at all)
  1  error: no cluster, not found, network, the resource changed meanwhile,
     a read the API server forbids (could not ask)
  2  usage: unknown command or flag, wrong number of arguments, bad -o
  3  drift, refused or blocked: report with any finding (even when "clean",
     which only means no inconsistent finding) or absent; a BLOCKED scope
     (status, recheck --wait); plan absent, expired or failing
     its rehearsal; approve or rollback refused client-side or by the API
     server (shown as-is): a change it forbids (Forbidden) or finds invalid

-w is --watch (status), as in kubectl; recheck's --wait has no shorthand.`

func newRootCommand(o *options) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-projection",
		Short: "Projection recovery and reconciliation: status, recheck, report, plan, approve, rollback",
		Long:  rootLong,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl projection",
		},
		SilenceErrors: true,
		SilenceUsage:  true,
		// Everything cobra rejects before this hook (flags, argument count,
		// unknown command) is a usage error; see exitCode.
		PersistentPreRunE: func(*cobra.Command, []string) error {
			o.started = true
			return nil
		},
	}
	root.SetIn(o.streams.In)
	root.SetOut(o.streams.Out)
	root.SetErr(o.streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	o.config.AddFlags(root.PersistentFlags())
	root.AddCommand(newStatusCommand(o), newReportCommand(o), newPlanCommand(o), newApproveCommand(o), newRollbackCommand(o), newRecheckCommand(o))
	return root
}

// run executes one invocation and returns its exit code. It is main without
// the process: the tests call it with their own streams and arguments.
func run(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	o := newOptions(streams)
	return runWith(ctx, o, args)
}

func runWith(ctx context.Context, o *options, args []string) int {
	root := newRootCommand(o)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	code := exitCode(err, o.started)
	if err != nil {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(o.streams.ErrOut, "error:", escText(msg))
		}
		if code == ExitUsage {
			fmt.Fprintln(o.streams.ErrOut, "See 'kubectl projection --help' for usage.")
		}
	}
	return code
}

// exactlyOneName is cobra.ExactArgs(1) with a message naming the argument.
func exactlyOneName(kind string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("expected exactly one %s name, got %d arguments", kind, len(args))
		}
		return nil
	}
}

// outputFlag adds -o json|yaml; "" is the human format.
func outputFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVarP(dst, "output", "o", "", "Output format: json or yaml (default: human-readable)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
}

// printerFor returns the json/yaml printer, or nil for the human format; an
// unknown format is a usage error (exit 2).
func printerFor(format string) (printers.ResourcePrinter, error) {
	if format == "" {
		return nil, nil
	}
	f := strings.ToLower(format)
	if f != "json" && f != "yaml" {
		return nil, usageErr(fmt.Errorf("unsupported output format %q: allowed json, yaml", format))
	}
	p, err := genericclioptions.NewJSONYamlPrintFlags().ToPrinter(f)
	if err != nil {
		return nil, usageErr(err)
	}
	jp, err := genericclioptions.NewJSONYamlPrintFlags().ToPrinter("json")
	if err != nil {
		return nil, usageErr(err)
	}
	// The typed client leaves apiVersion/kind empty; the printers need them.
	return printers.NewTypeSetter(scheme).ToPrinter(&encodedPrinter{enc: p, json: jp, yaml: f == "yaml"}), nil
}

// completeReconciliations completes NAME with the namespace's
// ProjectionReconciliations (shell completion through cobra).
func completeReconciliations(o *options) cobra.CompletionFunc {
	return completeNames(o, "ProjectionReconciliationList")
}

// completeRecoveries completes NAME with the namespace's ProjectionRecoveries.
func completeRecoveries(o *options) cobra.CompletionFunc {
	return completeNames(o, "ProjectionRecoveryList")
}

// completeNames completes the single NAME argument with the names of the
// flags' namespace's objects of listKind (our API group) that start with
// what was typed. It lists metadata only: completion needs no spec.
func completeNames(o *options, listKind string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := o.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ns, err := o.namespace()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(recoveryv1.GroupVersion.WithKind(listKind))
		if err := c.List(cmd.Context(), list, client.InNamespace(ns)); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, m := range list.Items {
			if strings.HasPrefix(m.Name, toComplete) {
				out = append(out, m.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
