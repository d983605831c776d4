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

// CauseCode is a stable, switchable root-cause code. The spellings are a
// contract: never rename one.
type CauseCode string

// Correlated causes: computed across the whole snapshot, on purpose.
const (
	// CauseSourceReadEmpty: the source side holds no event at all while the
	// SQL side holds rows: the read failed, not every trade vanished. Every
	// finding of a source-dependent invariant carries it and the planner
	// touches nothing.
	CauseSourceReadEmpty CauseCode = "source_read_empty"
	// CauseSourceReadIncomplete: the provider says the source read did not
	// cover every event through B: no absence may be acted on.
	CauseSourceReadIncomplete CauseCode = "source_read_incomplete"
	// CauseManagerNotRunning: every non-blocked scope is stale at once: a
	// worker outage, not one stuck scope. Triggering a cycle is pointless.
	CauseManagerNotRunning CauseCode = "manager_not_running"
	// CausePublisherNotDraining: the outbox publisher sends nothing (the NATS
	// connection is down, or no unsent row was sent within staleAfter).
	CausePublisherNotDraining CauseCode = "publisher_not_draining"
)

// Per-record causes.
const (
	CauseNotInConsensus            CauseCode = "not_in_consensus"
	CauseRowDeleted                CauseCode = "row_deleted_after_verification"
	CausePrecisionMismatch         CauseCode = "precision_mismatch"
	CauseTimestampRounded          CauseCode = "timestamp_rounded"
	CauseImmutableRewritten        CauseCode = "immutable_rewritten"
	CauseDuplicateWritePath        CauseCode = "duplicate_write_path"
	CauseBookingRejected           CauseCode = "booking_rejected"
	CauseLegacyRow                 CauseCode = "legacy_row"
	CauseProvenanceConflict        CauseCode = "provenance_conflict"
	CauseArrivalOrder              CauseCode = "arrival_order"
	CauseInputsDrift               CauseCode = "inputs_drift"
	CauseOpeningUnproven           CauseCode = "opening_unproven"
	CausePositionNeverWritten      CauseCode = "position_never_written"
	CauseBasisStale                CauseCode = "basis_stale"
	CauseBasisAheadOfCursor        CauseCode = "basis_ahead_of_cursor"
	CauseUnexplainedWrite          CauseCode = "unexplained_write"
	CausePhantomBalance            CauseCode = "phantom_balance"
	CauseKeyNotLoaded              CauseCode = "key_not_loaded"
	CauseUnprovenOpeningClaim      CauseCode = "unproven_opening_claim"
	CauseOpeningWithoutSourceEvent CauseCode = "opening_without_source_event"
	CauseOpeningFlagUnproven       CauseCode = "opening_flag_unproven"
	CauseOpeningValuesDiffer       CauseCode = "opening_values_differ"
	CauseOpeningMissing            CauseCode = "opening_missing"
	CauseOpeningAfterTrades        CauseCode = "opening_after_trades"
	CauseRowMismatch               CauseCode = "row_mismatch"
	CauseVersionRewound            CauseCode = "version_rewound"
	CauseScopeStuck                CauseCode = "scope_stuck"
	CauseWorkerNotProgressing      CauseCode = "worker_not_progressing"
	CauseRetryingTransient         CauseCode = "retrying_transient"
	CauseCountNotUpdated           CauseCode = "count_not_updated"
	CauseChainDiverged             CauseCode = "chain_diverged"
	CauseDescriptorChanged         CauseCode = "descriptor_changed"
	CauseCursorAheadOfSource       CauseCode = "cursor_ahead_of_source"
	CauseBeyondFrozen              CauseCode = "beyond_frozen"
	CauseClaimAbandoned            CauseCode = "claim_abandoned"
	CauseHolderNotRenewing         CauseCode = "holder_not_renewing"
	CauseDoubleSelect              CauseCode = "double_select"
	CauseNoEligibleRun             CauseCode = "no_eligible_run"
	CauseMessageNotPickedUp        CauseCode = "message_not_picked_up"
	CauseDoublePublish             CauseCode = "double_publish"
)

// Confidence of a root cause: likely means the evidence points one way;
// possible means it is the best of several explanations and a human should
// confirm it.
type Confidence string

const (
	Likely   Confidence = "likely"
	Possible Confidence = "possible"
)

// RootCause says why a finding probably happened. It is computed only from
// the snapshot (cheap, deterministic, testable) and scrubbed like the rest of
// the finding.
type RootCause struct {
	Code       CauseCode  `json:"code"`
	Confidence Confidence `json:"confidence"`
	Hint       string     `json:"hint"`
	Evidence   []string   `json:"evidence,omitempty"`
}

