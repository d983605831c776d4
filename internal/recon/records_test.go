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
	"testing"
)

// failingAuditor refuses the records whose outcome is in fail.
type failingAuditor struct {
	fakeAuditor
	fail map[string]bool
}

func (a *failingAuditor) Audit(ctx context.Context, r AuditRecord) error {
	if a.fail[r.Outcome] {
		return errors.New("audit trail unavailable")
	}
	return a.fakeAuditor.Audit(ctx, r)
}

// TestApply_LostAuditRecordFailsTheApply: a handler without a transaction
// (every fake) leaves the records to the workflow; when the applied record
// cannot be written the apply is repair_failed, the written action is
// reverted with the others, and nothing reads ok with a record missing.
func TestApply_LostAuditRecordFailsTheApply(t *testing.T) {
	r := newRig(drifted())
	aud := &failingAuditor{fail: map[string]bool{AuditApplied: true}}
	r.wf.Auditor = aud
	p := dryRun(t, r)
	out, err := applyAll(t, r, p, false)
	if CodeOf(err) != ResultRepairFailed || out.Code != ResultRepairFailed {
		t.Fatalf("apply with the audit trail refusing applied records: %v (%s), want repair_failed", err, out.Code)
	}
	if out.FailedAction == nil || len(out.Applied) != 0 || len(out.RolledBack) != 1 || out.RolledBack[0].ID != out.FailedAction.ID {
		t.Fatalf("outcome %+v: want the first action failed, reverted, nothing applied", out)
	}
	var journal []string
	for _, e := range r.journal.entries {
		journal = append(journal, fmt.Sprintf("%d %s", e.Seq, e.Event))
	}
	if want := []string{"1 applied", "2 reverted"}; !eq(journal, want) {
		t.Fatalf("journal %v, want %v", journal, want)
	}
	if got := aud.outcomes(); got[AuditReverted] != 1 || got[AuditApplied] != 0 {
		t.Fatalf("audit %v, want the revert recorded", got)
	}
}

// TestApply_LostRefusalOfASkippedActionStopsBeforeAnyWrite: the records of
// the actions left out are written first; one lost stops the run with
// nothing written.
func TestApply_LostRefusalOfASkippedActionStopsBeforeAnyWrite(t *testing.T) {
	r := newRig(drifted())
	r.wf.Auditor = &failingAuditor{fail: map[string]bool{AuditRefused: true}}
	p := dryRun(t, r)
	out, err := applyAll(t, r, p, false) // republish is left out
	if CodeOf(err) != ResultRepairFailed || len(out.Applied) != 0 || len(r.handlers.calls) != 0 || len(r.journal.entries) != 0 {
		t.Fatalf("apply: %v, %d applied, calls %v, %d journal entries: want repair_failed with nothing written",
			err, len(out.Applied), r.handlers.calls, len(r.journal.entries))
	}
}

// recordingHandler writes the step's records "in its transaction" (here:
// straight into the fakes) and marks them written, as reconstore's
// handlers do; the workflow must then write neither again.
func TestApply_RecordsWrittenByTheHandlerAreNotWrittenAgain(t *testing.T) {
	r := newRig(drifted())
	p := dryRun(t, r)
	for kind, h := range r.wf.Handlers {
		inner := h.(HandlerFuncs)
		r.wf.Handlers[kind] = HandlerFuncs{
			ApplyFunc: func(ctx context.Context, a Action) error {
				if err := inner.ApplyFunc(ctx, a); err != nil {
					return err
				}
				rec := StepRecordsFrom(ctx)
				if rec == nil || rec.Entry.Action.ID != a.ID || rec.Audit.ActionID != a.ID || rec.Audit.Outcome != AuditApplied {
					return fmt.Errorf("no step records for %s: %+v", a.ID, rec)
				}
				_ = r.journal.Append(ctx, rec.Entry)
				_ = r.audit.Audit(ctx, rec.Audit)
				rec.MarkWritten()
				return nil
			},
			RevertFunc: inner.RevertFunc,
		}
	}
	out, err := applyAll(t, r, p, false)
	if err != nil || len(out.Applied) != 2 {
		t.Fatalf("apply: %v", err)
	}
	var journal []string
	for _, e := range r.journal.entries {
		journal = append(journal, fmt.Sprintf("%d %s %s", e.Seq, e.Event, e.Action.ID))
	}
	want := []string{"1 applied " + out.Applied[0].ID, "2 applied " + out.Applied[1].ID}
	if !eq(journal, want) {
		t.Fatalf("journal %v, want %v (each entry once)", journal, want)
	}
	if got := r.audit.outcomes(); got[AuditApplied] != 2 {
		t.Fatalf("audit %v, want each applied action once", got)
	}
}

