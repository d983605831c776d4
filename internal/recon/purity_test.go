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
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestPurity_DetectAndPlanNeverMutate: for every scenario, Detect and
// PlanRepairs leave the snapshot deep-equal to an independent copy built the
// same way (the fixture is deterministic, so building twice is a deep copy
// that shares nothing).
func TestPurity_DetectAndPlanNeverMutate(t *testing.T) {
	t.Run("the comparison sees a mutation", func(t *testing.T) {
		a, b := fixture(fxCmds), fixture(fxCmds)
		if !reflect.DeepEqual(a, b) {
			t.Fatal("two builds differ: the fixture is not deterministic")
		}
		a.SQL.Positions[3].AvgCost = a.SQL.Positions[3].AvgCost.Add(d("0.000000000001"))
		if reflect.DeepEqual(a, b) {
			t.Fatal("DeepEqual misses a decimal change")
		}
	})
	for _, sc := range allScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			s, copy := fixture(fxCmds), fixture(fxCmds)
			sc.mutate(s)
			sc.mutate(copy)
			if !reflect.DeepEqual(s, copy) {
				t.Fatal("scenario mutation is not deterministic")
			}
			r := mustDetect(t, s)
			mustPlan(t, r, s)
			if !reflect.DeepEqual(s, copy) {
				t.Fatal("Detect or PlanRepairs wrote into the snapshot")
			}
			// and the same snapshot always yields the same report
			r2 := mustDetect(t, s)
			if !reflect.DeepEqual(r, r2) {
				t.Fatal("two detections of one snapshot differ")
			}
		})
	}
}

func TestPlan_FingerprintAndIdentity(t *testing.T) {
	s := drifted()
	r := mustDetect(t, s)
	p1, p2 := mustPlan(t, r, s), mustPlan(t, mustDetect(t, drifted()), drifted())
	if p1.Fingerprint != p2.Fingerprint || p1.PlanID != p2.PlanID {
		t.Fatal("the same drift and clock must plan the same fingerprint and id")
	}
	if p1.Expires.Sub(p1.Created) != PlanTTL || !p1.Created.Equal(fxNow) || !strings.HasPrefix(p1.PlanID, "plan-") || len(p1.Fingerprint) != 64 {
		t.Fatalf("plan clock/id: %+v", p1)
	}
	later := drifted()
	later.Now = fxNow.Add(time.Second)
	p3 := mustPlan(t, mustDetect(t, later), later)
	if p3.Fingerprint != p1.Fingerprint || p3.PlanID == p1.PlanID {
		t.Fatal("a later dry run: same actions (fingerprint), a new plan id")
	}
	for _, c := range []struct {
		name string
		edit func(a []Action)
	}{
		{"after", func(a []Action) { a[0].After["remaining"] = "9" }},
		{"before", func(a []Action) { a[1].Before["avg_cost"] = "1" }},
		{"target", func(a []Action) { a[1].Target["account"] = "acc-9" }},
		{"reversible", func(a []Action) { a[2].Reversible = true }},
		{"order", func(a []Action) { a[0], a[1] = a[1], a[0] }},
	} {
		t.Run("fingerprint covers "+c.name, func(t *testing.T) {
			p := mustPlan(t, r, s)
			c.edit(p.Actions)
			if Fingerprint(p.Actions) == p1.Fingerprint {
				t.Fatal("edit not covered by the fingerprint")
			}
		})
	}
	if txt := FormatPlan(p1); !strings.Contains(txt, p1.PlanID) || !strings.Contains(txt, "rollback:") || strings.Count(txt, "\naction ") != 3 {
		t.Errorf("FormatPlan:\n%s", txt)
	}
}

