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
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/projection-recovery/projection-recovery/controllers"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

func TestParseFlags_DefaultsAndErrors(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.enableAutoRecovery {
		t.Fatal("auto-recovery must be off by default (NFR-APR01)")
	}
	if o.leaderElect {
		t.Fatal("leader election is not needed for safety and is off by default")
	}
	if o.reconcileEvery != 0 {
		t.Fatalf("scheduled reconciliation must be off by default, got --reconcile-every=%s", o.reconcileEvery)
	}
	for _, ok := range []string{"--reconcile-every=0", "--reconcile-every=1m", "--reconcile-every=168h"} {
		if _, err := parseFlags([]string{ok}); err != nil {
			t.Errorf("parseFlags(%s) = %v, want accepted", ok, err)
		}
	}
	for _, ok := range []string{"--write-slice-budget=50ms", "--write-slice-budget=-1s", "--write-slice-budget=10s"} {
		if _, err := parseFlags([]string{ok}); err != nil {
			t.Errorf("parseFlags(%s) = %v, want accepted", ok, err)
		}
	}
	if o.pprofAddr != "0" {
		t.Errorf("--pprof-bind-address defaults to %q, want \"0\" (off)", o.pprofAddr)
	}
	if !o.watchSecrets {
		t.Error("--watch-secrets must default to true (an idle cycle reads no Secret)")
	}
	if off, err := parseFlags([]string{"--watch-secrets=false"}); err != nil || off.watchSecrets {
		t.Errorf("--watch-secrets=false = %v (%v), want the watch off", off.watchSecrets, err)
	}
	if cacheOptions(o).DefaultTransform == nil {
		t.Error("the cache must strip managed fields (heap at 1,000 resources)")
	}
	if o.writeSliceBudget != store.DefaultSliceBudget {
		t.Errorf("--write-slice-budget defaults to %s, want %s", o.writeSliceBudget, store.DefaultSliceBudget)
	}
	if o.reconDetectCPU != controllers.DefaultReconciliationDetectCPU || !(o.reconDetectCPU > 0 && o.reconDetectCPU < 1) {
		t.Errorf("--reconciliation-detect-cpu defaults to %v, want %v: a scheduled dry run is paced by default", o.reconDetectCPU, controllers.DefaultReconciliationDetectCPU)
	}
	for _, ok := range []string{"--reconciliation-detect-cpu=0", "--reconciliation-detect-cpu=0.05", "--reconciliation-detect-cpu=1"} {
		if _, err := parseFlags([]string{ok}); err != nil {
			t.Errorf("parseFlags(%s) = %v, want accepted", ok, err)
		}
	}
	if _, err := parseFlags([]string{"--reconcile-every=169h"}); err == nil || !strings.Contains(err.Error(), "reconcile-every") {
		t.Errorf("--reconcile-every=169h = %v, want refused (the CRD's schedule.interval bound)", err)
	}
	cases := map[string][]string{
		"max-concurrent-reconciles": {"--max-concurrent-reconciles=0"},
		"sync-period":               {"--sync-period=1s"},
		"watch-label-selector":      {"--watch-label-selector=a=b=c"},
		"reconcile-every":           {"--reconcile-every=30s"},
		"watch-namespace":           {"--watch-namespace=team-a,Team_B"},
		"listed twice":              {"--watch-namespace=team-a,team-a"},
		"write-slice-budget":        {"--write-slice-budget=11s"},
		"reconciliation-detect-cpu": {"--reconciliation-detect-cpu=1.5"},
		"between 0 and 1":           {"--reconciliation-detect-cpu=-0.1"},
		"got NaN":                   {"--reconciliation-detect-cpu=NaN"},
	}
	for want, args := range cases {
		t.Run(want, func(t *testing.T) {
			if _, err := parseFlags(args); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("parseFlags(%v) = %v, want an error naming %s", args, err, want)
			}
		})
	}
	if _, err := newLogger(options{logLevel: "loud"}); err == nil {
		t.Error("an unknown log level must be refused")
	}
}

