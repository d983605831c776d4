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
// Package soak runs seeded fault schedules against real processes
// (docs/soak.md): two or more manager processes built with -race, one
// reference member per schedule, a PostgreSQL cluster and a NATS server of
// the soak's own, and a real control plane, with managers killed and frozen,
// PostgreSQL restarted and its backends terminated, NATS restarted, the API
// server made unreachable, members restarted or slowed, cut and reset through
// proxies, and the managers' clocks skewed. After each batch every scope must
// be CURRENT at its member's boundary with SQL equal to an independent replay
// (check.go).
//
// make test runs 20 schedules with fixed seeds; make soak runs 1,000
// (hack/soak.sh). Every failure names its batch seed and the command that
// replays it.
package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// Settings of a run, from the environment (hack/soak.sh sets them).
type settings struct {
	schedules int           // PROJECTION_SOAK_SCHEDULES, default 20
	parallel  int           // PROJECTION_SOAK_PARALLEL: schedules per batch, default 10
	seed      uint64        // PROJECTION_SOAK_SEED: first batch seed, default 1
	window    time.Duration // PROJECTION_SOAK_WINDOW: faults start within it, default 8s
}

func settingsFromEnv(t *testing.T) settings {
	s := settings{schedules: 20, parallel: 10, seed: 1, window: 8 * time.Second}
	num := func(name string, dst *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive integer", name, v)
			}
			*dst = n
		}
	}
	num("PROJECTION_SOAK_SCHEDULES", &s.schedules)
	num("PROJECTION_SOAK_PARALLEL", &s.parallel)
	if v := os.Getenv("PROJECTION_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("PROJECTION_SOAK_SEED=%q: %v", v, err)
		}
		s.seed = n
	}
	if v := os.Getenv("PROJECTION_SOAK_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			t.Fatalf("PROJECTION_SOAK_WINDOW=%q: want a duration of at least 1s", v)
		}
		s.window = d
	}
	return s
}

// lease is the resources' leaseDuration: the API's minimum, so a frozen
// manager outlives its lease within the batch.
const lease = 5 * time.Second

// managers per batch: the issue asks for at least two.
const managers = 2

func TestSoak_FaultSchedules(t *testing.T) {
	cfg := settingsFromEnv(t)
	ctrllog.SetLogger(logr.Discard()) // envtest's own chatter
	if _, err := testenv.AssetsDir(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "bin", "soak"), 0o755); err != nil {
		t.Fatal(err)
	}
	work, err := os.MkdirTemp(filepath.Join(root, "bin", "soak"), "run-")
	if err != nil {
		t.Fatal(err)
	}
	skews := rand.New(rand.NewPCG(cfg.seed, 0x5c3))
	first := Plan{rng: skews}
	start := time.Now()
	e, err := StartEnv(ctx, work, managers, first.Skew)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	t.Logf("soak: %d schedules, %d per batch, first seed %d, fault window %s, %d managers (-race), work dir %s (env up in %s)",
		cfg.schedules, cfg.parallel, cfg.seed, cfg.window, managers, work, time.Since(start).Round(time.Second))

	faults := map[string]int{}
	var checked Checked
	var failures []string
	batches := 0
	for done := 0; done < cfg.schedules; batches++ {
		k := min(cfg.parallel, cfg.schedules-done)
		seed := cfg.seed + uint64(batches)
		plan := NewPlan(seed, Options{Schedules: k, Managers: managers, Window: cfg.window, Lease: lease})
		replay := fmt.Sprintf("make soak SOAK_STAGES=faults SOAK_SEED=%d SOAK_SCHEDULES=%d SOAK_PARALLEL=%d SOAK_WINDOW=%s", seed, k, k, cfg.window)
		bstart := time.Now()
		b := e.RunBatch(ctx, plan, t.Logf)
		for kind, n := range b.faults {
			faults[kind] += n
		}
		checked.Keys += b.checked.Keys
		checked.Trades += b.checked.Trades
		checked.OrderVersions += b.checked.OrderVersions
		checked.Notifications += b.checked.Notifications
		checked.OutboxKeys += b.checked.OutboxKeys
		for _, f := range b.failures {
			t.Errorf("%s\n    replay: %s", f, replay)
			failures = append(failures, f)
		}
		t.Logf("batch seed=%d: %d schedules, %d steps %v, %d failures, %s %v", seed, k, len(plan.Steps), plan.Steps,
			len(b.failures), time.Since(bstart).Round(100*time.Millisecond), b.Phases)
		done += k
	}
	var kinds []string
	for k := range faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var lines []string
	for _, k := range kinds {
		lines = append(lines, fmt.Sprintf("  %-40s %d", k, faults[k]))
	}
	t.Logf("soak summary: %d schedules in %d batches (seeds %d..%d), wall time %s, %d failures\nfaults injected:\n%s\nchecked: %d position keys against an independent replay, %d trade rows and %d order versions against the source, %d keys' last notification, %d notifications' per-key order",
		cfg.schedules, batches, cfg.seed, cfg.seed+uint64(batches)-1, time.Since(start).Round(time.Second), len(failures),
		strings.Join(lines, "\n"), checked.Keys, checked.Trades, checked.OrderVersions, checked.OutboxKeys, checked.Notifications)
	if len(failures) == 0 {
		_ = os.RemoveAll(work)
	} else {
		t.Logf("logs kept in %s", work)
	}
}
