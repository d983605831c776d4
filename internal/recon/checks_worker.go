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
	"sort"
	"strings"

	"github.com/projection-recovery/projection-recovery/internal/chain"
)

func cursorRecord(scope string) Record {
	return Record{Table: TableCursor, Identity: Fields{"scope": scope}}
}

// ClockFields are stamped by whoever last touched a record: they may differ
// between the dry run and the re-check without the record having moved
// (plan_stale compares target, before and after with these aside).
var ClockFields = map[string]bool{"updated_at": true}

func cursorFields(c *CursorRow) Fields {
	return Fields{"state": c.State, "blocked_reason": c.BlockedReason, "verified_through_seq": itoa(c.VerifiedThroughSeq),
		"chain_digest": c.ChainDigest, "event_count": itoa(c.EventCount), "descriptor_hash": c.DescriptorHash,
		"protocol_version": itoa(int64(c.ProtocolVersion)), "updated_at": ts(c.UpdatedAt)}
}

// selectedRun is the scope's first selected run, nil when none is.
func selectedRun(s *Snapshot) *ProjectionRun {
	for i := range s.SQL.Runs {
		if s.SQL.Runs[i].Selected {
			return &s.SQL.Runs[i]
		}
	}
	return nil
}

// chainAt is the source chain digest at seq, when the read knows it.
func chainAt(s *Snapshot, seq int64) (string, bool) {
	switch {
	case seq == 0:
		return chain.Genesis, true
	case seq == s.Source.Boundary && s.Source.Digest != "":
		return s.Source.Digest, true
	}
	for _, p := range s.Source.Chain {
		if p.Seq == seq {
			return p.Digest, true
		}
	}
	return "", false
}

// checkCursor: progress, boundary, count, chain and identity of the scope's
// completeness claim.
func checkCursor(d *detector) {
	s := d.s
	c := s.SQL.Cursor
	rec := cursorRecord(s.Scope)
	sel := selectedRun(s)
	if c != nil {
		before := cursorFields(c)
		if (c.State == StateCatchingUp || c.State == StateRetrying) && s.Now.Sub(c.UpdatedAt) > s.StaleAfter {
			age := "age=" + s.Now.Sub(c.UpdatedAt).String()
			var cause RootCause
			switch {
			case d.corr.managerDown:
				cause = RootCause{Code: CauseManagerNotRunning, Confidence: Likely,
					Hint:     "every non-blocked scope is stale at once: the manager (worker) is not running; start it rather than poke one scope",
					Evidence: append([]string{age}, "stale_scopes="+strings.Join(d.corr.staleScopes, "|"))}
			case c.State == StateRetrying && c.BlockedReason != "":
				cause = RootCause{Code: CauseRetryingTransient, Confidence: Possible,
					Hint:     "the worker keeps retrying " + c.BlockedReason + ": fix that cause; a triggered cycle only retries sooner",
					Evidence: []string{age, "reason=" + c.BlockedReason}}
			case d.corr.liveScopes >= 2:
				cause = RootCause{Code: CauseScopeStuck, Confidence: Likely,
					Hint:     "other scopes progress while this one does not: its cycle is stuck or no longer scheduled",
					Evidence: []string{age, "live_scopes=" + itoa(int64(d.corr.liveScopes))}}
			default:
				cause = RootCause{Code: CauseWorkerNotProgressing, Confidence: Possible,
					Hint:     "the only live scope is stale: either its cycle is stuck or the manager is down; check the manager first",
					Evidence: []string{age}}
			}
			d.emit(CursorProgress, rec, before, Fields{"state": c.State, "updated_within": s.StaleAfter.String()}, cause, false, "")
		}
		switch {
		case c.VerifiedThroughSeq > d.b:
			d.emit(CursorWithinBoundary, rec, before, Fields{"verified_through_seq_max": itoa(d.b)}, RootCause{Code: CauseCursorAheadOfSource, Confidence: Likely,
				Hint:     "the cursor claims more than the source has applied: the source rewound or the cursor came from another history",
				Evidence: []string{"verified_through=" + itoa(c.VerifiedThroughSeq), "boundary=" + itoa(d.b)}}, true, "")
		case sel != nil && sel.Phase == PhaseDraining && sel.FrozenSeq != nil && c.VerifiedThroughSeq > *sel.FrozenSeq:
			d.emit(CursorWithinBoundary, rec, before, Fields{"verified_through_seq_max": itoa(*sel.FrozenSeq)}, RootCause{Code: CauseBeyondFrozen, Confidence: Likely,
				Hint:     "the cursor of a DRAINING run is past its frozen seq: it was advanced across the run barrier",
				Evidence: []string{"verified_through=" + itoa(c.VerifiedThroughSeq), "frozen_seq=" + itoa(*sel.FrozenSeq)}}, false, "")
		}
		if c.VerifiedThroughSeq <= d.b {
			if n := d.srcThroughV; n != c.EventCount {
				d.emit(CursorEventCountAgrees, rec, before, Fields{"event_count": itoa(n)}, RootCause{Code: CauseCountNotUpdated, Confidence: Likely,
					Hint:     "the cursor's event count is not the source's count through its verified seq: the claim was written without its page",
					Evidence: []string{"cursor_event_count=" + itoa(c.EventCount), "source_event_count=" + itoa(n)}}, true, "")
			}
			if dg, ok := chainAt(s, c.VerifiedThroughSeq); ok && dg != c.ChainDigest {
				d.emit(CursorChainAgrees, rec, before, Fields{"chain_digest": dg}, RootCause{Code: CauseChainDiverged, Confidence: Likely,
					Hint:     "the cursor's digest is not the source chain at its verified seq: the projection was verified against another history",
					Evidence: []string{"cursor_digest=" + c.ChainDigest, "source_digest=" + dg}}, false, "")
			}
		}
	}
	var mism []string
	src := &s.Source
	differ := func(what, a, b string) {
		if a != "" && b != "" && a != b {
			mism = append(mism, what+"="+a+"/source="+b)
		}
	}
	pv := func(v int) string {
		if v == 0 {
			return ""
		}
		return itoa(int64(v))
	}
	if c != nil {
		differ("cursor_descriptor", c.DescriptorHash, src.DescriptorHash)
		differ("cursor_protocol", pv(c.ProtocolVersion), pv(src.ProtocolVersion))
	}
	if sel != nil {
		differ("run_descriptor", sel.DescriptorHash, src.DescriptorHash)
		differ("run_protocol", pv(sel.ProtocolVersion), pv(src.ProtocolVersion))
		differ("checkpoint_descriptor", sel.RecoveryCheckpointDescriptorHash, src.DescriptorHash)
		differ("checkpoint_protocol", pv(sel.RecoveryCheckpointProtocolVersion), pv(src.ProtocolVersion))
		if ck := sel.RecoveryCheckpointSeq; ck != nil && sel.RecoveryCheckpointDigest != "" && *ck <= d.b {
			if dg, ok := chainAt(s, *ck); ok {
				differ("checkpoint_digest@"+itoa(*ck), sel.RecoveryCheckpointDigest, dg)
			}
		}
	}
	if len(mism) > 0 {
		var before Fields
		if c != nil {
			before = cursorFields(c)
		}
		d.emit(CursorIdentityAgrees, rec, before, Fields{"descriptor_hash": src.DescriptorHash, "protocol_version": pv(src.ProtocolVersion)},
			RootCause{Code: CauseDescriptorChanged, Confidence: Likely,
				Hint:     "the source, the selected run or the cursor changed identity: pages from this source would be refused",
				Evidence: mism}, false, "")
	}
}

