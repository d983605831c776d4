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
	"strings"
	"testing"
	"time"
)

func applyAll(t *testing.T, r *rig, p *Plan, irreversible bool) (*Outcome, error) {
	t.Helper()
	return r.wf.Apply(context.Background(), p, ApplyOptions{Principal: "ada", Confirm: p.PlanID, AllowIrreversible: irreversible, CorrelationID: "corr-1"})
}

func ids(as []Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}

func TestApply_SuccessVerifies(t *testing.T) {
	r := newRig(drifted())
	p := dryRun(t, r)
	out, err := applyAll(t, r, p, true)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if got := strings.Join(ids(out.Applied), ","); got != idRewrite+","+idRederive+","+idRepublish {
		t.Fatalf("applied in plan order: %s", got)
	}
	if !out.VerificationRan || len(out.StillDrifting) != 0 || len(out.Verified) != 3 {
		t.Fatalf("verification: ran=%v verified=%v still=%v", out.VerificationRan, out.Verified, out.StillDrifting)
	}
	if len(r.journal.entries) != 3 || r.journal.entries[0].Event != JournalApplied || r.journal.entries[2].Seq != 3 ||
		r.journal.entries[0].CorrelationID != "corr-1" {
		t.Errorf("journal: %+v", r.journal.entries)
	}
	if oc := r.audit.outcomes(); oc[AuditApplied] != 3 || len(r.audit.records) != 3 {
		t.Errorf("audit: %v", oc)
	}
	for _, rec := range r.audit.records {
		if rec.Before == nil || rec.After == nil || rec.CorrelationID != "corr-1" || rec.Principal != "ada" {
			t.Errorf("audit record lacks context: %+v", rec)
		}
	}
	if tel := out.Telemetry; tel.Name != TelemetryName || tel.Applied != 3 || tel.Verified != 3 || tel.Code != "" {
		t.Errorf("telemetry: %+v", tel)
	}
	// The world is clean now.
	if rep := mustDetect(t, r.world.snap); len(rep.Findings) != 0 {
		t.Errorf("still drifting after apply:%s", joinLines(summary(rep)))
	}
}

func TestApply_IrreversibleNeedsOptIn(t *testing.T) {
	r := newRig(drifted())
	p := dryRun(t, r)
	out, err := applyAll(t, r, p, false)
	if err != nil || len(out.Applied) != 2 {
		t.Fatalf("apply: %v %v", err, ids(out.Applied))
	}
	for _, c := range r.handlers.calls {
		if c.id == idRepublish {
			t.Fatal("irreversible action applied without opt-in")
		}
	}
	if oc := r.audit.outcomes(); oc[AuditRefused] != 1 || oc[AuditApplied] != 2 {
		t.Errorf("the skipped action is audited as refused: %v", oc)
	}
}

func TestApply_OnlySubset(t *testing.T) {
	r := newRig(drifted())
	p := dryRun(t, r)
	out, err := r.wf.Apply(context.Background(), p, ApplyOptions{Principal: "ada", Confirm: p.PlanID, Only: []string{idRederive, "rederive_position:typo"}})
	if err != nil || len(out.Applied) != 1 || out.Applied[0].ID != idRederive {
		t.Fatalf("apply only: %v %v", err, ids(out.Applied))
	}
	if len(out.Ignored) != 1 || out.Ignored[0] != "rederive_position:typo" {
		t.Errorf("ignored: %v", out.Ignored)
	}
	if oc := r.audit.outcomes(); oc[AuditRefused] != 2 || oc[AuditApplied] != 1 {
		t.Errorf("audit: %v", oc)
	}
}

func TestApply_SwallowedWriteIsStillDrifting(t *testing.T) {
	r := newRig(drifted())
	p := dryRun(t, r)
	r.handlers.swallow[idRederive] = true
	out, err := applyAll(t, r, p, false)
	if err != nil || !out.VerificationRan || len(out.StillDrifting) != 1 || !strings.HasPrefix(out.StillDrifting[0], "position.derivation_agrees@") {
		t.Fatalf("swallowed write: %v %+v", err, out)
	}
}

func TestApply_VerificationReadFails(t *testing.T) {
	r := newRig(drifted())
	p := dryRun(t, r)
	// reads: 1 dry run, 2 re-check, 3 verification
	r.world.readErr = []error{nil, nil, errors.New("database down")}
	out, err := applyAll(t, r, p, false)
	if err != nil || out.VerificationRan || len(out.Applied) != 2 || len(out.Verified)+len(out.StillDrifting) != 0 {
		t.Fatalf("verification failure: %v %+v", err, out)
	}
}

