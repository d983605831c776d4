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

package reconstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

type nopFetcher struct{}

func (nopFetcher) Fetch(context.Context, int64, string, string, int) (*source.Page, error) {
	return nil, context.Canceled
}

func TestWorkflow_ConfigRefusesMissingParts(t *testing.T) {
	allow := recon.PermissionFunc(func(context.Context, string) (bool, error) { return true, nil })
	ok := RunnerConfig{Store: store.New(nil), Source: nopFetcher{}, Permission: allow, StaleAfter: time.Minute}
	for _, c := range []struct {
		name string
		edit func(*RunnerConfig)
		want string // "" : valid
	}{
		{"complete", func(*RunnerConfig) {}, ""},
		{"no store", func(c *RunnerConfig) { c.Store = nil }, "store"},
		{"no source", func(c *RunnerConfig) { c.Source = nil }, "source"},
		{"no permission", func(c *RunnerConfig) { c.Permission = nil }, "permission"},
		{"no staleAfter", func(c *RunnerConfig) { c.StaleAfter = 0 }, "staleAfter"},
		{"negative lease", func(c *RunnerConfig) { c.LeaseDuration = -time.Second }, "lease"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := ok
			c.edit(&cfg)
			w, err := NewRunner(cfg)
			switch {
			case c.want == "" && (err != nil || w.leases.ttl != DefaultRepairLease || w.core.Session == nil || w.core.Clock == nil):
				t.Fatalf("valid config: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("want an error naming %q, got %v", c.want, err)
			}
		})
	}
}

// fakeClock is the session's local clock, moved by the test.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

type leaseRow struct {
	owner             string
	fence             int64
	expires, renewed  time.Time
	acquired          time.Time
	expiredByDatabase bool
}

func (s *scene) leaseRow() leaseRow {
	s.t.Helper()
	var l leaseRow
	s.one(`SELECT owner, fence, expires_at, renewed_at, acquired_at, expires_at <= clock_timestamp() FROM projection_catchup_lease WHERE scope = $1`,
		[]any{s.scope}, &l.owner, &l.fence, &l.expires, &l.renewed, &l.acquired, &l.expiredByDatabase)
	return l
}

// TestWorkflow_LeaseRenewedAfterHalfItsDuration: the session takes the
// scope's lease as reconciliation/<correlation id>#<nonce> (a second
// session of the same run is refused LEASE_HELD); a handler asking before
// half its duration gets it as is (no statement), at half it is renewed
// (same fence, later expiry); another scope's handler gets nothing; the end
// releases it and the worker's next acquisition increments the fence.
func TestWorkflow_LeaseRenewedAfterHalfItsDuration(t *testing.T) {
	t.Parallel()
	s := newScene(t, "venue-lease", sceneOpts{first: 40, second: 10})
	clk := &fakeClock{now: time.Unix(1e9, 0)}
	s.wf.leases.clock = clk.Now
	ttl := s.wf.leases.ttl

	ctx, end, err := s.wf.leases.Begin(ctxb, s.scope, "corr-1")
	if err != nil {
		t.Fatal(err)
	}
	taken := s.leaseRow()
	if !strings.HasPrefix(taken.owner, RepairOwnerPrefix+"corr-1#") || taken.expiredByDatabase {
		t.Fatalf("lease after Begin: %+v", taken)
	}
	// A second session of the same run (another manager rolling the same
	// apply back: a rollback's correlation id is its apply's) is another
	// owner: it waits for this one, never shares its lease.
	if _, _, err := s.wf.leases.Begin(ctxb, s.scope, "corr-1"); codes.Of(err) != codes.LeaseHeld {
		t.Fatalf("a second session of corr-1 while the first holds the lease: %v, want %s", err, codes.LeaseHeld)
	}
	// While the repair holds it, the recovery worker cannot take it (its
	// cycle observes instead): a page and a repair never interleave.
	if _, err := s.rec.AcquireLease(ctxb, s.scope, workerOwner, time.Minute); codes.Of(err) != codes.LeaseHeld {
		t.Fatalf("the worker during a repair: %v, want %s", err, codes.LeaseHeld)
	}
	clk.now = clk.now.Add(ttl/2 - time.Nanosecond)
	if l, err := sessionLease(ctx, s.scope); err != nil || l.Fence != taken.fence {
		t.Fatalf("lease before half its duration: %+v %v", l, err)
	}
	if got := s.leaseRow(); got != taken {
		t.Fatalf("renewed before half its duration: %+v, was %+v", got, taken)
	}
	clk.now = clk.now.Add(time.Nanosecond)
	l, err := sessionLease(ctx, s.scope)
	renewed := s.leaseRow()
	if err != nil || l.Fence != taken.fence || renewed.fence != taken.fence || !renewed.expires.After(taken.expires) || !renewed.renewed.After(taken.renewed) {
		t.Fatalf("at half its duration: %+v %v; row %+v, was %+v", l, err, renewed, taken)
	}
	if _, err := sessionLease(ctx, "another-scope"); err == nil {
		t.Fatal("a handler of another scope got this scope's lease")
	}
	if _, err := sessionLease(ctxb, s.scope); err == nil || !strings.Contains(err.Error(), "no repair session") {
		t.Fatalf("a handler outside a session: %v", err)
	}
	end()
	if got := s.leaseRow(); !got.expiredByDatabase || got.fence != taken.fence {
		t.Fatalf("after end: %+v", got)
	}
	w, err := s.rec.AcquireLease(ctxb, s.scope, workerOwner, time.Minute)
	if err != nil || w.Fence != taken.fence+1 {
		t.Fatalf("the worker after the repair: %+v %v, want fence %d", w, err, taken.fence+1)
	}
	// A renewal of a lease the worker took over fails: the run stops
	// writing, it never writes under a lost lease.
	clk.now = clk.now.Add(ttl)
	if _, err := sessionLease(ctx, s.scope); codes.Of(err) != codes.LeaseLost {
		t.Fatalf("renewal of a taken-over lease: %v, want %s", err, codes.LeaseLost)
	}
}