// Lease owners of reconciliation's own sessions (internal/reconstore): an
// apply or a rollback holds the scope's lease as RepairLeaseOwnerPrefix +
// its correlation id, a dry run's rehearsal as RehearsalLeaseOwnerPrefix +
// its run id, each followed by "#" and a nonce of the session. A manager's
// identity never starts with either.
const (
	RepairLeaseOwnerPrefix    = "reconciliation/"
	RehearsalLeaseOwnerPrefix = "reconciliation-dry-run/"
)

// sessionOwned reports whether owner is a reconciliation session.
func sessionOwned(owner string) bool {
	return strings.HasPrefix(owner, RepairLeaseOwnerPrefix) || strings.HasPrefix(owner, RehearsalLeaseOwnerPrefix)
}

func leaseRecord(scope string) Record {
	return Record{Table: TableLease, Identity: Fields{"scope": scope}}
}

// checkLease: a lease is renewed within staleAfter or expired; an expired
// lease whose holder died mid-work (the cursor made no progress since) is
// held past expiry. A reconciliation session's lease never is: the session
// releases it at its end (expires_at = the end, the owner kept, like
// store.ReleaseLease), and the cursor's progress is the worker's work, not
// the session's, so a stuck cursor after it proves nothing about it.
// Without that exclusion every repair of a stuck scope (release_lease's
// own apply included: its session's takeover is the release) would be
// reported again as claim_abandoned staleAfter later, and planned again.
func checkLease(d *detector) {
	s := d.s
	l := s.SQL.Lease
	if l == nil {
		return
	}
	before := Fields{"owner": l.Owner, "fence": itoa(l.Fence), "expires_at": ts(l.ExpiresAt), "renewed_at": ts(l.RenewedAt)}
	// Releasing clears the owner and keeps the fence and the expiry: the next
	// owner's acquisition increments the fence, so a stale writer can never
	// commit (FR-APR08). Never delete the row: that would reset the fence.
	expected := Fields{"owner": "", "fence": itoa(l.Fence), "expires_at": ts(l.ExpiresAt), "renewed_at": ts(l.RenewedAt)}
	rec := leaseRecord(s.Scope)
	expired := !l.ExpiresAt.After(s.Now)
	c := s.SQL.Cursor
	switch {
	case !expired && s.Now.Sub(l.RenewedAt) > s.StaleAfter:
		conf := Possible
		if d.corr.managerDown {
			conf = Likely
		}
		d.emit(LeaseFresh, rec, before, expected, RootCause{Code: CauseHolderNotRenewing, Confidence: conf,
			Hint:     "the holder stopped renewing but the lease is unexpired: it blocks takeover until " + ts(l.ExpiresAt) + "; its page may still be running",
			Evidence: []string{"owner=" + l.Owner, "renewed_age=" + s.Now.Sub(l.RenewedAt).String(), "expires_in=" + l.ExpiresAt.Sub(s.Now).String()}}, false, "")
	case expired && l.Owner != "" && !sessionOwned(l.Owner) && !released(l) && s.Now.Sub(l.ExpiresAt) > s.StaleAfter &&
		c != nil && (c.State == StateCatchingUp || c.State == StateRetrying) && !c.UpdatedAt.After(l.ExpiresAt):
		d.emit(LeaseFresh, rec, before, expected, RootCause{Code: CauseClaimAbandoned, Confidence: Likely,
			Hint:     "the holder's lease expired mid-work and nobody took over since: the holder died without releasing it",
			Evidence: []string{"owner=" + l.Owner, "expired_age=" + s.Now.Sub(l.ExpiresAt).String(), "cursor_state=" + c.State}}, false, "")
	}
}