func TestReport_CountsCleanAndFormat(t *testing.T) {
	t.Run("inconsistent makes it not clean", func(t *testing.T) {
		r := mustDetect(t, drifted())
		if r.Clean || !r.DryRun || r.ByKind[KindInconsistent] != 2 || r.ByKind[KindStale] != 1 ||
			r.ByInvariant[PositionDerivationAgrees] != 1 || r.ByInvariant[OrderVersionAgrees] != 1 || r.ByInvariant[OutboxDelivered] != 1 {
			t.Fatalf("report: clean=%v kinds=%v invs=%v", r.Clean, r.ByKind, r.ByInvariant)
		}
		txt := FormatReport(r)
		if strings.Count(txt, "\n  cause: ") != len(r.Findings) || !strings.Contains(txt, "by kind: stale=1 inconsistent=2") ||
			!strings.Contains(txt, "clean=false") || !strings.Contains(txt, "cause: arrival_order (likely): ") {
			t.Fatalf("FormatReport:\n%s", txt)
		}
		// a cause line sits under each finding
		lines := strings.Split(txt, "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "[") {
				j := i + 1
				for j < len(lines) && strings.HasPrefix(lines[j], "  ") && !strings.HasPrefix(lines[j], "  cause: ") {
					j++
				}
				if j == len(lines) || !strings.HasPrefix(lines[j], "  cause: ") {
					t.Errorf("finding %q has no cause line", l)
				}
			}
		}
	})
	t.Run("only missing/stale findings stay clean (the specification's rule)", func(t *testing.T) {
		s := fixture(fxCmds)
		s.removeTrade("t-2")
		r := mustDetect(t, s)
		if !r.Clean || len(r.Findings) != 1 {
			t.Fatalf("clean=%v findings=%d", r.Clean, len(r.Findings))
		}
	})
}

func TestScrub_Secrets(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://app:hunter2@db:5432/x", "postgres://app:[REDACTED]@db:5432/x"},
		{"host=db user=app password=hunter2 dbname=x", "host=db user=app password=[REDACTED] dbname=x"},
		{"Authorization: Bearer eyJhbGciOi.abc", "Authorization: Bearer [REDACTED]"},
		{`{"api_key": "k-123"}`, `{"api_key": [REDACTED]}`},
		{"client_secret=s3cr3t&x=1", "client_secret=[REDACTED]&x=1"},
		{"jwt eyJhbGciOiJIUzI1.eyJzdWIiOiIx.c2lnbmF0dXJl", "jwt [REDACTED]"},
		{"Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==", "Basic [REDACTED]"},
		{"acc-17", "acc-17"},
		{"ob-3 / BTC-USD 100.5", "ob-3 / BTC-USD 100.5"},
		{"a basic explanation", "a basic explanation"},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, changed := Scrub(c.in)
			if got != c.want || changed != (c.in != c.want) {
				t.Fatalf("Scrub(%q) = %q, %v; want %q", c.in, got, changed, c.want)
			}
			again, changed := Scrub(got)
			if again != got || changed {
				t.Fatalf("not idempotent: %q", again)
			}
		})
	}
}

// TestScrub_RedactedFindingIsManual: a secret pasted into a key field is
// scrubbed from the report and the record is never repaired.
func TestScrub_RedactedFindingIsManual(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(s *Snapshot)
		reason string
	}{
		{"identity", func(s *Snapshot) {
			s.SQL.Trades = append(s.SQL.Trades, TradeRow{TradeID: "postgres://app:hunter2@db/x", TradeSeq: 999, Seq: Seq(5), Instrument: "BTC-USD",
				Price: d("1"), Quantity: d("1"), BuyAccount: "acc-2", SellAccount: "acc-7", BookingStatus: "BOOKED", WrittenBy: "live"})
		}, "security incident"},
		{"values", func(s *Snapshot) {
			s.removeTrade("t-2")
			for i := range s.Source.Trades {
				if s.Source.Trades[i].TradeID == "t-2" {
					s.Source.Trades[i].BuyOrderID = "token=abc123"
				}
			}
		}, "redacted text"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := fixture(fxCmds)
			c.mutate(s)
			r := mustDetect(t, s)
			p := mustPlan(t, r, s)
			txt := FormatReport(r)
			if strings.Contains(txt, "hunter2") || strings.Contains(txt, "abc123") {
				t.Fatalf("secret in the report:\n%s", txt)
			}
			if len(p.Actions) != 0 {
				t.Fatalf("a redacted record got an action: %v", ids(p.Actions))
			}
			found := false
			for _, m := range p.Manual {
				found = found || strings.Contains(m.Reason, c.reason)
			}
			if !found {
				t.Fatalf("manual: %+v", p.Manual)
			}
		})
	}
}

