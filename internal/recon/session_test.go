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
)

type sessionKey struct{}

// fakeSession records the run's bracket: begin, every handler call (and
// whether it carried the session's context), end.
type fakeSession struct {
	beginErr error
	events   []string
	scope    string
	corr     string
}

func (s *fakeSession) Begin(ctx context.Context, scope, correlationID string) (context.Context, func(), error) {
	s.events = append(s.events, "begin")
	s.scope, s.corr = scope, correlationID
	if s.beginErr != nil {
		return nil, nil, s.beginErr
	}
	return context.WithValue(ctx, sessionKey{}, "lease"), func() { s.events = append(s.events, "end") }, nil
}

// sessionHandlers wraps every handler of the rig: each call records whether
// it ran inside the session.
func sessionHandlers(r *rig, s *fakeSession) {
	for k, h := range r.wf.Handlers {
		h := h
		mark := func(ctx context.Context, op string) {
			in := "outside"
			if ctx.Value(sessionKey{}) == "lease" {
				in = "inside"
			}
			s.events = append(s.events, op+" "+in)
		}
		f := HandlerFuncs{ApplyFunc: func(ctx context.Context, a Action) error { mark(ctx, "apply"); return h.Apply(ctx, a) }}
		if canRevert(h) {
			f.RevertFunc = func(ctx context.Context, a Action) error { mark(ctx, "revert"); return h.Revert(ctx, a) }
		}
		r.wf.Handlers[k] = f
	}
}

