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
	"sync"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

const deadOwner = "manager-dead"

// leaseWorkflow replaces the scene's workflow with one whose trigger_cycle
// hook records the scopes it was asked for (the controller's hook only
// enqueues a cycle) and whose clock is clock (nil: time.Now).
func (s *scene) leaseWorkflow(clock func() time.Time) *[]string {
	s.t.Helper()
	var mu sync.Mutex
	asked := &[]string{}
	w, err := NewRunner(RunnerConfig{
		Store:      store.New(pgtest.Pool(s.t, s.db.Reconciliation)),
		ReadPool:   pgtest.Pool(s.t, s.db.ReadOnly),
		Source:     s.client,
		Permission: recon.PermissionFunc(func(_ context.Context, p string) (bool, error) { return p == approver, nil }),
		Telemetry:  s.wf.tel,
		Clock:      clock,
		StaleAfter: 5 * time.Minute,
		Log:        s.wf.log,
		TriggerCycle: func(_ context.Context, scope string) error {
			mu.Lock()
			defer mu.Unlock()
			*asked = append(*asked, scope)
			return nil
		},
	})
	if err != nil {
		s.t.Fatal(err)
	}
	s.wf = w
	return asked
}

// deadHolder makes the scope's lease the claim of a manager that died
// mid-work: expired ten minutes ago by the database clock, last renewed
// eleven minutes ago, the cursor stuck CATCHING_UP since twelve. It
// returns the dead holder's lease as that manager still believes it holds it.
func (s *scene) deadHolder() store.Lease {
	s.t.Helper()
	s.exec(`UPDATE projection_catchup_lease SET owner = $2, expires_at = now() - interval '10 minutes',
    renewed_at = now() - interval '11 minutes' WHERE scope = $1`, s.scope, deadOwner)
	s.exec(`UPDATE projection_catchup_cursor SET state = 'CATCHING_UP', updated_at = now() - interval '12 minutes' WHERE scope = $1`, s.scope)
	l := s.leaseRow()
	return store.Lease{Scope: s.scope, Owner: l.owner, Fence: l.fence, ExpiresAt: l.expires}
}

// TestLeaseRepair_DeadHolderReleasedThroughTheWorkflow: the whole path of
// lease.fresh's repair on real parts (NewRunner → DryRun → Apply with an
// allowed principal and the echoed plan id → verification). The dead
// holder's claim is released: the fence moves past it so that manager can
// never commit again (FR-APR08); the apply verifies lease.fresh (not
// stillDrifting); the recovery worker takes the lease next and brings the
// scope to CURRENT; the next dry run is clean, the released repair lease
// included.
func TestLeaseRepair_DeadHolderReleasedThroughTheWorkflow(t *testing.T) {
	t.Parallel()
	s := newScene(t, "venue-dead-holder", sceneOpts{first: 40, second: 10})
	asked := s.leaseWorkflow(nil)
	dead := s.deadHolder()

	held := s.leaseRow()
	d := s.dryRun()
	// The dry run must not take the lease: that takeover is the release.
	if got := s.leaseRow(); got != held {
		t.Fatalf("the dry run wrote the lease: %+v, was %+v", got, held)
	}
	var release *recon.Action
	var kinds []string
	for i, a := range d.Plan.Actions {
		kinds = append(kinds, string(a.Kind))
		if a.Kind == recon.ActionReleaseLease {
			release = &d.Plan.Actions[i]
		}
	}
	if release == nil || release.Before["owner"] != deadOwner || len(d.Plan.Manual) != 0 {
		t.Fatalf("plan (%v):\n%s", kinds, recon.FormatPlan(d.Plan))
	}
	if rh := s.wf.Rehearse(ctxb, d.Plan, d.Run.ID); !rh.WouldSucceed() {
		t.Fatalf("rehearsal: %+v", rh)
	}
	o, err := s.wf.Apply(ctxb, d.Plan, recon.ApplyOptions{Principal: approver, Confirm: d.Plan.PlanID, AllowIrreversible: true})
	if err != nil || o.Code != "" || len(o.Applied) != len(d.Plan.Actions) {
		t.Fatalf("apply: %v %+v", err, o)
	}
	verified := map[string]bool{}
	for _, id := range o.Verified {
		verified[id] = true
	}
	if !o.VerificationRan || len(release.Findings) == 0 {
		t.Fatalf("verification: ran %v, release targets %v", o.VerificationRan, release.Findings)
	}
	for _, id := range release.Findings {
		if !verified[id] {
			t.Fatalf("lease finding %s not verified: verified %v, still drifting %v", id, o.Verified, o.StillDrifting)
		}
	}
	if len(*asked) != 1 || (*asked)[0] != s.scope {
		t.Fatalf("trigger_cycle asked for %v", *asked)
	}
	// FR-APR08: the fence moved past the dead holder's; it can never commit.
	if l := s.leaseRow(); l.fence <= dead.Fence || l.owner == deadOwner || !l.expiredByDatabase {
		t.Fatalf("lease after the apply: %+v, dead holder's fence %d", l, dead.Fence)
	}
	if _, err := s.rec.RenewLease(ctxb, dead, time.Minute); codes.Of(err) != codes.LeaseLost {
		t.Fatalf("the dead holder renews: %v, want %s", err, codes.LeaseLost)
	}
	if err := s.rec.RecordOutcome(ctxb, dead, s.scope, store.StateCurrent, "", 0); codes.Of(err) != codes.LeaseLost {
		t.Fatalf("the dead holder writes: %v, want %s", err, codes.LeaseLost)
	}
	// The session's lease, released at its end, is not a claim held past
	// expiry, however long the worker stays away: a dry run staleAfter
	// later still reports the stuck cursor, and nothing about the lease.
	s.leaseWorkflow(func() time.Time { return time.Now().Add(10 * time.Minute) })
	later := s.dryRun()
	for _, f := range later.Report.Findings {
		if f.Invariant == recon.LeaseFresh {
			t.Fatalf("the repair's released lease is reported again: %s (%s)", f.ID, f.RootCause.Code)
		}
	}
	if len(later.Report.Findings) == 0 {
		t.Fatal("the stuck cursor is no longer reported")
	}
	s.leaseWorkflow(nil)
	// The recovery worker takes the lease next (the triggered cycle).
	if pr, err := s.recover(); err != nil || !pr.Current() {
		t.Fatalf("recovery after the repair: %v %+v", err, pr)
	}
	if d := s.dryRun(); len(d.Report.Findings) != 0 {
		t.Fatalf("after the repair and a cycle:\n%s", strings.Join(findings(d.Report), "\n"))
	}
}