// released reports a lease its holder gave up (store.ReleaseLease and
// ReleaseAll stamp renewed_at = expires_at = the release), as opposed to one
// whose holder died: a live holder renews ahead of the expiry (renewed_at +
// the lease duration = expires_at), so only a release leaves renewed_at at or
// past expires_at. Without this a clean shutdown mid-catch-up would look like
// an abandoned claim once staleAfter passed.
func released(l *LeaseRow) bool { return !l.RenewedAt.Before(l.ExpiresAt) }

func runsRecord(scope string) Record {
	return Record{Table: TableRuns, Identity: Fields{"scope": scope}}
}

// checkRuns: at most one selected run, and an eligible one when the scope
// holds anything to reconcile.
func checkRuns(d *detector) {
	s := d.s
	var selected []string
	eligible := false
	for i := range s.SQL.Runs {
		r := &s.SQL.Runs[i]
		if r.Selected {
			selected = append(selected, itoa(r.RunID))
		}
		eligible = eligible || r.Eligible()
	}
	rec := runsRecord(s.Scope)
	before := Fields{"selected_run_ids": strings.Join(selected, "|"), "runs": itoa(int64(len(s.SQL.Runs)))}
	if len(selected) > 1 {
		d.emit(RunSingleSelected, rec, before, Fields{"selected_runs_max": "1"}, RootCause{Code: CauseDoubleSelect, Confidence: Likely,
			Hint:     "several runs of the scope are selected: the trade-processor selected a run without deselecting the previous one",
			Evidence: []string{"selected=" + before["selected_run_ids"]}}, false, "")
	}
	holds := s.SQL.Cursor != nil || d.counts.Trades > 0 || d.counts.Orders > 0 || len(s.SQL.Positions) > 0
	if !eligible && holds {
		ev := []string{"selected=" + before["selected_run_ids"]}
		if sel := selectedRun(s); sel != nil {
			ev = append(ev, "phase="+sel.Phase, "managed="+boolStr(sel.Managed), "epoch="+itoa(int64(sel.Epoch)))
		}
		d.emit(RunEligible, rec, before, Fields{"eligible_runs_min": "1"}, RootCause{Code: CauseNoEligibleRun, Confidence: Likely,
			Hint:     "no managed epoch-v1 selected ACTIVE/DRAINING run: recovery refuses the scope (NOT_ELIGIBLE) until the trade-processor selects one",
			Evidence: ev}, false, "")
	}
}

func outboxRecord(o *OutboxRow) Record {
	return Record{Table: TableOutbox, Identity: Fields{"id": itoa(o.ID), "msg_id": o.MsgID}}
}

