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
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// subcommand returns the named command of a fresh command tree.
func subcommand(t *testing.T, name string) *cobra.Command {
	t.Helper()
	root := newRootCommand(newOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}))
	for _, c := range root.Commands() {
		if c.Name() == name {
			return c
		}
	}
	t.Fatalf("no command %s", name)
	return nil
}

var exitLine = regexp.MustCompile(`^\s+([0-3])\s+(.*)$`)

// exitCodesOf reads a command's "Exit codes:" block: one line per code,
// indented, continuation lines indented further.
func exitCodesOf(t *testing.T, long string) map[int]string {
	t.Helper()
	_, block, ok := strings.Cut(long, "Exit codes:\n")
	if !ok {
		t.Fatalf("no \"Exit codes:\" block in:\n%s", long)
	}
	out := map[int]string{}
	last := -1
	for _, line := range strings.Split(block, "\n") {
		if m := exitLine.FindStringSubmatch(line); m != nil && !strings.HasPrefix(line, "     ") {
			last, _ = strconv.Atoi(m[1])
			out[last] = m[2]
		} else if strings.TrimSpace(line) != "" && last >= 0 {
			out[last] += " " + strings.TrimSpace(line)
		}
	}
	return out
}

// TestReportHelp_ExitCodesAreTheCodes: the exit codes report's --help
// lists are the ones its code returns, case by case: a script gating on
// `kubectl projection report` reads the help to tell drift from failure.
func TestReportHelp_ExitCodesAreTheCodes(t *testing.T) {
	help := exitCodesOf(t, subcommand(t, "report").Long)
	gr := schema.GroupResource{Group: recoveryv1.GroupVersion.Group, Resource: "projectionreconciliations"}
	_, badOutput := printerFor("wide")
	cases := []struct {
		name string
		code int
		says string // what the help's line for code must say
	}{
		{"clean, no finding", exitCode(reportVerdict(reconWith(recoveryv1.ProjectionReconciliationStatus{Report: &recoveryv1.ReportSummary{Clean: true}})), true), "no finding"},
		{"not clean", exitCode(reportVerdict(reconWith(recoveryv1.ProjectionReconciliationStatus{Report: &recoveryv1.ReportSummary{Clean: false, Findings: 2}})), true), "any finding"},
		{"clean but drifting", exitCode(reportVerdict(reconWith(recoveryv1.ProjectionReconciliationStatus{Report: &recoveryv1.ReportSummary{Clean: true, Findings: 1}})), true), `even when "clean"`},
		{"no report yet", exitCode(reportVerdict(reconWith(recoveryv1.ProjectionReconciliationStatus{})), true), "no report yet"},
		{"not found", exitCode(apierrors.NewNotFound(gr, "x"), true), "not found"},
		{"the read is forbidden", exitCode(readFailed(apierrors.NewForbidden(gr, "x", nil)), true), "forbidden"},
		{"bad -o", exitCode(badOutput, true), "-o"},
		{"no name", exitCode(exactlyOneName("ProjectionReconciliation")(nil, nil), false), "usage"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			line, ok := help[tc.code]
			if !ok {
				t.Fatalf("the code returns %d, which report --help does not list (%v)", tc.code, help)
			}
			if !strings.Contains(line, tc.says) {
				t.Fatalf("the code returns %d for %s; report --help says for %d: %q, want it to mention %q", tc.code, tc.name, tc.code, line, tc.says)
			}
		})
	}
}

// sampleName is the metadata.name of the one object of kind in the sample
// file (config/samples): the names the examples must use.
func sampleName(t *testing.T, file, kind string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", file))
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(raw, &o); err != nil || o.Kind != kind || o.Metadata.Name == "" {
		t.Fatalf("%s: %v, kind %q name %q, want one %s", file, err, o.Kind, o.Metadata.Name, kind)
	}
	return o.Metadata.Name
}

// TestExamples_NameTheRightKind: every example passes the name of the kind
// its command takes (those of config/samples): `report venue-a`, a
// recovery's name where a reconciliation's is expected, is NotFound.
func TestExamples_NameTheRightKind(t *testing.T) {
	recovery := sampleName(t, "recovery_v1alpha1_projectionrecovery.yaml", "ProjectionRecovery")
	reconciliation := sampleName(t, "recovery_v1alpha1_projectionreconciliation.yaml", "ProjectionReconciliation")
	for cmd, want := range map[string]string{
		"report": reconciliation, "plan": reconciliation, "approve": reconciliation, "rollback": reconciliation,
		"recheck": recovery,
	} {
		t.Run(cmd, func(t *testing.T) {
			ex := subcommand(t, cmd).Example
			uses := regexp.MustCompile(`kubectl projection `+cmd+` ([^\s"|)]+)`).FindAllStringSubmatch(ex, -1)
			if len(uses) == 0 {
				t.Fatalf("no example of %s:\n%s", cmd, ex)
			}
			for _, u := range uses {
				if u[1] != want {
					t.Errorf("example `kubectl projection %s %s`: %s takes a %s name, the sample's is %q", cmd, u[1], cmd, map[bool]string{true: "ProjectionReconciliation", false: "ProjectionRecovery"}[want == reconciliation], want)
				}
			}
		})
	}
}

// TestShorthand_WMeansWatch: -w means --watch, as in kubectl, and nothing
// else: status -w watches; recheck has no -w (its --wait is spelled out), so
// `recheck NAME -w` is a usage error instead of a wait the user did not ask
// for, or a watch that does not happen.
func TestShorthand_WMeansWatch(t *testing.T) {
	root := newRootCommand(newOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}))
	for _, c := range root.Commands() {
		if f := c.Flags().ShorthandLookup("w"); f != nil && f.Name != "watch" {
			t.Errorf("%s: -w is --%s, want -w to mean --watch only", c.Name(), f.Name)
		}
	}
	if f := subcommand(t, "status").Flags().ShorthandLookup("w"); f == nil || f.Name != "watch" {
		t.Fatalf("status -w is %v, want --watch", f)
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--kubeconfig", "/nonexistent/kubeconfig", "recheck", "venue-a", "-w"},
		genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	if code != ExitUsage || !strings.Contains(errOut.String(), "shorthand flag: 'w'") {
		t.Fatalf("recheck -w: exit %d, stderr %q; want a usage error", code, errOut.String())
	}
}