func TestApply_FailureRollsBackNewestFirst(t *testing.T) {
	for _, c := range []struct {
		name           string
		prep           func(r *rig)
		rolledBack     []string
		rollbackFailed []string
	}{
		{"second action fails: the first is reverted",
			func(r *rig) { r.handlers.failApply[idRederive] = errors.New("deadlock") },
			[]string{idRewrite}, nil},
		{"third action fails: both reverted newest-first",
			func(r *rig) { r.handlers.failApply[idRepublish] = errors.New("nats down") },
			[]string{idRederive, idRewrite}, nil},
		{"a revert fails too: it stays, the rest continue",
			func(r *rig) {
				r.handlers.failApply[idRepublish] = errors.New("nats down")
				r.handlers.failRev[idRederive] = errors.New("lease lost")
			},
			[]string{idRewrite}, []string{idRederive}},
		{"journaling fails: the unjournaled write is reverted with the others",
			func(r *rig) { r.journal.failAt = map[int]error{2: errors.New("journal full")} },
			[]string{idRederive, idRewrite}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(drifted())
			p := dryRun(t, r)
			c.prep(r)
			out, err := applyAll(t, r, p, true)
			if CodeOf(err) != ResultRepairFailed || out.Code != ResultRepairFailed || out.FailedAction == nil {
				t.Fatalf("code %q outcome %+v", CodeOf(err), out)
			}
			if got := strings.Join(ids(out.RolledBack), ","); got != strings.Join(c.rolledBack, ",") {
				t.Errorf("rolled back %s, want %s", got, strings.Join(c.rolledBack, ","))
			}
			var failed []string
			for _, f := range out.RollbackFailed {
				failed = append(failed, f.Action.ID)
			}
			if strings.Join(failed, ",") != strings.Join(c.rollbackFailed, ",") {
				t.Errorf("rollback failed %v, want %v", failed, c.rollbackFailed)
			}
			if len(out.Applied) > 0 && out.VerificationRan {
				t.Error("a failed apply does not verify")
			}
			// Every reverted record is back to what the dry run saw.
			if len(c.rollbackFailed) == 0 {
				if rep := mustDetect(t, r.world.snap); strings.Join(summary(rep), ",") != strings.Join(summary(mustDetect(t, drifted())), ",") {
					t.Errorf("world not restored:%s", joinLines(summary(rep)))
				}
			}
			if oc := r.audit.outcomes(); oc[AuditFailed] != 1 || oc[AuditReverted] != len(c.rolledBack) || oc[AuditRevertFailed] != len(c.rollbackFailed) {
				t.Errorf("audit outcomes: %v", oc)
			}
			if tel := out.Telemetry; tel.Code != ResultRepairFailed || tel.RolledBack != len(c.rolledBack) {
				t.Errorf("telemetry: %+v", tel)
			}
		})
	}
}

// TestApply_IrreversibleCannotBeRolledBack: an irreversible action applied
// before a failure cannot be reverted: it is reported in RollbackFailed
// with its rollback text, never silently counted as rolled back.
func TestApply_IrreversibleCannotBeRolledBack(t *testing.T) {
	s := fixture(fxCmds)
	s.SQL.Cursor.State, s.SQL.Cursor.UpdatedAt = StateCatchingUp, fxNow.Add(-20*time.Minute)
	s.Scopes[0].State, s.Scopes[0].UpdatedAt = StateCatchingUp, fxNow.Add(-20*time.Minute)
	s.SQL.Lease.ExpiresAt, s.SQL.Lease.RenewedAt = fxNow.Add(-10*time.Minute), fxNow.Add(-11*time.Minute)
	r := newRig(s)
	res, err := r.wf.DryRun(context.Background(), fxScope)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Plan
	release, trigger := "release_lease:projection_catchup_lease/scope="+fxScope, "trigger_cycle:projection_catchup_cursor/scope="+fxScope
	if got := strings.Join(ids(p.Actions), ","); got != release+","+trigger {
		t.Fatalf("plan: %s", got)
	}
	r.handlers.failApply[trigger] = errors.New("queue unavailable")
	out, err := r.wf.Apply(context.Background(), p, ApplyOptions{Principal: "ada", Confirm: p.PlanID, AllowIrreversible: true})
	if CodeOf(err) != ResultRepairFailed || out.FailedAction.ID != trigger || len(out.RolledBack) != 0 ||
		len(out.RollbackFailed) != 1 || out.RollbackFailed[0].Action.ID != release || !strings.Contains(out.RollbackFailed[0].Error, "irreversible") {
		t.Fatalf("outcome: %v %+v", err, out)
	}
	if r.handlers.count("revert") != 0 {
		t.Fatalf("an irreversible action was 'reverted': %v", r.handlers.calls)
	}
}

