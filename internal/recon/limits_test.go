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

package recon

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// driftEveryTrade rewrites the price of every SQL trade: a finding per trade
// and per key, far more than a small cap.
func driftEveryTrade(s *Snapshot) {
	for i := range s.SQL.Trades {
		s.SQL.Trades[i].Price = s.SQL.Trades[i].Price.Add(d("1"))
	}
}

// staleOutbox adds n unsent rows older than staleAfter: stale findings
// only, so the full report is Clean.
func staleOutbox(s *Snapshot, n int) {
	for i := 0; i < n; i++ {
		s.SQL.Outbox = append(s.SQL.Outbox, OutboxRow{ID: int64(1000 + i), MsgID: fmt.Sprintf("m-%d", i), Account: fxAccount(i % 8),
			Instrument: "BTC-USD", Quantity: d("1"), AvgCost: d("1"), CursorSeq: int64(i + 1), CreatedAt: fxNow.Add(-time.Hour)})
	}
}

// A report lists at most MaxFindings, the first ones in report order; it
// counts the rest (Unlisted, and in ByKind/ByInvariant), is never Clean,
// and its plan acts on nothing.
func TestDetect_FindingCapListsTheFirstAndNeverLooksClean(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Snapshot)
		cap    int
	}{
		{"drift on every trade", driftEveryTrade, 7},
		{"stale rows only: the full report is clean", func(s *Snapshot) { staleOutbox(s, 12) }, 3},
		{"cap of one", driftEveryTrade, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fixture(40)
			c.mutate(s)
			full := mustDetect(t, s)
			if len(full.Findings) <= c.cap || full.Unlisted != 0 {
				t.Fatalf("the full report has %d findings (unlisted %d): the case does not exceed the cap %d", len(full.Findings), full.Unlisted, c.cap)
			}
			s.MaxFindings = c.cap
			r := mustDetect(t, s)
			if len(r.Findings) != c.cap || r.Unlisted != len(full.Findings)-c.cap {
				t.Fatalf("listed %d, unlisted %d; want %d and %d", len(r.Findings), r.Unlisted, c.cap, len(full.Findings)-c.cap)
			}
			if !reflect.DeepEqual(r.Findings, full.Findings[:c.cap]) {
				t.Fatalf("listed findings are not the first %d of the full report:\n%s\nwant:\n%s", c.cap, joinLines(summary(r)), joinLines(summary(full)[:c.cap]))
			}
			if !reflect.DeepEqual(r.ByKind, full.ByKind) || !reflect.DeepEqual(r.ByInvariant, full.ByInvariant) {
				t.Fatalf("counts %v %v, want every finding counted: %v %v", r.ByKind, r.ByInvariant, full.ByKind, full.ByInvariant)
			}
			if r.Clean {
				t.Fatal("a truncated report looks clean")
			}
			if !strings.Contains(FormatReport(r), fmt.Sprintf("%d more findings not listed", r.Unlisted)) {
				t.Fatalf("the text does not say it is truncated:\n%s", FormatReport(r))
			}
			p := mustPlan(t, r, s)
			if len(p.Actions) != 0 || len(p.Manual) != c.cap {
				t.Fatalf("plan of a truncated report: %d actions, %d manual; want none and %d", len(p.Actions), len(p.Manual), c.cap)
			}
			for _, m := range p.Manual {
				if !strings.Contains(m.Reason, "truncated") {
					t.Fatalf("manual %s: reason %q does not say the report is truncated", m.FindingID, m.Reason)
				}
			}
		})
	}
}

// The default cap applies when MaxFindings is 0: a scope drifting on more
// records than it lists no more than DefaultMaxFindings.
func TestDetect_DefaultFindingCap(t *testing.T) {
	s := fixture(2)
	staleOutbox(s, DefaultMaxFindings+5)
	r := mustDetect(t, s)
	if len(r.Findings) != DefaultMaxFindings || r.Unlisted != 5 || r.Clean {
		t.Fatalf("listed %d, unlisted %d, clean %v; want %d, 5, false", len(r.Findings), r.Unlisted, r.Clean, DefaultMaxFindings)
	}
}

// A provider refusing a read as too large (size cap or deadline) is
// snapshot_too_large on a dry run and on an apply's re-read, never
// snapshot_unavailable (which the controller retries as transient).
func TestWorkflow_SnapshotTooLargeIsItsOwnCode(t *testing.T) {
	tooLarge := fmt.Errorf("reconstore: read scope x: %w: 5000001 source events, the cap is 5000000", ErrSnapshotTooLarge)
	cases := []struct {
		name string
		err  error
		want ResultCode
	}{
		{"size cap", tooLarge, ResultSnapshotTooLarge},
		{"other read error", errors.New("connection refused"), ResultSnapshotUnavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rg := newRig(fixture(fxCmds))
			rg.world.readErr = []error{c.err}
			_, err := rg.wf.DryRun(context.Background(), fxScope)
			if got := CodeOf(err); got != c.want {
				t.Fatalf("dry run: code %q (%v), want %q", got, err, c.want)
			}

			rg = newRig(fixture(fxCmds))
			s := rg.world.snap
			staleOutbox(s, 1)
			dr, err := rg.wf.DryRun(context.Background(), fxScope)
			if err != nil || len(dr.Plan.Actions) == 0 {
				t.Fatalf("dry run: %v", err)
			}
			rg.world.readErr = []error{nil, c.err}
			rg.world.reads = 1
			out, err := rg.wf.Apply(context.Background(), dr.Plan, ApplyOptions{Principal: "ada", Confirm: dr.Plan.PlanID, AllowIrreversible: true})
			if got := CodeOf(err); got != c.want || out.Code != c.want {
				t.Fatalf("apply re-read: code %q / outcome %q (%v), want %q", got, out.Code, err, c.want)
			}
		})
	}
}
