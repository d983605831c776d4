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
	"testing"
	"time"
)

const (
	idRewrite   = "rewrite_order_version:order_events/order_id=ob-2,version=2"
	idRederive  = "rederive_position:positions/account=acc-2,instrument=BTC-USD"
	idRepublish = "republish:projection_catchup_outbox/id=2,msg_id=m-2"
)

// drifted is the fixture with three repairable drifts: an order event
// (rewrite, reversible), an arrival-order average cost (rederive,
// reversible) and a skipped outbox row (republish, irreversible).
func drifted() *Snapshot {
	s := fixture(fxCmds)
	s.event("ob-2", 2).Remaining = d("1")
	s.pos("acc-2", "BTC-USD").AvgCost = d("101.25")
	s.SQL.Outbox = append(s.SQL.Outbox, OutboxRow{ID: 2, MsgID: "m-2", Account: "acc-2", Instrument: "BTC-USD", Quantity: d("3"),
		AvgCost: d("100"), CursorSeq: 14, CreatedAt: fxNow.Add(-10 * time.Minute)})
	return s
}

func dryRun(t *testing.T, r *rig) *Plan {
	t.Helper()
	res, err := r.wf.DryRun(context.Background(), fxScope)
	if err != nil {
		t.Fatalf("DryRun: %v", err)
	}
	if got := []string{}; len(res.Plan.Actions) != 3 {
		for _, a := range res.Plan.Actions {
			got = append(got, a.ID)
		}
		t.Fatalf("plan actions: %v", got)
	}
	return res.Plan
}

// failNextRead makes the next provider read fail with err.
func (r *rig) failNextRead(err error) {
	r.world.readErr = make([]error, r.world.reads+1)
	r.world.readErr[r.world.reads] = err
}

// TestApply_GuardsWriteNothing: each guard returns its code, calls no
// handler, journals nothing, audits every action as refused with that code
// and emits one telemetry record.
func TestApply_GuardsWriteNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		prep func(r *rig, p *Plan, o *ApplyOptions)
		code ResultCode
	}{
		{"repair_denied: no principal", func(r *rig, p *Plan, o *ApplyOptions) { o.Principal = "" }, ResultRepairDenied},
		{"repair_denied: unknown principal", func(r *rig, p *Plan, o *ApplyOptions) { o.Principal = "mallory" }, ResultRepairDenied},
		{"repair_denied: permission error fails closed", func(r *rig, p *Plan, o *ApplyOptions) { o.Principal = "broken" }, ResultRepairDenied},
		{"misconfigured: no permission checker (internal, fails closed)", func(r *rig, p *Plan, o *ApplyOptions) { r.wf.Permission = nil }, ResultInternal},
		{"confirmation_required: empty", func(r *rig, p *Plan, o *ApplyOptions) { o.Confirm = "" }, ResultConfirmationNeeded},
		{"confirmation_required: another plan", func(r *rig, p *Plan, o *ApplyOptions) { o.Confirm = "plan-0000" }, ResultConfirmationNeeded},
		{"plan_tampered: an after edited", func(r *rig, p *Plan, o *ApplyOptions) { p.Actions[0].After["remaining"] = "5" }, ResultPlanTampered},
		{"plan_tampered: an action dropped", func(r *rig, p *Plan, o *ApplyOptions) { p.Actions = p.Actions[1:] }, ResultPlanTampered},
		{"plan_tampered: expiry extended", func(r *rig, p *Plan, o *ApplyOptions) { p.Expires = p.Expires.Add(time.Hour) }, ResultPlanTampered},
		{"plan_tampered: irreversible relabelled reversible", func(r *rig, p *Plan, o *ApplyOptions) { p.Actions[2].Reversible = true }, ResultPlanTampered},
		{"plan_expired", func(r *rig, p *Plan, o *ApplyOptions) { r.now = p.Expires.Add(time.Second) }, ResultPlanExpired},
		{"nothing_selected: only names nothing in the plan", func(r *rig, p *Plan, o *ApplyOptions) { o.Only = []string{"nope"} }, ResultNothingSelected},
		{"nothing_selected: only an irreversible action without opt-in", func(r *rig, p *Plan, o *ApplyOptions) { o.Only = []string{idRepublish} }, ResultNothingSelected},
		{"blast_radius_exceeded", func(r *rig, p *Plan, o *ApplyOptions) { o.MaxActions = 1 }, ResultBlastRadius},
		{"handler_missing: no handler", func(r *rig, p *Plan, o *ApplyOptions) { delete(r.wf.Handlers, ActionRederivePosition) }, ResultHandlerMissing},
		{"handler_missing: reversible kind without revert", func(r *rig, p *Plan, o *ApplyOptions) {
			r.wf.Handlers[ActionRewriteOrderVersion] = r.handlers.handler(true)
		}, ResultHandlerMissing},
		{"snapshot_unavailable: the re-read fails", func(r *rig, p *Plan, o *ApplyOptions) { r.failNextRead(errors.New("database down")) }, ResultSnapshotUnavailable},
		{"snapshot_unavailable: no snapshot", func(r *rig, p *Plan, o *ApplyOptions) { r.world.nilSnap = true }, ResultSnapshotUnavailable},
		{"plan_stale: the record moved", func(r *rig, p *Plan, o *ApplyOptions) { r.world.snap.pos("acc-2", "BTC-USD").AvgCost = d("99") }, ResultPlanStale},
		{"plan_stale: someone fixed it in between", func(r *rig, p *Plan, o *ApplyOptions) { r.world.snap.event("ob-2", 2).Remaining = d("0") }, ResultPlanStale},
		{"plan_stale: the source moved", func(r *rig, p *Plan, o *ApplyOptions) {
			for i := range r.world.snap.Source.Orders {
				if o := &r.world.snap.Source.Orders[i]; o.OrderID == "ob-2" && o.Version == 2 {
					o.Remaining = d("0.5")
				}
			}
		}, ResultPlanStale},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(drifted())
			p := dryRun(t, r)
			planned := len(p.Actions)
			o := ApplyOptions{Principal: "ada", Confirm: p.PlanID}
			c.prep(r, p, &o)
			out, err := r.wf.Apply(context.Background(), p, o)
			if CodeOf(err) != c.code || out == nil || out.Code != c.code {
				t.Fatalf("code %q (outcome %+v), want %q", CodeOf(err), out, c.code)
			}
			if len(r.handlers.calls) != 0 || len(r.journal.entries) != 0 {
				t.Fatalf("a refused apply wrote: calls %v, journal %d", r.handlers.calls, len(r.journal.entries))
			}
			if c.code != ResultInternal {
				want := len(p.Actions)
				if n := r.audit.outcomes()[AuditRefused]; n != want || len(r.audit.records) != want {
					t.Errorf("audit: %d refused of %d records, want %d (planned %d)", n, len(r.audit.records), want, planned)
				}
				for _, rec := range r.audit.records {
					if rec.Code != c.code || rec.Action != AuditAction || rec.CorrelationID != out.CorrelationID || rec.Principal != o.Principal {
						t.Errorf("audit record: %+v", rec)
					}
				}
			}
			if tel := out.Telemetry; tel.Code != c.code || tel.Name != TelemetryName {
				t.Errorf("telemetry: %+v", tel)
			}
		})
	}
}