// TestWatchNamespace_RestrictsTheCache: --watch-namespace becomes the
// cache's DefaultNamespaces (informers list and watch only there); without it
// the cache is cluster-wide.
func TestWatchNamespace_RestrictsTheCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unset is cluster-wide", nil, nil},
		{"one namespace", []string{"--watch-namespace=team-a"}, []string{"team-a"}},
		{"a list with blanks", []string{"--watch-namespace= team-a, ,team-b"}, []string{"team-a", "team-b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			got := cacheOptions(o).DefaultNamespaces
			if len(got) != len(tc.want) {
				t.Fatalf("DefaultNamespaces = %v, want %v", got, tc.want)
			}
			for _, ns := range tc.want {
				if _, ok := got[ns]; !ok {
					t.Fatalf("DefaultNamespaces = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestMetricsSecure_AddsTheAuthFilter: --metrics-secure serves HTTPS behind
// the authentication/authorization filter; the default is plain HTTP.
func TestMetricsSecure_AddsTheAuthFilter(t *testing.T) {
	plain := metricsOptions(options{metricsAddr: ":8080"})
	if plain.SecureServing || plain.FilterProvider != nil {
		t.Fatalf("default metrics options %+v, want plain HTTP without a filter", plain)
	}
	secure := metricsOptions(options{metricsAddr: ":8443", metricsSecure: true})
	if !secure.SecureServing || secure.FilterProvider == nil || secure.BindAddress != ":8443" {
		t.Fatalf("--metrics-secure options %+v, want HTTPS with the authn/authz filter on :8443", secure)
	}
}

func TestDefaultOwner_Unique(t *testing.T) {
	if a, b := defaultOwner(), defaultOwner(); a == b {
		t.Fatalf("two managers on one host got the same lease owner %q", a)
	}
}

// TestCLI_HelpExitsZero: --help (and -h) is a request, not an error: usage
// on stdout, nothing on stderr, exit status 0.
func TestCLI_HelpExitsZero(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "-help"} {
		t.Run(arg, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := mainCode([]string{arg}, &out, &errb); code != 0 {
				t.Fatalf("exit status %d, want 0 (stderr %q)", code, errb.String())
			}
			for _, want := range []string{"Usage: manager", "manager migrate", "manager drain", "-enable-auto-recovery", "-version", "(default \":8082\")"} {
				if !strings.Contains(out.String(), want) {
					t.Fatalf("usage lacks %q:\n%s", want, out.String())
				}
			}
			if errb.Len() != 0 {
				t.Fatalf("stderr = %q, want nothing", errb.String())
			}
			// A user reads the help: requirement ids belong to the code.
			if id := regexp.MustCompile(`N?FR-APR\d+`).FindString(out.String()); id != "" {
				t.Fatalf("usage cites %s:\n%s", id, out.String())
			}
		})
	}
}

// TestCLI_VersionPrintsBuild: --version prints the stamped version and the
// Go toolchain on stdout and exits 0.
func TestCLI_VersionPrintsBuild(t *testing.T) {
	var out, errb bytes.Buffer
	if code := mainCode([]string{"--version"}, &out, &errb); code != 0 {
		t.Fatalf("exit status %d, want 0 (stderr %q)", code, errb.String())
	}
	got := out.String()
	if !strings.HasPrefix(got, "manager "+version+" (") || !strings.Contains(got, goruntime.Version()) || !strings.HasSuffix(got, ")\n") {
		t.Fatalf("--version printed %q, want \"manager %s (%s...)\"", got, version, goruntime.Version())
	}
}

// TestCLI_UsageErrorExitsTwo: an unknown flag or an invalid value is a usage
// error: exit status 2 and a hint on stderr, nothing on stdout.
func TestCLI_UsageErrorExitsTwo(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"unknown flag", []string{"--bogus"}},
		{"invalid value", []string{"--sync-period=1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := mainCode(tc.args, &out, &errb); code != 2 {
				t.Fatalf("%v: exit status %d, want 2", tc.args, code)
			}
			if !strings.Contains(errb.String(), "Run 'manager --help' for usage.") || out.Len() != 0 {
				t.Fatalf("%v: stdout %q stderr %q", tc.args, out.String(), errb.String())
			}
		})
	}
	if _, err := parseFlags([]string{"--version"}); !errors.Is(err, errVersion) {
		t.Fatalf("parseFlags(--version) = %v, want errVersion", err)
	}
}

// TestCLI_BinaryHelpAndVersion builds the real binary the way a release does
// (-ldflags -X main.version=...) and runs it: --help and --version exit 0.
func TestCLI_BinaryHelpAndVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "manager")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v9.9.9-test", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name      string
		arg, want string
		code      int
	}{
		{"help prints usage and exits 0", "--help", "-enable-auto-recovery", 0},
		{"version prints the stamped version and exits 0", "--version", "manager v9.9.9-test (go", 0},
		{"unknown flag exits 2", "--no-such-flag", "", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := exec.Command(bin, tc.arg)
			cmd.Stdout = &out
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("manager %s: exit %d (want %d), stdout %q (want it to contain %q)", tc.arg, code, tc.code, out.String(), tc.want)
			}
		})
	}
}

// TestCLI_HelpTellsTheSchemaStory: --help says what docs/database-role.md
// says: the migrate step applies recovery's schema as its owner (the chart's
// migrate Job), the runtime roles only get grants, and a database without a
// migration is SCHEMA_MISSING; it never promises that turning auto-recovery
// on creates the tables (the recommended runtime role cannot).
func TestCLI_HelpTellsTheSchemaStory(t *testing.T) {
	var out, errb bytes.Buffer
	if code := mainCode([]string{"--help"}, &out, &errb); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	for _, want := range []string{"as the schema owner", "only get grants", "migrate.enabled", "SCHEMA_MISSING", "docs/database-role.md"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "tables where missing") {
		t.Errorf("usage promises that auto-recovery creates recovery's tables:\n%s", out.String())
	}
	if !strings.Contains(migrateUsage, "the runtime roles only get grants") {
		t.Errorf("manager migrate --help does not say it is the step that applies the schema:\n%s", migrateUsage)
	}
}
