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

// Kind is a drift kind of the specification.
type Kind string

// The four drift kinds. Every invariant has exactly one.
const (
	// KindMissing: a record exists on one side, not the other.
	KindMissing Kind = "missing"
	// KindDuplicate: two records claim one identity.
	KindDuplicate Kind = "duplicate"
	// KindStale: a record is still open past its deadline.
	KindStale Kind = "stale"
	// KindInconsistent: two fields of one record disagree (the critical
	// kind: a report with one is not Clean).
	KindInconsistent Kind = "inconsistent"
)

// Kinds lists the drift kinds (a test fails if one disappears).
var Kinds = []Kind{KindMissing, KindDuplicate, KindStale, KindInconsistent}

// InvariantID names an invariant. The spellings are a contract (reports,
// plans, audit records carry them): never rename one.
type InvariantID string

// The invariants, declared once in Invariants below.
const (
	TradePresentInSource     InvariantID = "trade.present_in_source"
	TradeSourceRetained      InvariantID = "trade.source_retained"
	TradeImmutableAgrees     InvariantID = "trade.immutable_agrees"
	TradeIdentityUnique      InvariantID = "trade.identity_unique"
	TradeBookingAccepted     InvariantID = "trade.booking_accepted"
	TradeProvenance          InvariantID = "trade.provenance"
	PositionDerivationAgrees InvariantID = "position.derivation_agrees"
	PositionSourceBacked     InvariantID = "position.source_backed"
	PositionBasisAgrees      InvariantID = "position.basis_agrees"
	OpeningProven            InvariantID = "opening.proven"
	OrderPresentInSource     InvariantID = "order.present_in_source"
	OrderSourceRetained      InvariantID = "order.source_retained"
	OrderVersionAgrees       InvariantID = "order.version_agrees"
	OrderNeverRewound        InvariantID = "order.never_rewound"
	CursorProgress           InvariantID = "cursor.progress"
	CursorEventCountAgrees   InvariantID = "cursor.event_count_agrees"
	CursorChainAgrees        InvariantID = "cursor.chain_agrees"
	CursorIdentityAgrees     InvariantID = "cursor.identity_agrees"
	CursorWithinBoundary     InvariantID = "cursor.within_boundary"
	LeaseFresh               InvariantID = "lease.fresh"
	RunSingleSelected        InvariantID = "run.single_selected"
	RunEligible              InvariantID = "run.eligible"
	OutboxDelivered          InvariantID = "outbox.delivered"
	OutboxIdentityUnique     InvariantID = "outbox.identity_unique"
)

// Record tables: the family of records an invariant is about. A finding names
// one record (table + identity); every finding of one record is repaired by
// ONE action.
const (
	TableTrades      = "trades"
	TableOrders      = "orders"
	TableOrderEvents = "order_events"
	TablePositions   = "positions" // with the key's basis row
	TableCursor      = "projection_catchup_cursor"
	TableLease       = "projection_catchup_lease"
	TableRuns        = "projection_runs"
	TableOutbox      = "projection_catchup_outbox"
)

// Invariant is one declared rule: what must hold, how it drifts, what repairs
// it and when the repair is refused, and the causes a finding of it may carry.
type Invariant struct {
	ID          InvariantID
	Kind        Kind
	Table       string
	Statement   string
	Guidance    string
	Strategy    ActionKind // StrategyManual: never automated
	RefusedWhen string     // when the planner lists the finding as manual instead
	Causes      []CauseCode
	// SourceDependent: the rule compares against the source side, so an
	// empty or incomplete source read explains (and blocks) its findings.
	SourceDependent bool
}

