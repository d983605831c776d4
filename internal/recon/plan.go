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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// PlanTTL is how long a plan may be applied after the dry run that made it.
const PlanTTL = 15 * time.Minute

// Action is one repair: its kind, the raw identity its handler needs
// (Target: the record identity plus scope and table), the Before state the
// dry run saw, the After state it will write (nil: the record is removed),
// the lifecycle event when the move is a transition, and how to undo it.
type Action struct {
	ID             string     `json:"id"` // kind:record key; what ApplyOptions.Only names
	Kind           ActionKind `json:"kind"`
	Target         Fields     `json:"target"`
	Before         Fields     `json:"before"`
	After          Fields     `json:"after"`
	LifecycleEvent string     `json:"lifecycleEvent,omitempty"`
	Reversible     bool       `json:"reversible"`
	Risk           Risk       `json:"risk"`
	Rollback       string     `json:"rollback"`
	Findings       []string   `json:"findings"` // the finding ids it resolves
}

// ManualEntry is a finding the planner refused to touch, with the reason.
type ManualEntry struct {
	FindingID string      `json:"findingId"`
	Invariant InvariantID `json:"invariant"`
	Record    string      `json:"record"`
	Reason    string      `json:"reason"`
}

// Plan is a dry-run repair plan. Fingerprint is SHA-256 over the canonical
// JSON of Actions; PlanID binds scope, fingerprint and the two clock fields,
// so an edited plan (actions or expiry) is refused as plan_tampered.
type Plan struct {
	PlanID      string        `json:"planId"`
	Scope       string        `json:"scope"`
	Created     time.Time     `json:"created"`
	Expires     time.Time     `json:"expires"`
	Fingerprint string        `json:"fingerprint"`
	Actions     []Action      `json:"actions"`
	Manual      []ManualEntry `json:"manual"`
}