func eq(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSession_BracketsApplyAndRollback: the session begins once, after every
// guard, for the plan's scope and the run's correlation id; every handler
// and revert runs inside it; it ends once, after the last one (success,
// automatic rollback and Rollback alike).
func TestSession_BracketsApplyAndRollback(t *testing.T) {
	t.Run("success then rollback", func(t *testing.T) {
		r := newRig(drifted())
		s := &fakeSession{}
		r.wf.Session = s
		sessionHandlers(r, s)
		p := dryRun(t, r)
		out, err := applyAll(t, r, p, false)
		if err != nil {
			t.Fatalf("apply: %v", err)
		}
		if want := []string{"begin", "apply inside", "apply inside", "end"}; !eq(s.events, want) {
			t.Fatalf("apply bracket %v, want %v", s.events, want)
		}
		if s.scope != fxScope || s.corr != out.CorrelationID {
			t.Errorf("session of scope %q corr %q, want %q %q", s.scope, s.corr, fxScope, out.CorrelationID)
		}
		s.events = nil
		if _, err := r.wf.Rollback(context.Background(), out, "ada"); err != nil {
			t.Fatalf("rollback: %v", err)
		}
		if want := []string{"begin", "revert inside", "revert inside", "end"}; !eq(s.events, want) {
			t.Fatalf("rollback bracket %v, want %v", s.events, want)
		}
	})
	t.Run("failure rolls back inside the session", func(t *testing.T) {
		r := newRig(drifted())
		s := &fakeSession{}
		r.wf.Session = s
		sessionHandlers(r, s)
		p := dryRun(t, r)
		r.handlers.failApply[idRederive] = errors.New("constraint")
		if _, err := applyAll(t, r, p, false); CodeOf(err) != ResultRepairFailed {
			t.Fatalf("apply: %v", err)
		}
		if want := []string{"begin", "apply inside", "apply inside", "revert inside", "end"}; !eq(s.events, want) {
			t.Fatalf("bracket %v, want %v", s.events, want)
		}
	})
}

// TestSession_BeginsOnlyAfterEveryGuard: a guard refusal never takes the
// lease (taking it is a write, and every guard runs before the first write).
func TestSession_BeginsOnlyAfterEveryGuard(t *testing.T) {
	for _, c := range []struct {
		name string
		prep func(r *rig, p *Plan, o *ApplyOptions)
	}{
		{"repair_denied", func(r *rig, p *Plan, o *ApplyOptions) { o.Principal = "mallory" }},
		{"confirmation_required", func(r *rig, p *Plan, o *ApplyOptions) { o.Confirm = "" }},
		{"plan_stale", func(r *rig, p *Plan, o *ApplyOptions) { r.world.snap.pos("acc-2", "BTC-USD").AvgCost = d("99") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(drifted())
			s := &fakeSession{}
			r.wf.Session = s
			p := dryRun(t, r)
			o := ApplyOptions{Principal: "ada", Confirm: p.PlanID}
			c.prep(r, p, &o)
			if _, err := r.wf.Apply(context.Background(), p, o); err == nil {
				t.Fatal("the guard did not refuse")
			}
			if len(s.events) != 0 {
				t.Fatalf("a refused apply touched the session: %v", s.events)
			}
		})
	}
}

// TestSession_BeginFailsRefusesLeaseUnavailable: the worker holds the lease:
// lease_unavailable, no handler, no journal, every action audited as
// refused with the code, one telemetry record; a rollback likewise reverts
// nothing.
func TestSession_BeginFailsRefusesLeaseUnavailable(t *testing.T) {
	r := newRig(drifted())
	s := &fakeSession{beginErr: errors.New("LEASE_HELD: scope is leased by the worker")}
	r.wf.Session = s
	p := dryRun(t, r)
	out, err := applyAll(t, r, p, false)
	if CodeOf(err) != ResultLeaseUnavailable || out.Code != ResultLeaseUnavailable {
		t.Fatalf("code %q, want %q", CodeOf(err), ResultLeaseUnavailable)
	}
	if len(r.handlers.calls) != 0 || len(r.journal.entries) != 0 || len(out.Applied) != 0 {
		t.Fatalf("a refused apply wrote: calls %v journal %d", r.handlers.calls, len(r.journal.entries))
	}
	if n := r.audit.outcomes()[AuditRefused]; n != len(p.Actions) || len(r.audit.records) != n {
		t.Errorf("audit %v, want %d refused", r.audit.outcomes(), len(p.Actions))
	}
	if tel := out.Telemetry; tel.Code != ResultLeaseUnavailable || tel.Name != TelemetryName {
		t.Errorf("telemetry %+v", tel)
	}

	// Rollback: the refused apply changed nothing, so a new dry run plans
	// the same drift; apply it for real, then the session cannot begin.
	s.beginErr = nil
	out, err = applyAll(t, r, dryRun(t, r), false)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	calls := len(r.handlers.calls)
	s.beginErr = errors.New("LEASE_HELD")
	ro, err := r.wf.Rollback(context.Background(), out, "ada")
	if CodeOf(err) != ResultLeaseUnavailable || ro.Code != ResultLeaseUnavailable || len(ro.RolledBack) != 0 {
		t.Fatalf("rollback: %v %+v", err, ro)
	}
	if len(r.handlers.calls) != calls {
		t.Fatalf("a refused rollback reverted: %v", r.handlers.calls[calls:])
	}
}

// beginRunning is a session whose Begin first runs another apply to its
// end: the interleaving of two managers executing one approval at once,
// made deterministic (this run passed every guard before the other began).
type beginRunning struct {
	other func()
}

func (s *beginRunning) Begin(ctx context.Context, _, _ string) (context.Context, func(), error) {
	s.other()
	return ctx, func() {}, nil
}

// TestSession_APlanAppliedMeanwhileIsRefusedUnderTheLease: run B passes
// every guard on its fresh read; before it gets the lease, run A applies
// the same plan. Under the lease B finds A's applied run (AppliedPlans) and
// is refused plan_stale: no handler call, no journal entry of its own, a
// refused audit record per action. Once A is rolled back, the plan may be
// applied again.
func TestSession_APlanAppliedMeanwhileIsRefusedUnderTheLease(t *testing.T) {
	r := newRig(drifted())
	p := dryRun(t, r)
	ctx := context.Background()
	a := *r.wf // the other manager: same database, no session of its own
	var outA *Outcome
	r.wf.Session = &beginRunning{other: func() {
		var err error
		if outA, err = a.Apply(ctx, p, ApplyOptions{Principal: "ada", Confirm: p.PlanID, CorrelationID: "run-a"}); err != nil {
			t.Fatalf("run A: %v", err)
		}
	}}
	outB, err := r.wf.Apply(ctx, p, ApplyOptions{Principal: "ada", Confirm: p.PlanID, CorrelationID: "run-b"})
	if CodeOf(err) != ResultPlanStale || outB.Code != ResultPlanStale {
		t.Fatalf("run B: %v (%s), want plan_stale", err, outB.Code)
	}
	if n := len(outA.Selected); n == 0 || len(outA.Applied) != n || len(r.handlers.calls) != n {
		t.Fatalf("run A selected %d, applied %d, handlers called %d times (%v): want all the same", n, len(outA.Applied), len(r.handlers.calls), r.handlers.calls)
	}
	for _, e := range r.journal.entries {
		if e.CorrelationID != "run-a" {
			t.Fatalf("journal entry of run B: %+v", e)
		}
	}
	refused := 0
	for _, rec := range r.audit.records {
		if rec.CorrelationID == "run-b" && rec.Outcome == AuditRefused && rec.Code == ResultPlanStale {
			refused++
		} else if rec.CorrelationID == "run-b" {
			t.Fatalf("audit record of run B: %+v", rec)
		}
	}
	if refused != len(p.Actions) {
		t.Fatalf("%d refused audit records of run B, want one per action of the plan (%d)", refused, len(p.Actions))
	}

	// A rolled back: its plan holds again and may be applied again.
	r.wf.Session = nil
	if _, err := r.wf.Rollback(ctx, outA, "ada"); err != nil {
		t.Fatalf("rollback of run A: %v", err)
	}
	if _, err := r.wf.Apply(ctx, p, ApplyOptions{Principal: "ada", Confirm: p.PlanID, CorrelationID: "run-c"}); err != nil {
		t.Fatalf("the plan again after its run was rolled back: %v", err)
	}
}

// TestSession_ARunRolledBackMeanwhileIsNotRevertedAgain: two rollbacks of
// one run (two managers executing one spec.rollback) both pass their
// checks; before the second gets the lease, the first reverts every
// action. Under the lease the second finds nothing of the run still
// applied (JournalReader, StillApplied) and is refused nothing_selected: no revert, no
// journal entry, no audit record of a second revert (only its refusal's).
func TestSession_ARunRolledBackMeanwhileIsNotRevertedAgain(t *testing.T) {
	r := newRig(drifted())
	p := dryRun(t, r)
	ctx := context.Background()
	out, err := r.wf.Apply(ctx, p, ApplyOptions{Principal: "ada", Confirm: p.PlanID, CorrelationID: "run-a"})
	if err != nil {
		t.Fatal(err)
	}
	first := *r.wf
	second := *r.wf
	outFirst := *out
	second.Session = &beginRunning{other: func() {
		if _, err := first.Rollback(ctx, &outFirst, "ada"); err != nil {
			t.Fatalf("the first rollback: %v", err)
		}
	}}
	calls, journaled, audited := len(r.handlers.calls), len(r.journal.entries), len(r.audit.records)
	outSecond := *out
	ro, err := second.Rollback(ctx, &outSecond, "ada")
	if CodeOf(err) != ResultNothingSelected || ro.Code != ResultNothingSelected || len(ro.RolledBack) != 0 {
		t.Fatalf("the second rollback: %v (%+v), want nothing_selected with nothing rolled back", err, ro)
	}
	n := len(out.Applied)
	if got := len(r.handlers.calls) - calls; got != n {
		t.Fatalf("%d handler calls (%v), want the first rollback's %d reverts only", got, r.handlers.calls[calls:], n)
	}
	if got := len(r.journal.entries) - journaled; got != n {
		t.Fatalf("%d journal entries, want the first rollback's %d", got, n)
	}
	byOutcome := map[string]int{}
	for _, rec := range r.audit.records[audited:] {
		byOutcome[rec.Outcome]++
		if rec.Outcome == AuditRefused && rec.Code != ResultNothingSelected {
			t.Errorf("the second rollback's refusal is audited as %s, want nothing_selected", rec.Code)
		}
	}
	if byOutcome[AuditReverted] != n || byOutcome[AuditRefused] != n || len(byOutcome) != 2 {
		t.Fatalf("audit records %v, want the first rollback's %d reverted and the second's %d refused", byOutcome, n, n)
	}
}