// Invariants is the declaration: every check emits only these, every one is
// checked (TestGuard_InvariantsWired), every one has a strategy.
var Invariants = []Invariant{
	{ID: TradePresentInSource, Kind: KindMissing, Table: TableTrades, SourceDependent: true,
		Statement:   "every retained trade positioned at or below the source boundary B is a trade the source emitted (no orphan)",
		Guidance:    "quarantine the orphan (it moves to the quarantine table, revertible), then re-plan so its keys are re-derived",
		Strategy:    ActionQuarantineTrade,
		RefusedWhen: "the source read may be incomplete (empty or partial read): an absence proves nothing",
		Causes:      []CauseCode{CauseNotInConsensus}},
	{ID: TradeSourceRetained, Kind: KindMissing, Table: TableTrades, SourceDependent: true,
		Statement: "every source trade at or below the cursor's verified-through seq is retained (the cursor claims it)",
		Guidance:  "restore the verified source trade (written_by recovery), then re-plan so its keys are re-derived",
		Strategy:  ActionRestoreTrade,
		Causes:    []CauseCode{CauseRowDeleted}},
	{ID: TradeImmutableAgrees, Kind: KindInconsistent, Table: TableTrades, SourceDependent: true,
		Statement:   "a retained trade equals its source trade field by field (decimals exact, ts truncated to the microsecond)",
		Guidance:    "a human decides which side is wrong; never overwrite a trade automatically",
		Strategy:    StrategyManual,
		RefusedWhen: "always: a human decides which side is wrong",
		Causes:      []CauseCode{CausePrecisionMismatch, CauseTimestampRounded, CauseImmutableRewritten}},
	{ID: TradeIdentityUnique, Kind: KindDuplicate, Table: TableTrades, SourceDependent: true,
		Statement:   "one retained row per trade identity (trade_id, and engine trade sequence)",
		Guidance:    "quarantine the copy the source does not know; keep the row the source verifies",
		Strategy:    ActionQuarantineTrade,
		RefusedWhen: "no row of the group is verified by the source, or the rows share a primary key (the table lost its constraint)",
		Causes:      []CauseCode{CauseDuplicateWritePath}},
	{ID: TradeBookingAccepted, Kind: KindInconsistent, Table: TableTrades, SourceDependent: true,
		Statement:   "a retained source trade is BOOKED (the consensus matched it; a rejection cannot stand)",
		Guidance:    "a human decides: the booking system rejected a trade the consensus emitted",
		Strategy:    StrategyManual,
		RefusedWhen: "always: a human decides which side is wrong",
		Causes:      []CauseCode{CauseBookingRejected}},
	{ID: TradeProvenance, Kind: KindInconsistent, Table: TableTrades, SourceDependent: true,
		Statement:   "a retained trade carries the consensus seq of its source event (never NULL: legacy history)",
		Guidance:    "a human decides: legacy rows and re-sequenced trades cannot be placed in authoritative order",
		Strategy:    StrategyManual,
		RefusedWhen: "always: a human decides which side is wrong",
		Causes:      []CauseCode{CauseLegacyRow, CauseProvenanceConflict}},
	{ID: PositionDerivationAgrees, Kind: KindInconsistent, Table: TablePositions, SourceDependent: true,
		Statement:   "a key's quantity and average cost equal the derivation from its proven opening and every retained BOOKED trade in (seq, tradeSeq, leg) order",
		Guidance:    "re-derive the key from its proven opening and retained trades (reversible); fix its trades and opening first",
		Strategy:    ActionRederivePosition,
		RefusedWhen: "the key has an unproven opening, an orphan trade or any other trade drift (fix those first)",
		Causes: []CauseCode{CausePrecisionMismatch, CauseArrivalOrder, CauseInputsDrift, CauseOpeningUnproven,
			CausePositionNeverWritten, CauseBasisStale, CauseUnexplainedWrite}},
	{ID: PositionSourceBacked, Kind: KindMissing, Table: TablePositions, SourceDependent: true,
		Statement:   "a non-zero balance is backed by the source (a proven opening or retained trades): no phantom balance",
		Guidance:    "drop the phantom row (reversible) once a clean source read proves nothing backs it",
		Strategy:    ActionDropPosition,
		RefusedWhen: "the cause is not a clean source read (source_read_empty, source_read_incomplete, key_not_loaded) or the row claims an opening",
		Causes:      []CauseCode{CausePhantomBalance, CauseKeyNotLoaded, CauseUnprovenOpeningClaim}},
	{ID: PositionBasisAgrees, Kind: KindInconsistent, Table: TablePositions, SourceDependent: true,
		Statement:   "a key's derivation basis is the authoritative fold through its basis seq, never past the cursor",
		Guidance:    "invalidate the basis (the next page folds the key from its opening); re-derive the key",
		Strategy:    ActionRederivePosition,
		RefusedWhen: "as position.derivation_agrees",
		Causes:      []CauseCode{CauseBasisStale, CauseBasisAheadOfCursor}},
	{ID: OpeningProven, Kind: KindInconsistent, Table: TablePositions, SourceDependent: true,
		Statement:   "a key's stored opening is proven by a verified source opening event (same seq and values) that no trade of the key precedes",
		Guidance:    "adopt the source opening (reversible) when the source has one; otherwise a human decides",
		Strategy:    ActionAdoptSourceOpening,
		RefusedWhen: "the source has no opening for the key, or its opening follows trades of the key (a conflict)",
		Causes: []CauseCode{CauseOpeningWithoutSourceEvent, CauseOpeningFlagUnproven, CauseOpeningValuesDiffer,
			CauseOpeningMissing, CauseOpeningAfterTrades}},
	{ID: OrderPresentInSource, Kind: KindMissing, Table: TableOrderEvents, SourceDependent: true,
		Statement:   "every retained order version positioned at or below B is a version the source emitted",
		Guidance:    "a human decides: an order version the consensus never emitted",
		Strategy:    StrategyManual,
		RefusedWhen: "always: a human decides which side is wrong",
		Causes:      []CauseCode{CauseNotInConsensus}},
	{ID: OrderSourceRetained, Kind: KindMissing, Table: TableOrderEvents, SourceDependent: true,
		Statement: "every source order version at or below the cursor is retained, and its order has a current row",
		Guidance:  "write the SQL representation of the source version (reversible)",
		Strategy:  ActionRewriteOrderVersion,
		Causes:    []CauseCode{CauseRowDeleted}},
	{ID: OrderVersionAgrees, Kind: KindInconsistent, Table: TableOrderEvents, SourceDependent: true,
		Statement:   "a retained order row equals the SQL representation of its source event (same seq; ts compared truncated to the microsecond)",
		Guidance:    "rewrite the row to the source version (reversible); legacy rows need a human",
		Strategy:    ActionRewriteOrderVersion,
		RefusedWhen: "the row is legacy history (seq NULL)",
		Causes:      []CauseCode{CauseRowMismatch, CauseTimestampRounded, CausePrecisionMismatch, CauseProvenanceConflict, CauseLegacyRow}},
	{ID: OrderNeverRewound, Kind: KindInconsistent, Table: TableOrders, SourceDependent: true,
		Statement: "an order's current row is never older than its newest verified version",
		Guidance:  "rewrite the current row to the newest source version (reversible)",
		Strategy:  ActionRewriteOrderVersion,
		Causes:    []CauseCode{CauseVersionRewound}},
	{ID: CursorProgress, Kind: KindStale, Table: TableCursor,
		Statement:   "a CATCHING_UP or RETRYING cursor progresses within staleAfter",
		Guidance:    "trigger a cycle (it only enqueues); when every scope is stale, start the manager instead",
		Strategy:    ActionTriggerCycle,
		RefusedWhen: "every scope is stale at once: the manager is not running (manager_not_running)",
		Causes:      []CauseCode{CauseManagerNotRunning, CauseScopeStuck, CauseWorkerNotProgressing, CauseRetryingTransient}},
	{ID: CursorEventCountAgrees, Kind: KindInconsistent, Table: TableCursor, SourceDependent: true,
		Statement:   "the cursor's event count equals the source's count of events through its verified-through seq",
		Guidance:    "re-verify from genesis (recreate the cursor): its completeness claim cannot be trusted",
		Strategy:    StrategyManual,
		RefusedWhen: "always: re-verify from genesis",
		Causes:      []CauseCode{CauseCountNotUpdated}},
	{ID: CursorChainAgrees, Kind: KindInconsistent, Table: TableCursor, SourceDependent: true,
		Statement:   "the cursor's chain digest equals the source chain at its verified-through seq",
		Guidance:    "re-verify from genesis (recreate the cursor); if it persists the source history changed",
		Strategy:    StrategyManual,
		RefusedWhen: "always: re-verify from genesis",
		Causes:      []CauseCode{CauseChainDiverged}},
	{ID: CursorIdentityAgrees, Kind: KindInconsistent, Table: TableCursor, SourceDependent: true,
		Statement:   "cursor, selected run, explicit-recovery checkpoint and source agree on descriptor hash and protocol version",
		Guidance:    "a human decides: the source or the run changed identity under the cursor",
		Strategy:    StrategyManual,
		RefusedWhen: "always: identities belong to the trade-processor and the member",
		Causes:      []CauseCode{CauseDescriptorChanged}},
	{ID: CursorWithinBoundary, Kind: KindInconsistent, Table: TableCursor, SourceDependent: true,
		Statement:   "the cursor never claims past the source boundary B, nor past a DRAINING run's frozen seq",
		Guidance:    "a human decides: the source rewound, or the cursor was written past the run's barrier",
		Strategy:    StrategyManual,
		RefusedWhen: "always: re-verify from genesis",
		Causes:      []CauseCode{CauseCursorAheadOfSource, CauseBeyondFrozen}},
	{ID: LeaseFresh, Kind: KindStale, Table: TableLease,
		Statement:   "a lease is either renewed within staleAfter or expired, and an expired lease is not held past staleAfter",
		Guidance:    "release the expired lease (owner cleared, fence kept, so the next owner's fence increments)",
		Strategy:    ActionReleaseLease,
		RefusedWhen: "the lease is unexpired: its page may still be running",
		Causes:      []CauseCode{CauseClaimAbandoned, CauseHolderNotRenewing}},
	{ID: RunSingleSelected, Kind: KindDuplicate, Table: TableRuns,
		Statement:   "at most one run of the scope is selected",
		Guidance:    "a human decides on the trade-processor side; recovery never selects or deselects a run",
		Strategy:    StrategyManual,
		RefusedWhen: "always: runs belong to the trade-processor",
		Causes:      []CauseCode{CauseDoubleSelect}},
	{ID: RunEligible, Kind: KindMissing, Table: TableRuns,
		Statement:   "the scope has a managed epoch-v1 selected run in phase ACTIVE, or DRAINING with a frozen seq",
		Guidance:    "a human decides on the trade-processor side; recovery never selects, activates or reopens a run",
		Strategy:    StrategyManual,
		RefusedWhen: "always: runs belong to the trade-processor",
		Causes:      []CauseCode{CauseNoEligibleRun}},
	{ID: OutboxDelivered, Kind: KindStale, Table: TableOutbox,
		Statement:   "an outbox notification is sent within staleAfter of its creation",
		Guidance:    "republish it (same msg id, deduplicated by NATS); when nothing drains, fix the publisher first",
		Strategy:    ActionRepublish,
		RefusedWhen: "the publisher is not draining (publisher_not_draining), or this manager has no NATS connection to republish through",
		Causes:      []CauseCode{CausePublisherNotDraining, CauseMessageNotPickedUp}},
	{ID: OutboxIdentityUnique, Kind: KindDuplicate, Table: TableOutbox,
		Statement:   "one unsent notification per msg id, and per (account, instrument, cursor seq) among the pages' notifications",
		Guidance:    "collapse the copies onto the oldest row",
		Strategy:    ActionCollapse,
		RefusedWhen: "the publisher is not draining (publisher_not_draining)",
		Causes:      []CauseCode{CauseDoublePublish}},
}

// invariantByID indexes Invariants; invariantOrder is each invariant's
// position in the table (report order).
var invariantByID, invariantOrder = indexBy(Invariants, func(inv *Invariant) InvariantID { return inv.ID })

// Lookup returns the declared invariant, or false.
func Lookup(id InvariantID) (Invariant, bool) { return deref(invariantByID[id]) }

// allows reports whether a finding of inv may carry cause c: its declared
// causes, plus the correlated source causes for source-dependent invariants.
func (inv *Invariant) allows(c CauseCode) bool {
	if inv.SourceDependent && (c == CauseSourceReadEmpty || c == CauseSourceReadIncomplete) {
		return true
	}
	for _, d := range inv.Causes {
		if d == c {
			return true
		}
	}
	return false
}