// Fingerprint is the hex SHA-256 of the canonical JSON of actions (struct
// fields in declaration order, map keys sorted by encoding/json).
func Fingerprint(actions []Action) string {
	if actions == nil {
		actions = []Action{}
	}
	b, err := json.Marshal(actions)
	if err != nil {
		// Fields and primitive fields only: Marshal cannot fail. Never return
		// a fingerprint a tampered plan could match.
		panic(fmt.Sprintf("recon: fingerprint: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// planID derives the plan id from what the approver must not be able to
// change unnoticed.
func planID(scope, fingerprint string, created, expires time.Time) string {
	sum := sha256.Sum256([]byte(scope + "\n" + fingerprint + "\n" + ts(created) + "\n" + ts(expires)))
	return "plan-" + hex.EncodeToString(sum[:16])
}

// PlanRepairs turns a report into a dry-run plan. It is a pure function of
// the report and the snapshot the report was detected from (the snapshot
// answers refusal questions such as "is the lease unexpired"); it writes
// nothing. Every record gets at most ONE action, however many findings it
// has; a record with any refused finding is manual as a whole.
func PlanRepairs(r *Report, s *Snapshot) (*Plan, error) {
	if r == nil || s == nil {
		return nil, errors.New("recon: plan: nil report or snapshot")
	}
	if r.Scope != s.Scope {
		return nil, fmt.Errorf("recon: plan: report of scope %q, snapshot of %q", r.Scope, s.Scope)
	}
	blocked := map[string][]string{}
	groups := map[string][]*Finding{}
	var order []string
	for i := range r.Findings {
		f := &r.Findings[i]
		for _, rk := range f.Related {
			blocked[rk] = append(blocked[rk], string(f.Invariant)+" on "+f.Record.Key())
		}
		k := f.Record.Key()
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], f)
	}
	p := &Plan{Scope: s.Scope, Created: s.Now, Expires: s.Now.Add(PlanTTL), Actions: []Action{}, Manual: []ManualEntry{}}
	for _, k := range order {
		g := groups[k]
		kind := chooseKind(g)
		if reason := refuseGroup(r, s, g, kind, blocked[k]); reason != "" {
			for _, f := range g {
				p.Manual = append(p.Manual, ManualEntry{FindingID: f.ID, Invariant: f.Invariant, Record: k, Reason: reason})
			}
			continue
		}
		p.Actions = append(p.Actions, buildAction(s, g, kind))
	}
	sort.SliceStable(p.Actions, func(i, j int) bool {
		oi, oj := actionOrder[p.Actions[i].Kind], actionOrder[p.Actions[j].Kind]
		if oi != oj {
			return oi < oj
		}
		return p.Actions[i].ID < p.Actions[j].ID
	})
	p.Fingerprint = Fingerprint(p.Actions)
	p.PlanID = planID(p.Scope, p.Fingerprint, p.Created, p.Expires)
	return p, nil
}

// chooseKind: manual if any finding is manual, else the strongest strategy.
func chooseKind(g []*Finding) ActionKind {
	kind, best := ActionKind(""), -1
	for _, f := range g {
		if f.Strategy == StrategyManual {
			return StrategyManual
		}
		if p := precedence[f.Strategy]; p > best {
			kind, best = f.Strategy, p
		}
	}
	return kind
}

// refuseGroup returns why a record must stay manual, "" when it may be
// repaired by an action of kind.
func refuseGroup(r *Report, s *Snapshot, g []*Finding, kind ActionKind, blockedBy []string) string {
	if r.Unlisted > 0 {
		// A finding left out may block this record (a drifting trade blocks
		// its keys' re-derivation): nothing is planned on a partial report.
		return fmt.Sprintf("report truncated: %d more findings are not listed, and any of them may block this repair; fix the bulk drift (or raise the finding cap) and re-run", r.Unlisted)
	}
	if r.SourceReadEmpty {
		return "source_read_empty: the source read holds nothing; the planner touches nothing until the read is fixed"
	}
	for _, f := range g {
		if f.Redacted {
			return "identity redacted: a secret in a key field is a security incident, not a cache repair"
		}
	}
	for _, f := range g {
		if f.ValuesRedacted {
			return "a value was redacted: an action would write the redacted text; a human handles the secret first"
		}
	}
	for _, f := range g {
		if f.Strategy == StrategyManual {
			return "manual (" + string(f.Invariant) + "): " + invariantByID[f.Invariant].RefusedWhen
		}
	}
	for _, f := range g {
		if reason := refuseFinding(r, s, f); reason != "" {
			return string(f.Invariant) + ": " + reason
		}
	}
	if g[0].Record.Table == TablePositions && len(blockedBy) > 0 {
		ev := blockedBy
		if len(ev) > 5 {
			ev = append(append([]string{}, ev[:5]...), fmt.Sprintf("and %d more", len(blockedBy)-5))
		}
		return "fix the key's trades first, then re-plan: " + strings.Join(ev, "; ")
	}
	if _, ok := actionSpecByKind[kind]; !ok {
		return "no strategy " + string(kind) + " is declared"
	}
	return ""
}

// refuseFinding applies each strategy's refusal rule to one finding.
func refuseFinding(r *Report, s *Snapshot, f *Finding) string {
	incomplete := "the source read may be incomplete (" + r.SourceIncompleteReason + "): an absence or a derivation proves nothing"
	switch f.Invariant {
	case TradePresentInSource:
		if !r.SourceComplete {
			return incomplete
		}
	case TradeIdentityUnique:
		if f.Expected == nil {
			return "no row of the group is verified by the source (or the rows share a primary key): a human picks the copy"
		}
		if !r.SourceComplete {
			return incomplete
		}
	case PositionSourceBacked:
		switch f.RootCause.Code {
		case CausePhantomBalance:
		case CauseUnprovenOpeningClaim:
			return "the row claims an opening the source never emitted: a human decides whether an opening event is missing"
		case CauseKeyNotLoaded:
			return "the source knows nothing of the account (key_not_loaded), not a clean source read: re-read it before dropping the row"
		default:
			return "the cause is " + string(f.RootCause.Code) + ", not a clean source read: re-read before dropping anything"
		}
	case PositionDerivationAgrees, PositionBasisAgrees:
		if !r.SourceComplete {
			return incomplete
		}
	case OpeningProven:
		switch f.RootCause.Code {
		case CauseOpeningWithoutSourceEvent:
			return "the source has no opening for the key: a stored flag or seq proves nothing; a human decides"
		case CauseOpeningAfterTrades:
			return "the source opening follows trades of the key (a conflict): a human decides"
		}
		if !r.SourceComplete {
			return incomplete
		}
	case OrderVersionAgrees:
		if f.RootCause.Code == CauseLegacyRow {
			return "legacy history (seq NULL): a human decides"
		}
	case CursorProgress:
		if f.RootCause.Code == CauseManagerNotRunning {
			return "every scope is stale at once (manager_not_running): start the manager; a triggered cycle would never run"
		}
	case LeaseFresh:
		if l := s.SQL.Lease; l == nil || l.ExpiresAt.After(s.Now) {
			until := ""
			if l != nil {
				until = " until " + ts(l.ExpiresAt)
			}
			return "the lease is unexpired" + until + ": its page may still be running"
		}
	case OutboxDelivered, OutboxIdentityUnique:
		if p := s.Publisher; f.Invariant == OutboxDelivered && p != nil && p.Missing != "" {
			return "this manager cannot republish: " + p.Missing + "; the row waits for a manager's publisher with NATS"
		}
		if r.PublisherNotDraining {
			return "the publisher is not draining (publisher_not_draining): fix the publisher first"
		}
		if f.Invariant == OutboxIdentityUnique && f.Expected == nil {
			return "the copies carry different values: a human decides which one stands"
		}
	}
	return ""
}

// buildAction makes the one action of a record group.
func buildAction(s *Snapshot, g []*Finding, kind ActionKind) Action {
	spec := actionSpecByKind[kind]
	first := g[0]
	var by *Finding // the finding whose strategy is the chosen one: it says what to write
	ids := make([]string, len(g))
	for i, f := range g {
		ids[i] = f.ID
		if by == nil && f.Strategy == kind {
			by = f
		}
	}
	target := first.Record.Identity.clone()
	target["scope"], target["table"] = s.Scope, first.Record.Table
	var after Fields
	switch kind {
	case ActionQuarantineTrade:
		after = Fields{"location": "quarantine"}
	case ActionDropPosition:
		after = nil
	case ActionTriggerCycle:
		after = Fields{"cycle": "requested"}
	case ActionRepublish:
		after = Fields{"msg_id": first.Before["msg_id"], "published": "true"}
	default:
		after = by.Expected.clone()
	}
	return Action{ID: string(kind) + ":" + first.Record.Key(), Kind: kind, Target: target, Before: first.Before.clone(), After: after,
		LifecycleEvent: spec.LifecycleEvent, Reversible: spec.Reversible, Risk: spec.Risk, Rollback: spec.Rollback, Findings: ids}
}

// Action returns the plan's action with id, or nil.
func (p *Plan) Action(id string) *Action {
	for i := range p.Actions {
		if p.Actions[i].ID == id {
			return &p.Actions[i]
		}
	}
	return nil
}

// FormatPlan renders a plan as text.
func FormatPlan(p *Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "repair plan %s scope=%s actions=%d manual=%d\n", p.PlanID, p.Scope, len(p.Actions), len(p.Manual))
	fmt.Fprintf(&b, "  created=%s expires=%s fingerprint=%s\n", ts(p.Created), ts(p.Expires), p.Fingerprint)
	for _, a := range p.Actions {
		fmt.Fprintf(&b, "action %s reversible=%t risk=%s\n", a.ID, a.Reversible, a.Risk)
		if a.LifecycleEvent != "" {
			fmt.Fprintf(&b, "  event: %s\n", a.LifecycleEvent)
		}
		fmt.Fprintf(&b, "  before: %s\n  after: %s\n  rollback: %s\n", fieldsText(a.Before), fieldsText(a.After), a.Rollback)
	}
	for _, m := range p.Manual {
		fmt.Fprintf(&b, "manual %s: %s\n", m.FindingID, m.Reason)
	}
	return b.String()
}