// correlation holds the snapshot-wide facts that explain many findings at
// once. It is computed before any check, from the snapshot only.
type correlation struct {
	sourceEmpty      bool // the source holds nothing while SQL holds rows
	sourceIncomplete bool
	incompleteReason string

	managerDown   bool     // every non-blocked scope is stale (>= 2 of them)
	staleScopes   []string // evidence
	liveScopes    int      // non-blocked scopes in the summary
	publisherDown bool
	publisherWhy  string
}

// correlate computes the correlated facts.
//
// source_read_empty: no source event at all while the SQL side holds trades,
// orders, order events, a non-zero position or a cursor past genesis. Without
// it every retained trade would look orphaned and a planner would quarantine
// the whole projection on a failed read.
//
// manager_not_running: at least two scopes are not BLOCKED and every one of
// them has a cursor untouched for longer than staleAfter. With one scope the
// two explanations (stuck scope, dead manager) cannot be told apart, so the
// cause stays possible and the (harmless) trigger is allowed.
//
// publisher_not_draining: the manager reports the NATS connection down, or
// some row is overdue and no row was sent within staleAfter.
func correlate(s *Snapshot, counts HistoryCounts, decoded int64) correlation {
	var c correlation
	sqlHolds := counts.Trades > 0 || counts.Orders > 0 || counts.OrderEvents > 0 ||
		(s.SQL.Cursor != nil && s.SQL.Cursor.VerifiedThroughSeq > 0)
	if !sqlHolds {
		for i := range s.SQL.Positions {
			p := &s.SQL.Positions[i]
			if !p.Quantity.IsZero() || !p.AvgCost.IsZero() {
				sqlHolds = true
				break
			}
		}
	}
	c.sourceEmpty = decoded == 0 && sqlHolds
	c.sourceIncomplete = !s.Source.Complete
	c.incompleteReason = s.Source.IncompleteReason
	if s.Source.Complete && decoded != s.Source.EventCount {
		c.sourceIncomplete = true
		c.incompleteReason = "decoded " + itoa(decoded) + " events, the read counts " + itoa(s.Source.EventCount) + " through B"
	}

	stale := 0
	for _, sc := range s.Scopes {
		if sc.State == StateBlocked {
			continue
		}
		c.liveScopes++
		if s.Now.Sub(sc.UpdatedAt) > s.StaleAfter {
			stale++
			c.staleScopes = append(c.staleScopes, sc.Scope)
		}
	}
	c.managerDown = c.liveScopes >= 2 && stale == c.liveScopes

	switch {
	case s.Publisher != nil && s.Publisher.Missing == "" && !s.Publisher.Connected:
		c.publisherDown, c.publisherWhy = true, "publisher_connected=false"
	default:
		overdue, recentSend := false, false
		for i := range s.SQL.Outbox {
			o := &s.SQL.Outbox[i]
			if o.SentAt == nil && s.Now.Sub(o.CreatedAt) > s.StaleAfter {
				overdue = true
			}
			if o.SentAt != nil && s.Now.Sub(*o.SentAt) <= s.StaleAfter {
				recentSend = true
			}
		}
		if overdue && !recentSend {
			c.publisherDown, c.publisherWhy = true, "no_send_within_stale_after"
		}
	}
	return c
}

// sourceCause is the correlated cause that overrides a source-dependent
// finding's own cause, if any: an empty read explains every such finding; an
// incomplete one explains only conclusions drawn from an absence (absence
// true: an orphan, a phantom, a derivation that may lack source trades),
// never a positive disagreement with an event the read did verify.
func (c *correlation) sourceCause(s *Snapshot, absence bool) (RootCause, bool) {
	switch {
	case c.sourceEmpty:
		return RootCause{Code: CauseSourceReadEmpty, Confidence: Likely,
			Hint:     "the source read holds no event at all while the projection holds rows: the read failed, not the projection; fix the read and re-run",
			Evidence: []string{"source_events=0", "source_boundary=" + itoa(s.Source.Boundary)}}, true
	case c.sourceIncomplete && absence:
		return RootCause{Code: CauseSourceReadIncomplete, Confidence: Likely,
			Hint:     "the source read did not cover every event through B: an absence proves nothing; re-run once the read completes",
			Evidence: []string{"source_complete=false", "reason=" + c.incompleteReason}}, true
	}
	return RootCause{}, false
}