// TestWorkflow_RehearsalPredictsAFailureTheApplyMeets: a plan whose
// second action cannot succeed (trigger_cycle without the controller's
// hook) is known before approval: the rehearsal reports it, wrote nothing
// and released its lease. Approved anyway, the apply meets the same
// failure and rolls the first action back under the same lease: the
// projection is as before, journal and audit say what happened.
func TestWorkflow_RehearsalPredictsAFailureTheApplyMeets(t *testing.T) {
	t.Parallel()
	s := newScene(t, "venue-rehearsal", sceneOpts{})
	record, _ := breakages[1].corrupt(s) // UNEXPLAINED_BALANCE: rederive_position
	s.exec(`UPDATE projection_catchup_cursor SET state = 'CATCHING_UP', updated_at = now() - interval '12 minutes' WHERE scope = $1`, s.scope)
	pre := s.dump(false)

	d := s.dryRun()
	var kinds []string
	for _, a := range d.Plan.Actions {
		kinds = append(kinds, string(a.Kind))
	}
	if strings.Join(kinds, ",") != "rederive_position,trigger_cycle" {
		t.Fatalf("plan:\n%s", recon.FormatPlan(d.Plan))
	}
	r := s.wf.Rehearse(ctxb, d.Plan, d.Run.ID)
	if !r.Ran || r.WouldSucceed() || len(r.Actions) != 2 || r.Actions[0].Error != "" ||
		!strings.Contains(r.Actions[1].Error, "no controller hook") {
		t.Fatalf("rehearsal: %+v", r)
	}
	if diff := sameDump(s.dump(false), pre); len(diff) != 0 {
		t.Fatalf("the rehearsal wrote: %v", diff)
	}
	if l := s.leaseRow(); !l.expiredByDatabase || !strings.HasPrefix(l.owner, RehearsalOwnerPrefix) {
		t.Fatalf("the rehearsal's lease: %+v", l)
	}

	o, err := s.wf.Apply(ctxb, d.Plan, recon.ApplyOptions{Principal: approver, Confirm: d.Plan.PlanID})
	if recon.CodeOf(err) != recon.ResultRepairFailed || o.FailedAction == nil || o.FailedAction.Kind != recon.ActionTriggerCycle ||
		len(o.RolledBack) != 1 || o.RolledBack[0].ID != "rederive_position:"+record || len(o.RollbackFailed) != 0 {
		t.Fatalf("apply: %v %+v", err, o)
	}
	if diff := sameDump(withoutNotes(s.dump(false)), pre); len(diff) != 0 {
		t.Fatalf("a failed apply left writes: %v", diff)
	}
	// Its rederive committed and was announced, so consumers hear the
	// automatic revert too: the repaired balance, then the restored one.
	var now string
	s.one(`SELECT account || '/' || instrument || ' ' || trim_scale(quantity)::text || '@' || trim_scale(avg_cost)::text FROM positions
 WHERE scope = $1 AND 'positions/account=' || account || ',instrument=' || instrument = $2`, []any{s.scope, record}, &now)
	if n := s.notes(); len(n) != 2 || n[0] == n[1] || n[1] != now || strings.Fields(n[0])[0] != strings.Fields(now)[0] {
		t.Fatalf("notifications of the failed apply: %q, want the repaired balance then the restored %q", n, now)
	}
	entries, err := s.wf.Journal().Entries(ctxb, o.CorrelationID)
	if err != nil || len(entries) != 2 || entries[0].Event != recon.JournalApplied || entries[1].Event != recon.JournalReverted {
		t.Fatalf("journal: %+v %v", entries, err)
	}
	recs, err := s.wf.Audit().Records(ctxb, o.CorrelationID)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, rec := range recs {
		outcomes = append(outcomes, rec.Outcome)
	}
	if strings.Join(outcomes, ",") != "applied,failed,reverted" {
		t.Fatalf("audit: %v", outcomes)
	}
	if l := s.leaseRow(); !l.expiredByDatabase || !strings.HasPrefix(l.owner, RepairOwnerPrefix+o.CorrelationID+"#") {
		t.Fatalf("the repair's lease after the failed apply: %+v", l)
	}
}

