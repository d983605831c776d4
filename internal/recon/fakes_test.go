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
	"sync"
	"time"
)

// In-memory fakes of the interfaces: this package is pure, the store-backed
// implementations come later. The world is a snapshot the provider serves
// and the handlers write, so apply → verify runs end to end.

type call struct {
	op string // apply | revert
	id string
}

type fakeWorld struct {
	mu      sync.Mutex
	snap    *Snapshot
	readErr []error // per read, in order; nil entries succeed
	reads   int
	nilSnap bool
}

func (w *fakeWorld) Read(ctx context.Context, scope string) (*Snapshot, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.reads
	w.reads++
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n < len(w.readErr) && w.readErr[n] != nil {
		return nil, w.readErr[n]
	}
	if w.nilSnap {
		return nil, nil
	}
	return w.snap, nil
}

// fakeHandlers applies actions to the world's snapshot and records calls.
type fakeHandlers struct {
	world     *fakeWorld
	calls     []call
	failApply map[string]error
	failRev   map[string]error
	swallow   map[string]bool // "applied" without writing
	onApply   func(a Action)
}

func (h *fakeHandlers) handler(noRevert bool) Handler {
	f := HandlerFuncs{
		ApplyFunc: func(ctx context.Context, a Action) error {
			h.calls = append(h.calls, call{"apply", a.ID})
			if h.onApply != nil {
				h.onApply(a)
			}
			if err := h.failApply[a.ID]; err != nil {
				return err
			}
			if !h.swallow[a.ID] {
				h.write(a, a.After)
			}
			return nil
		},
	}
	if !noRevert {
		f.RevertFunc = func(ctx context.Context, a Action) error {
			h.calls = append(h.calls, call{"revert", a.ID})
			if err := h.failRev[a.ID]; err != nil {
				return err
			}
			h.write(a, a.Before)
			return nil
		}
	}
	return f
}

// write puts values into the world for the kinds the tests use.
func (h *fakeHandlers) write(a Action, v Fields) {
	s := h.world.snap
	switch a.Kind {
	case ActionRederivePosition, ActionAdoptSourceOpening:
		p := s.pos(a.Target["account"], a.Target["instrument"])
		p.Quantity, p.AvgCost = d(v["quantity"]), d(v["avg_cost"])
		p.OpeningQuantity, p.OpeningAvgCost = d(v["opening_quantity"]), d(v["opening_avg_cost"])
		p.OpeningProven = v["opening_proven"] == "true"
	case ActionRewriteOrderVersion:
		var version int64
		fmt.Sscan(a.Target["version"], &version)
		e := s.event(a.Target["order_id"], version)
		e.Remaining = d(v["remaining"])
	case ActionRepublish:
		for i := range s.SQL.Outbox {
			if o := &s.SQL.Outbox[i]; o.MsgID == a.Target["msg_id"] {
				if v["published"] == "true" {
					at := s.Now
					o.SentAt = &at
				} else {
					o.SentAt = nil
				}
			}
		}
	}
}

func (h *fakeHandlers) count(op string) int {
	n := 0
	for _, c := range h.calls {
		if c.op == op {
			n++
		}
	}
	return n
}

type fakeJournal struct {
	entries []JournalEntry
	failAt  map[int]error // entry seq -> error
}

func (j *fakeJournal) Append(ctx context.Context, e JournalEntry) error {
	if err := j.failAt[e.Seq]; err != nil {
		return err
	}
	j.entries = append(j.entries, e)
	return nil
}

// AppliedBy: the first run of planID with an applied action its run has
// not reverted (AppliedPlans).
func (j *fakeJournal) AppliedBy(ctx context.Context, scope, planID string) (string, error) {
	for _, e := range j.entries {
		if e.Scope != scope || e.PlanID != planID {
			continue
		}
		if run, _ := j.Entries(ctx, e.CorrelationID); len(StillApplied(run)) > 0 {
			return e.CorrelationID, nil
		}
	}
	return "", nil
}

// Entries: one run's entries in order (JournalReader).
func (j *fakeJournal) Entries(_ context.Context, correlationID string) ([]JournalEntry, error) {
	var run []JournalEntry
	for _, e := range j.entries {
		if e.CorrelationID == correlationID {
			run = append(run, e)
		}
	}
	return run, nil
}

type fakeAuditor struct{ records []AuditRecord }

func (a *fakeAuditor) Audit(ctx context.Context, r AuditRecord) error {
	a.records = append(a.records, r)
	return nil
}

func (a *fakeAuditor) outcomes() map[string]int {
	m := map[string]int{}
	for _, r := range a.records {
		m[r.Outcome]++
	}
	return m
}

type fakeRuns struct{ saved []Run }

func (f *fakeRuns) Save(ctx context.Context, r Run) error {
	f.saved = append(f.saved, r)
	return nil
}

// allowOnly is a Permission that knows one principal.
func allowOnly(principal string) Permission {
	return PermissionFunc(func(ctx context.Context, p string) (bool, error) {
		switch p {
		case principal:
			return true, nil
		case "broken":
			return true, errors.New("subject access review unavailable")
		}
		return false, nil
	})
}

// rig is a workflow over the fakes with a settable clock.
type rig struct {
	wf       *Workflow
	world    *fakeWorld
	handlers *fakeHandlers
	journal  *fakeJournal
	audit    *fakeAuditor
	now      time.Time
}

func newRig(s *Snapshot, noRevert ...ActionKind) *rig {
	r := &rig{world: &fakeWorld{snap: s}, journal: &fakeJournal{}, audit: &fakeAuditor{}, now: fxNow}
	r.handlers = &fakeHandlers{world: r.world, failApply: map[string]error{}, failRev: map[string]error{}, swallow: map[string]bool{}}
	hs := Handlers{}
	skip := map[ActionKind]bool{}
	for _, k := range noRevert {
		skip[k] = true
	}
	for _, spec := range ActionSpecs {
		hs[spec.Kind] = r.handlers.handler(skip[spec.Kind])
	}
	r.wf = &Workflow{Provider: r.world, Handlers: hs, Permission: allowOnly("ada"), Journal: r.journal, Auditor: r.audit,
		Clock: func() time.Time { return r.now }, StaleAfter: 5 * time.Minute}
	return r
}