// TestApply_GuardOrder: with several guards violated, the first in the
// specification's order answers.
func TestApply_GuardOrder(t *testing.T) {
	for _, c := range []struct {
		name string
		prep func(r *rig, p *Plan, o *ApplyOptions)
		code ResultCode
	}{
		{"denied before unconfirmed", func(r *rig, p *Plan, o *ApplyOptions) { o.Principal, o.Confirm = "mallory", "" }, ResultRepairDenied},
		{"unconfirmed before tampered", func(r *rig, p *Plan, o *ApplyOptions) { o.Confirm = ""; p.Actions[0].After = nil }, ResultConfirmationNeeded},
		{"tampered before expired", func(r *rig, p *Plan, o *ApplyOptions) {
			p.Actions[0].After = nil
			r.now = p.Expires.Add(time.Hour)
		}, ResultPlanTampered},
		{"expired before nothing selected", func(r *rig, p *Plan, o *ApplyOptions) { r.now = p.Expires.Add(time.Hour); o.Only = []string{"x"} }, ResultPlanExpired},
		{"blast radius before handler missing", func(r *rig, p *Plan, o *ApplyOptions) {
			o.MaxActions = 1
			r.wf.Handlers = Handlers{}
		}, ResultBlastRadius},
		{"handler missing before snapshot unavailable", func(r *rig, p *Plan, o *ApplyOptions) {
			r.wf.Handlers = Handlers{}
			r.failNextRead(errors.New("down"))
		}, ResultHandlerMissing},
		{"snapshot unavailable before stale", func(r *rig, p *Plan, o *ApplyOptions) {
			r.world.snap.pos("acc-2", "BTC-USD").AvgCost = d("99")
			r.failNextRead(errors.New("down"))
		}, ResultSnapshotUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(drifted())
			p := dryRun(t, r)
			o := ApplyOptions{Principal: "ada", Confirm: p.PlanID}
			c.prep(r, p, &o)
			if _, err := r.wf.Apply(context.Background(), p, o); CodeOf(err) != c.code {
				t.Fatalf("code %q, want %q (%v)", CodeOf(err), c.code, err)
			}
			if len(r.handlers.calls) != 0 {
				t.Fatalf("wrote: %v", r.handlers.calls)
			}
		})
	}
}

// TestApply_ClockFieldsAside: a record whose only change is a clock stamp
// (the cursor's updated_at, still stale) is not stale.
func TestApply_ClockFieldsAside(t *testing.T) {
	s := fixture(fxCmds)
	s.SQL.Cursor.State, s.SQL.Cursor.UpdatedAt = StateCatchingUp, fxNow.Add(-20*time.Minute)
	s.Scopes[0].State, s.Scopes[0].UpdatedAt = StateCatchingUp, fxNow.Add(-20*time.Minute)
	r := newRig(s)
	res, err := r.wf.DryRun(context.Background(), fxScope)
	if err != nil || len(res.Plan.Actions) != 1 || res.Plan.Actions[0].Kind != ActionTriggerCycle {
		t.Fatalf("dry run: %v %+v", err, res)
	}
	r.world.snap.SQL.Cursor.UpdatedAt = fxNow.Add(-15 * time.Minute) // RETRY recorded, still stale
	r.now = fxNow.Add(time.Minute)
	out, err := r.wf.Apply(context.Background(), res.Plan, ApplyOptions{Principal: "ada", Confirm: res.Plan.PlanID})
	if err != nil || len(out.Applied) != 1 {
		t.Fatalf("apply: %v %+v", err, out)
	}
}
