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

// ActionKind is a repair strategy: the kind of an action, and the key its
// handler is registered under. StrategyManual is never an action.
type ActionKind string

// The strategies. The spellings are a contract (plans, audit records,
// handler registrations).
const (
	ActionQuarantineTrade     ActionKind = "quarantine_trade"
	ActionRestoreTrade        ActionKind = "restore_trade"
	ActionRewriteOrderVersion ActionKind = "rewrite_order_version"
	ActionAdoptSourceOpening  ActionKind = "adopt_source_opening"
	ActionRederivePosition    ActionKind = "rederive_position"
	ActionDropPosition        ActionKind = "drop_position"
	ActionReleaseLease        ActionKind = "release_lease"
	ActionTriggerCycle        ActionKind = "trigger_cycle"
	ActionRepublish           ActionKind = "republish"
	ActionCollapse            ActionKind = "collapse"
	// StrategyManual: a human decides; the planner lists the finding in
	// Plan.Manual and never builds an action for it.
	StrategyManual ActionKind = "manual"
)

// Risk of an action.
type Risk string

const (
	RiskLow    Risk = "low"
	RiskMedium Risk = "medium"
	RiskHigh   Risk = "high"
)

// ActionSpec declares a strategy: reversibility, risk, the lifecycle event
// when the move is a transition, the rollback text, and what its handler
// must do. Handlers write under the projection write lock and the scope's
// fenced lease, exactly like a page (internal/store's WithScopeWrite), and
// every position move invalidates the key's derivation basis (restored by
// Revert from Before).
type ActionSpec struct {
	Kind           ActionKind
	Reversible     bool
	Risk           Risk
	LifecycleEvent string
	Rollback       string
	Handler        string
}

// ActionSpecs is the strategy table, in apply order: trades before orders
// before positions (a position is re-derived from fixed inputs), then the
// worker's records.
var ActionSpecs = []ActionSpec{
	{Kind: ActionQuarantineTrade, Reversible: true, Risk: RiskHigh, LifecycleEvent: "trade.quarantined",
		Rollback: "move the row back from the quarantine table into trades, exactly as Before",
		Handler:  "move the trades row (scope, trade_id) equal to Before into the quarantine table; re-plan to re-derive its keys"},
	{Kind: ActionRestoreTrade, Reversible: true, Risk: RiskMedium,
		Rollback: "delete the restored row (scope, trade_id) if it still equals After",
		Handler:  "insert After into trades (written_by recovery) if absent; invalidate the basis of both keys; re-plan to re-derive them"},
	{Kind: ActionRewriteOrderVersion, Reversible: true, Risk: RiskLow,
		Rollback: "write Before back (delete the row when Before is absent)",
		Handler:  "upsert After into the record's table (orders: the current row; order_events: the version)"},
	{Kind: ActionAdoptSourceOpening, Reversible: true, Risk: RiskMedium,
		Rollback: "write the position row and basis of Before back",
		Handler:  "write After (opening from the source event, proven, with the re-derived quantity and average cost); invalidate the key's basis"},
	{Kind: ActionRederivePosition, Reversible: true, Risk: RiskMedium,
		Rollback: "write the position row and basis of Before back (delete the row when Before has row=absent)",
		Handler:  "write After (quantity and average cost re-derived in authoritative order); invalidate the key's basis"},
	{Kind: ActionDropPosition, Reversible: true, Risk: RiskHigh,
		Rollback: "re-insert the position row and basis of Before",
		Handler:  "delete the positions row and the basis of the key if the row still equals Before"},
	{Kind: ActionReleaseLease, Reversible: false, Risk: RiskMedium, LifecycleEvent: "lease.released",
		Rollback: "none: a released lease cannot be handed back; the next owner acquires it with an incremented fence",
		Handler:  "clear the owner of the expired lease row (owner, fence and expires_at still as Before); keep the fence; never delete the row"},
	{Kind: ActionTriggerCycle, Reversible: true, Risk: RiskLow, LifecycleEvent: "cycle.requested",
		Rollback: "nothing to undo: the request only enqueues a cycle",
		Handler:  "enqueue one reconcile cycle of the scope's ProjectionRecovery; Revert is a no-op"},
	{Kind: ActionRepublish, Reversible: false, Risk: RiskLow, LifecycleEvent: "outbox.published",
		Rollback: "none: a published message cannot be unsent (consumers deduplicate by msg id)",
		Handler:  "publish the row with its msg id (Nats-Msg-Id) and stamp sent_at"},
	{Kind: ActionCollapse, Reversible: false, Risk: RiskMedium, LifecycleEvent: "outbox.collapsed",
		Rollback: "none: re-insert a copy of Before by hand if the kept row was lost",
		Handler:  "delete the unsent copy (id, msg_id) if still unsent; the kept row (After collapse_into_id) is published normally"},
}

// actionSpecByKind and actionOrder index ActionSpecs (apply order).
var actionSpecByKind, actionOrder = indexBy(ActionSpecs, func(s *ActionSpec) ActionKind { return s.Kind })

// SpecOf returns the declared strategy, or false.
func SpecOf(k ActionKind) (ActionSpec, bool) { return deref(actionSpecByKind[k]) }

// indexBy indexes a declaration table (Invariants, ActionSpecs) by key: the
// element and its position. Built once at package init; the tables are
// immutable, so the indexes never go stale.
func indexBy[K comparable, T any](xs []T, key func(*T) K) (map[K]*T, map[K]int) {
	byKey, pos := make(map[K]*T, len(xs)), make(map[K]int, len(xs))
	for i := range xs {
		byKey[key(&xs[i])], pos[key(&xs[i])] = &xs[i], i
	}
	return byKey, pos
}

// deref returns a copy of *p, or false when p is nil (an undeclared key):
// callers never get a pointer into a declaration table.
func deref[T any](p *T) (T, bool) {
	if p == nil {
		var zero T
		return zero, false
	}
	return *p, true
}

// precedence decides the one action of a record with several findings: the
// strongest move wins (a phantom row is dropped, not re-derived; an adopted
// opening re-derives the row on the way; a duplicate outbox copy is
// collapsed, never republished).
var precedence = map[ActionKind]int{
	ActionDropPosition: 3, ActionAdoptSourceOpening: 2, ActionRederivePosition: 1,
	ActionCollapse: 2, ActionRepublish: 1,
	ActionQuarantineTrade: 1, ActionRestoreTrade: 1, ActionRewriteOrderVersion: 1,
	ActionReleaseLease: 1, ActionTriggerCycle: 1,
}