func outboxFields(o *OutboxRow) Fields {
	sent := ""
	if o.SentAt != nil {
		sent = ts(*o.SentAt)
	}
	return Fields{"id": itoa(o.ID), "msg_id": o.MsgID, "account": o.Account, "instrument": o.Instrument, "quantity": dec(o.Quantity),
		"avg_cost": dec(o.AvgCost), "cursor_seq": itoa(o.CursorSeq), "created_at": ts(o.CreatedAt), "sent_at": sent}
}

type outboxKey struct {
	account, instrument string
	cursorSeq           int64
}

// RepairMsgIDPrefix starts the msg id of a reconciliation repair's
// notification (store.RepairMsgIDPrefix, the same string).
const RepairMsgIDPrefix = "repair/"

// Repair reports whether the row is a repair's notification, not a page's.
func (o *OutboxRow) Repair() bool { return strings.HasPrefix(o.MsgID, RepairMsgIDPrefix) }

// checkOutbox: unsent rows past staleAfter, and unsent copies of one
// notification (same msg id, or same key and cursor seq). The oldest copy
// (lowest id) is kept.
//
// A repair's notification is a copy only of one with its msg id: it carries
// the cursor seq the scope stood at, which the page notification it
// corrects (or the apply's, for a rollback's) may share unsent, with
// another value. Grouped by key and cursor seq, the repair's own
// announcement would be reported as a double publish and collapsed or
// handed to a human.
func checkOutbox(d *detector) {
	s := d.s
	byMsg := map[string][]int{}
	byKey := map[outboxKey][]int{}
	var msgOrder []string // group keys in snapshot order: deterministic keepers and evidence
	var keyOrder []outboxKey
	for i := range s.SQL.Outbox {
		o := &s.SQL.Outbox[i]
		if o.SentAt != nil {
			continue
		}
		if len(byMsg[o.MsgID]) == 0 {
			msgOrder = append(msgOrder, o.MsgID)
		}
		byMsg[o.MsgID] = append(byMsg[o.MsgID], i)
		if k := (outboxKey{o.Account, o.Instrument, o.CursorSeq}); !o.Repair() {
			if len(byKey[k]) == 0 {
				keyOrder = append(keyOrder, k)
			}
			byKey[k] = append(byKey[k], i)
		}
		if s.Now.Sub(o.CreatedAt) > s.StaleAfter {
			cause := RootCause{Code: CauseMessageNotPickedUp, Confidence: Possible,
				Hint:     "the publisher drains other rows but not this one: it was skipped or its publish keeps failing",
				Evidence: []string{"age=" + s.Now.Sub(o.CreatedAt).String()}}
			if d.corr.publisherDown {
				cause = RootCause{Code: CausePublisherNotDraining, Confidence: Likely,
					Hint:     "nothing drains the outbox: the NATS connection is down or the publisher is not running; fix the publisher, do not republish",
					Evidence: []string{"age=" + s.Now.Sub(o.CreatedAt).String(), d.corr.publisherWhy}}
			}
			d.emit(OutboxDelivered, outboxRecord(o), outboxFields(o), Fields{"sent_within": s.StaleAfter.String()}, cause, false, "")
		}
	}
	dup := map[int]int{} // row index -> keeper index
	for _, m := range msgOrder {
		markCopies(s, byMsg[m], dup)
	}
	for _, k := range keyOrder {
		markCopies(s, byKey[k], dup)
	}
	idx := make([]int, 0, len(dup))
	for i := range dup {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		o, keep := &s.SQL.Outbox[i], &s.SQL.Outbox[dup[i]]
		var expected Fields
		if o.Account == keep.Account && o.Instrument == keep.Instrument && o.Quantity.Equal(keep.Quantity) && o.AvgCost.Equal(keep.AvgCost) {
			expected = Fields{"collapse_into_id": itoa(keep.ID), "collapse_into_msg_id": keep.MsgID}
		}
		d.emit(OutboxIdentityUnique, outboxRecord(o), outboxFields(o), expected, RootCause{Code: CauseDoublePublish, Confidence: Likely,
			Hint:     "two unsent rows carry one notification: a page or a publisher wrote it twice",
			Evidence: []string{"kept_id=" + itoa(keep.ID), "kept_msg_id=" + keep.MsgID}}, false, "")
	}
}

// markCopies records, for a group of unsent rows claiming one identity,
// every row but the oldest (lowest id) as a copy of it.
func markCopies(s *Snapshot, g []int, dup map[int]int) {
	if len(g) < 2 {
		return
	}
	keep := g[0]
	for _, i := range g[1:] {
		if s.SQL.Outbox[i].ID < s.SQL.Outbox[keep].ID {
			keep = i
		}
	}
	for _, i := range g {
		if i != keep {
			if _, seen := dup[i]; !seen {
				dup[i] = keep
			}
		}
	}
}