func TestApply_CancelledMidRunStillRollsBack(t *testing.T) {
	r := newRig(drifted())
	p := dryRun(t, r)
	ctx, cancel := context.WithCancel(context.Background())
	r.handlers.onApply = func(a Action) {
		if a.ID == idRewrite {
			cancel()
		}
	}
	out, err := r.wf.Apply(ctx, p, ApplyOptions{Principal: "ada", Confirm: p.PlanID})
	if CodeOf(err) != ResultRepairFailed || out.FailedAction == nil || out.FailedAction.ID != idRederive ||
		len(out.RolledBack) != 1 || out.RolledBack[0].ID != idRewrite {
		t.Fatalf("cancelled apply: %v %+v", err, out)
	}
	if r.handlers.count("apply") != 1 || r.handlers.count("revert") != 1 {
		t.Fatalf("calls: %v", r.handlers.calls)
	}
}

func TestRollback_ReversesASuccessfulApply(t *testing.T) {
	r := newRig(drifted())
	p := dryRun(t, r)
	out, err := applyAll(t, r, p, true)
	if err != nil {
		t.Fatal(err)
	}
	r.handlers.calls = nil
	ro, err := r.wf.Rollback(context.Background(), out, "ada")
	// The republish stays in place: partial, never ok.
	if CodeOf(err) != ResultPartial || ro.Code != ResultPartial {
		t.Fatalf("rollback: %v, want partial", err)
	}
	if got := strings.Join(ids(ro.RolledBack), ","); got != idRederive+","+idRewrite {
		t.Errorf("reverted newest-first: %s", got)
	}
	if len(ro.Manual) != 1 || ro.Manual[0].Action.ID != idRepublish || ro.Manual[0].Rollback == "" {
		t.Errorf("irreversible returned as manual: %+v", ro.Manual)
	}
	// The drift reappears: rollback restores the projection, not the truth
	// (the republish stays: it cannot be unsent).
	rep := mustDetect(t, r.world.snap)
	if rep.ByInvariant[PositionDerivationAgrees] != 1 || rep.ByInvariant[OrderVersionAgrees] != 1 || rep.ByInvariant[OutboxDelivered] != 0 {
		t.Errorf("after rollback:%s", joinLines(summary(rep)))
	}
}

func TestRollback_Guards(t *testing.T) {
	for _, c := range []struct {
		name string
		prep func(r *rig, o *Outcome) (*Outcome, string)
		code ResultCode
	}{
		{"repair_denied", func(r *rig, o *Outcome) (*Outcome, string) { return o, "mallory" }, ResultRepairDenied},
		{"nothing_selected: no outcome", func(r *rig, o *Outcome) (*Outcome, string) { return nil, "ada" }, ResultNothingSelected},
		{"nothing_selected: a failed apply was rolled back already", func(r *rig, o *Outcome) (*Outcome, string) {
			f := *o
			f.Code = ResultRepairFailed
			return &f, "ada"
		}, ResultNothingSelected},
		{"handler_missing", func(r *rig, o *Outcome) (*Outcome, string) {
			r.wf.Handlers[ActionRederivePosition] = r.handlers.handler(true)
			return o, "ada"
		}, ResultHandlerMissing},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(drifted())
			p := dryRun(t, r)
			out, err := applyAll(t, r, p, false)
			if err != nil {
				t.Fatal(err)
			}
			r.handlers.calls = nil
			o, who := c.prep(r, out)
			if _, err := r.wf.Rollback(context.Background(), o, who); CodeOf(err) != c.code {
				t.Fatalf("code %q, want %q", CodeOf(err), c.code)
			}
			if len(r.handlers.calls) != 0 {
				t.Fatalf("a refused rollback wrote: %v", r.handlers.calls)
			}
		})
	}
}