// failingSession refuses to begin (the lease is held).
type failingSession struct{}

func (failingSession) Begin(context.Context, string, string) (context.Context, func(), error) {
	return nil, nil, errors.New("LEASE_HELD")
}

// TestRollback_RefusalsAreAudited: every refusal of a rollback, like an
// apply's, leaves a refused record with its code on each applied action
// of the run.
func TestRollback_RefusalsAreAudited(t *testing.T) {
	for _, c := range []struct {
		name string
		code ResultCode
		edit func(r *rig, o *Outcome) string // returns the principal
	}{
		{"denied", ResultRepairDenied, func(*rig, *Outcome) string { return "mallory" }},
		{"a failed apply", ResultNothingSelected, func(_ *rig, o *Outcome) string { o.Code = ResultRepairFailed; return "ada" }},
		{"no revert", ResultHandlerMissing, func(r *rig, _ *Outcome) string {
			r.wf.Handlers[ActionRewriteOrderVersion] = HandlerFuncs{ApplyFunc: func(context.Context, Action) error { return nil }}
			return "ada"
		}},
		{"lease held", ResultLeaseUnavailable, func(r *rig, _ *Outcome) string { r.wf.Session = failingSession{}; return "ada" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(drifted())
			p := dryRun(t, r)
			out, err := applyAll(t, r, p, false)
			if err != nil {
				t.Fatal(err)
			}
			before := len(r.audit.records)
			principal := c.edit(r, out)
			ro, err := r.wf.Rollback(context.Background(), out, principal)
			if CodeOf(err) != c.code || ro.Code != c.code {
				t.Fatalf("rollback: %v, want %s", err, c.code)
			}
			got := r.audit.records[before:]
			if len(got) != len(out.Applied) {
				t.Fatalf("%d audit records of the refusal, want one per applied action (%d)", len(got), len(out.Applied))
			}
			for i, rec := range got {
				if rec.Outcome != AuditRefused || rec.Code != c.code || rec.ActionID != out.Applied[i].ID || rec.Principal != principal {
					t.Errorf("record %d: %s %s %s by %q, want refused %s %s by %q", i, rec.Outcome, rec.Code, rec.ActionID, rec.Principal,
						c.code, out.Applied[i].ID, principal)
				}
			}
		})
	}
}

// TestRollback_IrreversibleLeftIsPartial: a rollback that leaves an
// irreversible action in place says so (partial, never ok) and names it
// with its rollback text; revert failures are listed after it.
func TestRollback_IrreversibleLeftIsPartial(t *testing.T) {
	r := newRig(drifted())
	p := dryRun(t, r)
	out, err := applyAll(t, r, p, true)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := r.wf.Rollback(context.Background(), out, "ada")
	if CodeOf(err) != ResultPartial || ro.Code != ResultPartial || len(ro.RolledBack) != 2 {
		t.Fatalf("rollback: %v (%+v), want partial with two reverted", err, ro)
	}
	left := ro.Left()
	if len(left) != 1 || left[0].ID != idRepublish || left[0].Kind != ActionRepublish || left[0].Rollback == "" || left[0].Rollback != p.Action(idRepublish).Rollback {
		t.Fatalf("left %+v, want the republish with its rollback text", left)
	}

	// A revert failure is repair_failed and is left too, after the manual ones.
	r2 := newRig(drifted())
	p2 := dryRun(t, r2)
	o2x, err := applyAll(t, r2, p2, true)
	if err != nil {
		t.Fatal(err)
	}
	r2.handlers.failRev[idRewrite] = errors.New("database went away")
	ro2, err := r2.wf.Rollback(context.Background(), o2x, "ada")
	if CodeOf(err) != ResultRepairFailed {
		t.Fatalf("rollback with a failing revert: %v, want repair_failed", err)
	}
	left2 := ro2.Left()
	if len(left2) != 2 || left2[0].ID != idRepublish || left2[1].ID != idRewrite || left2[1].Error == "" {
		t.Fatalf("left %+v, want the republish then the failed rewrite with its error", left2)
	}
}