func TestRun_Lifecycle(t *testing.T) {
	legal := map[[2]RunPhase]bool{
		{RunPending, RunCollecting}: true, {RunCollecting, RunAnalyzing}: true, {RunAnalyzing, RunReported}: true,
	}
	for _, from := range []RunPhase{RunPending, RunCollecting, RunAnalyzing} {
		legal[[2]RunPhase{from, RunFailed}] = true
		legal[[2]RunPhase{from, RunCancelled}] = true
	}
	for _, from := range RunPhases {
		for _, to := range RunPhases {
			t.Run(string(from)+"→"+string(to), func(t *testing.T) {
				r := Run{ID: "r", Phase: from}
				err := r.Transition(to, fxNow)
				if (err == nil) != legal[[2]RunPhase{from, to}] {
					t.Fatalf("transition %s→%s: err=%v, legal=%v", from, to, err, legal[[2]RunPhase{from, to}])
				}
				if err != nil && r.Phase != from {
					t.Fatal("an illegal transition moved the run")
				}
			})
		}
	}
	for _, p := range []RunPhase{RunReported, RunFailed, RunCancelled} {
		if !p.Terminal() {
			t.Errorf("%s must be terminal", p)
		}
	}
}

func TestDryRun_Lifecycle(t *testing.T) {
	for _, c := range []struct {
		name    string
		prep    func(r *rig) context.Context
		code    ResultCode
		phases  []RunPhase
		report  bool
		actions int
	}{
		{"reported", func(r *rig) context.Context { return context.Background() }, "",
			[]RunPhase{RunPending, RunCollecting, RunAnalyzing, RunReported}, true, 3},
		{"snapshot_unavailable: no report, never a partial one", func(r *rig) context.Context {
			r.world.readErr = []error{errors.New("member down")}
			return context.Background()
		}, ResultSnapshotUnavailable, []RunPhase{RunPending, RunCollecting, RunFailed}, false, 0},
		{"snapshot_unavailable: a nil snapshot", func(r *rig) context.Context {
			r.world.nilSnap = true
			return context.Background()
		}, ResultSnapshotUnavailable, []RunPhase{RunPending, RunCollecting, RunFailed}, false, 0},
		{"cancelled", func(r *rig) context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, ResultCancelled, []RunPhase{RunPending, RunCollecting, RunCancelled}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(drifted())
			runs := &fakeRuns{}
			r.wf.Runs = runs
			res, err := r.wf.DryRun(c.prep(r), fxScope)
			if CodeOf(err) != c.code {
				t.Fatalf("code %q, want %q (%v)", CodeOf(err), c.code, err)
			}
			var phases []RunPhase
			for _, s := range runs.saved {
				phases = append(phases, s.Phase)
			}
			if !reflect.DeepEqual(phases, c.phases) {
				t.Fatalf("phases %v, want %v", phases, c.phases)
			}
			if (res.Report != nil) != c.report || (res.Plan != nil) != c.report {
				t.Fatalf("report present=%v, want %v", res.Report != nil, c.report)
			}
			if c.report && (len(res.Plan.Actions) != c.actions || res.Run.PlanID != res.Plan.PlanID || res.Run.Findings != len(res.Report.Findings)) {
				t.Fatalf("run %+v", res.Run)
			}
			if len(r.handlers.calls) != 0 || len(r.journal.entries) != 0 || len(r.audit.records) != 0 {
				t.Fatal("a dry run wrote")
			}
		})
	}
}
