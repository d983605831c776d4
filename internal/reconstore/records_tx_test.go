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

	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// crashed is the panic a crash hook raises: the manager dies there, so
// nothing the workflow would do next (journal, audit, revert) runs; what a
// deferred ROLLBACK or a dropped connection undoes is undone.
type crashed struct{}

// crashAt runs fn and recovers the crash it must hit.
func crashAt(t *testing.T, fn func()) {
	t.Helper()
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("the injected crash was never reached")
		} else if _, ok := r.(crashed); !ok {
			panic(r)
		}
	}()
	fn()
}

// runRecords counts a run's journal entries and audit records by state.
func (s *scene) runRecords(correlationID string) (journal, audit map[string]int) {
	s.t.Helper()
	journal, audit = map[string]int{}, map[string]int{}
	entries, err := s.wf.Journal().Entries(ctxb, correlationID)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, e := range entries {
		journal[e.Event]++
	}
	recs, err := s.wf.Audit().Records(ctxb, correlationID)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, r := range recs {
		audit[r.Outcome]++
	}
	return journal, audit
}

// TestRecords_CommitWithTheRepair: a crash injected between a repair's
// write and its journal entry, or between the entry and its audit record,
// against real PostgreSQL: either the write and both records committed,
// or none of them did. Before, the write committed on its own and the
// records followed in separate statements: the crash left a repaired row
// no journal or audit record holds, which no rollback can find. The
// approval is then applied again, once, with its records.
func TestRecords_CommitWithTheRepair(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		arm  func(w *Runner, crash func(context.Context))
	}{
		{"before the journal entry", func(w *Runner, crash func(context.Context)) { w.journal.beforeInsert = crash }},
		{"before the audit record", func(w *Runner, crash func(context.Context)) { w.audit.beforeInsert = crash }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newScene(t, "venue-crash-"+strings.ReplaceAll(c.name, " ", "-"), sceneOpts{})
			breakages[1].corrupt(s) // UNEXPLAINED_BALANCE: rederive_position
			d := s.dryRun()
			pre := s.dump(false)
			armed := true
			c.arm(s.wf, func(context.Context) {
				if armed {
					armed = false
					panic(crashed{})
				}
			})
			opt := recon.ApplyOptions{Principal: approver, Confirm: d.Plan.PlanID, CorrelationID: "crashed-run"}
			crashAt(t, func() { _, _ = s.wf.Apply(ctxb, d.Plan, opt) })
			s.wf.journal.beforeInsert, s.wf.audit.beforeInsert = nil, nil

			written := len(sameDump(s.dump(false), pre)) > 0
			journal, audit := s.runRecords(opt.CorrelationID)
			recorded := journal[recon.JournalApplied] == 1 && audit[recon.AuditApplied] == 1
			none := len(journal) == 0 && len(audit) == 0
			if !(written && recorded) && !(!written && none) {
				t.Fatalf("after the crash: the write is there: %v; journal %v, audit %v: want the write and both records, or none", written, journal, audit)
			}
			if written {
				t.Fatalf("the crash before COMMIT left the write in place (journal %v, audit %v)", journal, audit)
			}

			// After the restart the approval is applied once, with its records.
			w := s.freshRunner()
			o, err := w.Apply(ctxb, d.Plan, recon.ApplyOptions{Principal: approver, Confirm: d.Plan.PlanID, CorrelationID: "after-restart"})
			if err != nil || len(o.Applied) != 1 || len(sameDump(s.dump(false), pre)) == 0 {
				t.Fatalf("apply after the restart: %v %+v", err, o)
			}
			s.records(o, 1, 0)
		})
	}
}

// TestRecords_RollbackRefusalsAreAudited: a rollback refused for the
// lease (the recovery worker holds it) or for its scope leaves a refused
// record with its code on each applied action of the run, like an apply's
// refusals; it reverts nothing.
func TestRecords_RollbackRefusalsAreAudited(t *testing.T) {
	t.Parallel()
	s := newScene(t, "venue-refused-rollback", sceneOpts{})
	breakages[1].corrupt(s)
	d := s.dryRun()
	o := s.apply(d, breakages[1])
	applied := s.dump(false)
	count := func() map[recon.ResultCode]int {
		recs, err := s.wf.Audit().Records(ctxb, o.CorrelationID)
		if err != nil {
			t.Fatal(err)
		}
		n := map[recon.ResultCode]int{}
		for _, r := range recs {
			if r.Outcome == recon.AuditRefused {
				n[r.Code]++
			}
		}
		return n
	}
	if ro, err := s.wf.RollbackRun(ctxb, "another-venue", o.CorrelationID, approver, 0); recon.CodeOf(err) != recon.ResultNothingSelected || len(ro.RolledBack) != 0 {
		t.Fatalf("rollback through another scope: %v %+v", err, ro)
	}
	if n := count(); n[recon.ResultNothingSelected] != 1 {
		t.Fatalf("refused records %v, want the other scope's refusal audited", n)
	}
	if _, err := s.rec.AcquireLease(ctxb, s.scope, workerOwner, time.Minute); err != nil {
		t.Fatal(err)
	}
	if ro, err := s.wf.RollbackRun(ctxb, s.scope, o.CorrelationID, approver, 0); recon.CodeOf(err) != recon.ResultLeaseUnavailable || len(ro.RolledBack) != 0 {
		t.Fatalf("rollback while the worker holds the lease: %v %+v", err, ro)
	}
	if n := count(); n[recon.ResultLeaseUnavailable] != 1 {
		t.Fatalf("refused records %v, want the lease refusal audited", n)
	}
	if diff := sameDump(s.dump(false), applied); len(diff) != 0 {
		t.Fatalf("a refused rollback wrote: %v", diff)
	}
}