// TestLeaseRepair_UnexpiredLeaseNeverReleased: a planner whose clock runs an
// hour ahead believes a live holder's lease (unexpired by the database
// clock for 30 more minutes) is held past expiry and plans release_lease.
// Approved, the apply never releases it: the repair session cannot take the
// lease (lease_unavailable, transient), and nothing is written, the lease
// row included.
func TestLeaseRepair_UnexpiredLeaseNeverReleased(t *testing.T) {
	t.Parallel()
	s := newScene(t, "venue-live-holder", sceneOpts{first: 40, second: 10})
	s.leaseWorkflow(func() time.Time { return time.Now().Add(time.Hour) })
	s.exec(`UPDATE projection_catchup_lease SET owner = 'slow', expires_at = now() + interval '30 minutes',
    renewed_at = now() - interval '11 minutes' WHERE scope = $1`, s.scope)
	s.exec(`UPDATE projection_catchup_cursor SET state = 'CATCHING_UP', updated_at = now() - interval '12 minutes' WHERE scope = $1`, s.scope)
	lease := s.leaseRow()
	pre := s.dump(true)

	d := s.dryRun()
	var planned bool
	for _, a := range d.Plan.Actions {
		planned = planned || a.Kind == recon.ActionReleaseLease
	}
	if !planned {
		t.Fatalf("the fast planner did not plan release_lease:\n%s", recon.FormatPlan(d.Plan))
	}
	// The rehearsal predicts the refusal and takes no lease.
	if r := s.wf.Rehearse(ctxb, d.Plan, d.Run.ID); !r.Ran || r.WouldSucceed() || r.Actions[0].Kind != recon.ActionReleaseLease ||
		!strings.Contains(r.Actions[0].Error, "unexpired") {
		t.Fatalf("rehearsal under a live holder's lease: %+v", r)
	}
	if got := s.leaseRow(); got != lease {
		t.Fatalf("the rehearsal wrote the live holder's lease: %+v, was %+v", got, lease)
	}
	o, err := s.wf.Apply(ctxb, d.Plan, recon.ApplyOptions{Principal: approver, Confirm: d.Plan.PlanID, AllowIrreversible: true})
	if recon.CodeOf(err) != recon.ResultLeaseUnavailable || len(o.Applied) != 0 {
		t.Fatalf("apply under a live holder's lease: %v %+v", err, o)
	}
	if got := s.leaseRow(); got != lease {
		t.Fatalf("the live holder's lease was written: %+v, was %+v", got, lease)
	}
	if diff := sameDump(s.dump(true), pre); len(diff) != 0 {
		t.Fatalf("a refused apply wrote: %v", diff)
	}
}