// TestWorkflow_RehearsalOfAMovedRecord: a record that moved after the dry
// run fails its rehearsal (ErrRecordMoved) without a write, and the apply
// refuses it as plan_stale.
func TestWorkflow_RehearsalOfAMovedRecord(t *testing.T) {
	t.Parallel()
	s := newScene(t, "venue-moved", sceneOpts{})
	record, _ := breakages[1].corrupt(s)
	d := s.dryRun()
	if rh := s.wf.Rehearse(ctxb, d.Plan, d.Run.ID); !rh.WouldSucceed() {
		t.Fatalf("rehearsal before the move: %+v", rh)
	}
	acct, instr, _ := strings.Cut(strings.TrimPrefix(record, "positions/account="), ",instrument=")
	s.exec(`UPDATE positions SET quantity = quantity + 1 WHERE scope = $1 AND account = $2 AND instrument = $3`, s.scope, acct, instr)
	moved := s.dump(true)
	r := s.wf.Rehearse(ctxb, d.Plan, "again")
	if !r.Ran || r.WouldSucceed() || len(r.Actions) != 1 || !strings.Contains(r.Actions[0].Error, ErrRecordMoved.Error()) {
		t.Fatalf("rehearsal of a moved record: %+v", r)
	}
	if diff := sameDump(s.dump(true), moved); len(diff) != 0 {
		t.Fatalf("the rehearsal wrote: %v", diff)
	}
	o, err := s.wf.Apply(ctxb, d.Plan, recon.ApplyOptions{Principal: approver, Confirm: d.Plan.PlanID})
	if recon.CodeOf(err) != recon.ResultPlanStale || len(o.Applied) != 0 {
		t.Fatalf("apply of a moved record: %v", err)
	}
	if diff := sameDump(s.dump(true), moved); len(diff) != 0 {
		t.Fatalf("a stale apply wrote: %v", diff)
	}
}

// TestWorkflow_LeaseRenewedBetweenActions: a two-action apply whose local
// clock passes half the lease at every look renews the lease before each
// handler (renewed_at moves, the fence does not) and succeeds.
func TestWorkflow_LeaseRenewedBetweenActions(t *testing.T) {
	t.Parallel()
	s := newScene(t, "venue-renew", sceneOpts{})
	breakages[1].corrupt(s) // UNEXPLAINED_BALANCE
	breakages[4].corrupt(s) // ORDER_ROW_MISMATCH
	d := s.dryRun()
	if len(d.Plan.Actions) != 2 {
		t.Fatalf("plan:\n%s", recon.FormatPlan(d.Plan))
	}
	// The clock jumps half the lease at every look, and records the lease
	// row as the handlers see it: the renewal statements move renewed_at.
	clk := &fakeClock{now: time.Unix(1e9, 0)}
	seen := map[time.Time]bool{}
	fences := map[int64]bool{}
	s.wf.leases.clock = func() time.Time {
		if l := s.leaseRow(); strings.HasPrefix(l.owner, RepairOwnerPrefix) {
			seen[l.renewed], fences[l.fence] = true, true
		}
		clk.now = clk.now.Add(s.wf.leases.ttl / 2)
		return clk.now
	}
	o, err := s.wf.Apply(ctxb, d.Plan, recon.ApplyOptions{Principal: approver, Confirm: d.Plan.PlanID})
	if err != nil || len(o.Applied) != 2 || len(o.StillDrifting) != 0 {
		t.Fatalf("apply: %v %+v", err, o)
	}
	// Seen: the acquisition, then the first renewal (before action 2's look).
	if len(seen) < 2 || len(fences) != 1 {
		t.Fatalf("the lease was not renewed between actions: renewed_at %v, fences %v", seen, fences)
	}
	if pr, err := s.recover(); err != nil || !pr.Current() {
		t.Fatalf("recovery after the repair: %v %+v", err, pr)
	}
}
