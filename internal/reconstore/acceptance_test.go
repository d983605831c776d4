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
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

// breakage is one hand-made drift in the window (V, B] the next recovery
// page covers, and the answer reconciliation must give for it.
type breakage struct {
	name     string
	code     codes.Code // the recovery page's refusal
	openings bool
	// corrupt breaks the projection as the admin (the trade-processor, or a
	// human with its rights) and returns the key of the record it broke and
	// the human's fix (used when the plan leaves the record manual).
	corrupt   func(s *scene) (record string, fix func())
	invariant recon.InvariantID
	cause     recon.CauseCode
	action    recon.ActionKind // "": manual, a human decides
	// withdraws: the rollback puts the record back inside the window the
	// cursor verified (a position row: always), so it withdraws that
	// verification (store.WithdrawTx); the trade and order records here
	// lie after the cursor, where the next page verifies them anyway.
	withdraws bool
}

// windowTrade is the first retained trade in (V, B].
func (s *scene) windowTrade() (id string, seq int64, buyer, instrument string) {
	s.t.Helper()
	s.one(`SELECT trade_id, seq, buy_account, instrument FROM trades WHERE scope = $1 AND seq > $2 ORDER BY seq, trade_seq LIMIT 1`,
		[]any{s.scope, s.v}, &id, &seq, &buyer, &instrument)
	return
}

// windowKey is a key with a non-zero opening that a retained trade in
// (V, B] touches (so the next page checks it).
func (s *scene) windowKey(nonZeroOpening bool) (account, instrument string) {
	s.t.Helper()
	s.one(`SELECT p.account, p.instrument FROM positions p JOIN trades t
    ON t.scope = p.scope AND t.instrument = p.instrument AND p.account IN (t.buy_account, t.sell_account)
 WHERE p.scope = $1 AND t.seq > $2 AND (NOT $3 OR p.opening_quantity <> 0)
 ORDER BY t.seq, t.trade_seq, p.account LIMIT 1`, []any{s.scope, s.v, nonZeroOpening}, &account, &instrument)
	return
}

var breakages = []breakage{
	{name: "ORPHAN_TRADE: a trade in SQL the source never had", code: codes.OrphanTrade,
		corrupt: func(s *scene) (string, func()) {
			id, _, _, _ := s.windowTrade()
			s.exec(`INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id,
                    buy_account, sell_account, ts, booking_status, written_by)
SELECT scope, 'orphan-1', 1000000, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts, 'BOOKED', 'live'
  FROM trades WHERE scope = $1 AND trade_id = $2`, s.scope, id)
			return "trades/trade_id=orphan-1", nil
		},
		invariant: recon.TradePresentInSource, cause: recon.CauseNotInConsensus, action: recon.ActionQuarantineTrade},
	{name: "UNEXPLAINED_BALANCE: a position quantity edited by hand", code: codes.UnexplainedBalance,
		corrupt: func(s *scene) (string, func()) {
			a, i := s.windowKey(false)
			s.exec(`UPDATE positions SET quantity = quantity + 7 WHERE scope = $1 AND account = $2 AND instrument = $3`, s.scope, a, i)
			return "positions/account=" + a + ",instrument=" + i, nil
		},
		invariant: recon.PositionDerivationAgrees, cause: recon.CauseUnexplainedWrite, action: recon.ActionRederivePosition, withdraws: true},
	{name: "UNPROVEN_INITIAL_BALANCE: the source opening's values stored without its provenance", code: codes.UnprovenInitialBalance, openings: true,
		corrupt: func(s *scene) (string, func()) {
			a, i := s.windowKey(true)
			s.exec(`UPDATE positions SET opening_proven = false, opening_seq = NULL WHERE scope = $1 AND account = $2 AND instrument = $3`, s.scope, a, i)
			return "positions/account=" + a + ",instrument=" + i, nil
		},
		invariant: recon.OpeningProven, cause: recon.CauseOpeningFlagUnproven, action: recon.ActionAdoptSourceOpening, withdraws: true},
	{name: "UNPROVEN_INITIAL_BALANCE: a stored non-zero opening, opening_seq NULL, no source opening", code: codes.UnprovenInitialBalance,
		corrupt: func(s *scene) (string, func()) {
			a, i := s.windowKey(false)
			s.exec(`UPDATE positions SET opening_quantity = 5, opening_avg_cost = 100, opening_proven = false, opening_seq = NULL,
       quantity = quantity + 5 WHERE scope = $1 AND account = $2 AND instrument = $3`, s.scope, a, i)
			// The human decides the opening is bogus (the source never
			// emitted one) and takes it out again.
			return "positions/account=" + a + ",instrument=" + i, func() {
				s.exec(`UPDATE positions SET opening_quantity = 0, opening_avg_cost = 0, opening_proven = true, quantity = quantity - 5
 WHERE scope = $1 AND account = $2 AND instrument = $3`, s.scope, a, i)
			}
		},
		invariant: recon.OpeningProven, cause: recon.CauseOpeningWithoutSourceEvent},
	{name: "ORDER_ROW_MISMATCH: an order_events row edited", code: codes.OrderRowMismatch,
		corrupt: func(s *scene) (string, func()) {
			var id string
			var version int64
			s.one(`SELECT order_id, version FROM order_events WHERE scope = $1 AND seq > $2 ORDER BY seq, order_id LIMIT 1`,
				[]any{s.scope, s.v}, &id, &version)
			s.exec(`UPDATE order_events SET remaining = remaining + 1 WHERE scope = $1 AND order_id = $2 AND version = $3`, s.scope, id, version)
			return "order_events/order_id=" + id + ",version=" + itoa(version), nil
		},
		invariant: recon.OrderVersionAgrees, cause: recon.CauseRowMismatch, action: recon.ActionRewriteOrderVersion},
	{name: "IMMUTABLE_TRADE_CONFLICT: a retained trade's price edited", code: codes.ImmutableTradeConflict,
		corrupt: func(s *scene) (string, func()) {
			id, _, _, _ := s.windowTrade()
			var price string
			s.one(`SELECT price::text FROM trades WHERE scope = $1 AND trade_id = $2`, []any{s.scope, id}, &price)
			s.exec(`UPDATE trades SET price = price + 1 WHERE scope = $1 AND trade_id = $2`, s.scope, id)
			// The human decides the source is right and restores the row.
			return "trades/trade_id=" + id, func() {
				s.exec(`UPDATE trades SET price = $3::numeric WHERE scope = $1 AND trade_id = $2`, s.scope, id, price)
			}
		},
		invariant: recon.TradeImmutableAgrees, cause: recon.CauseImmutableRewritten},
}

// TestAcceptance_BlockedRefusals: for every BLOCKED refusal reachable
// today, on real parts, the whole loop an operator runs:
//
//  1. recovery is refused with the code and writes nothing;
//  2. the dry run names the invariant (recon.RefusalInvariants of the code)
//     and the root cause on the broken record, and nothing else;
//  3. the plan has the expected action, and its rehearsal says it would
//     succeed (or, manual: the plan lists the record and a human fixes it,
//     after which the next dry run is clean);
//  4. Apply (allowed principal, echoed planId) succeeds, verification is
//     clean, journal and audit hold one record per action;
//  5. Rollback of that outcome restores the exact pre-apply state, then so
//     does a rollback of a second apply from the audit trail alone
//     (RollbackRun on a fresh workflow, no Outcome);
//  6. a third apply, then recovery reaches CURRENT and every SQL position
//     equals an independent exact replay of the member's events; the final
//     dry run is clean.
func TestAcceptance_BlockedRefusals(t *testing.T) {
	for i, b := range breakages {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := newScene(t, "venue-"+itoa(int64(i)), sceneOpts{openings: b.openings})
			if d := s.dryRun(); len(d.Report.Findings) != 0 {
				t.Fatalf("a scope merely catching up drifts:\n%s", strings.Join(findings(d.Report), "\n"))
			}
			record, fix := b.corrupt(s)

			// 1. Recovery refuses with the code and writes nothing.
			before := s.dump(true)
			cur := s.cursor()
			if _, err := s.recover(); codes.Of(err) != b.code {
				t.Fatalf("recovery: %v, want %s", err, b.code)
			}
			if d := sameDump(withoutCursor(s.dump(true)), withoutCursor(before)); len(d) != 0 {
				t.Fatalf("a refused page wrote: %v", d)
			}
			if c := s.cursor(); c.VerifiedThroughSeq != cur.VerifiedThroughSeq || c.ChainDigest != cur.ChainDigest ||
				c.State != "BLOCKED" || c.BlockedReason != string(b.code) {
				t.Fatalf("cursor after the refusal: %+v", c)
			}

			// 2. The dry run explains it.
			d := s.dryRun()
			s.explains(d, b, record)
			if b.action == "" {
				// 3 (manual). The plan touches nothing; a human decides.
				s.manual(d, b, record, fix)
			} else {
				// 3-6.
				s.repair(d, b, record)
			}

			// 6. Recovery reaches CURRENT; every key equals an exact replay.
			if pr, err := s.recover(); err != nil || !pr.Current() {
				t.Fatalf("recovery after the repair: %v %+v", err, pr)
			}
			storetest.AssertPositions(t, s.admin, s.scope, s.events)
			if d := s.dryRun(); len(d.Report.Findings) != 0 || len(d.Plan.Actions) != 0 || len(d.Plan.Manual) != 0 {
				t.Fatalf("the repaired, CURRENT scope still drifts:\n%s", strings.Join(findings(d.Report), "\n"))
			}
			s.telemetry(b)
		})
	}
}

// dryRun runs the workflow's dry run; it must report.
func (s *scene) dryRun() *DryRun {
	s.t.Helper()
	d, err := s.wf.DryRun(ctxb, s.scope)
	s.dryRuns++
	if err != nil {
		s.t.Fatalf("dry run: %v", err)
	}
	if d.Run.Phase != recon.RunReported {
		s.t.Fatalf("dry run in phase %s", d.Run.Phase)
	}
	return d
}

// explains: every finding is on the broken record, and one of them is an
// invariant the refusal code maps to (recon.RefusalInvariants: what an
// operator who sees the code looks for) with the expected root cause. A
// record may carry a consequence too (a bogus opening inflates the
// quantity: position.derivation_agrees beside opening.proven).
func (s *scene) explains(d *DryRun, b breakage, record string) {
	s.t.Helper()
	allowed := map[recon.InvariantID]bool{}
	for _, inv := range recon.RefusalInvariants[string(b.code)] {
		allowed[inv] = true
	}
	found := false
	for _, f := range d.Report.Findings {
		if f.Record.Key() != record {
			s.t.Errorf("finding %s (%s) on %s: only %s was broken", f.Invariant, f.RootCause.Code, f.Record.Key(), record)
		}
		found = found || (f.Invariant == b.invariant && f.RootCause.Code == b.cause)
	}
	if !found || !allowed[b.invariant] {
		s.t.Fatalf("the report does not name %s (%s) on %s:\n%s", b.invariant, b.cause, record, strings.Join(findings(d.Report), "\n"))
	}
}

// manual: the plan has no action and lists the record with its reason;
// the rehearsal has nothing to run; the human's fix makes the next dry run
// clean.
func (s *scene) manual(d *DryRun, b breakage, record string, fix func()) {
	s.t.Helper()
	if len(d.Plan.Actions) != 0 || len(d.Plan.Manual) == 0 {
		s.t.Fatalf("want a manual entry and no action:\n%s", recon.FormatPlan(d.Plan))
	}
	for _, m := range d.Plan.Manual {
		if m.Record != record || m.Reason == "" {
			s.t.Errorf("manual entry %+v, want one on %s with a reason", m, record)
		}
	}
	if rh := s.wf.Rehearse(ctxb, d.Plan, d.Run.ID); !rh.Ran || len(rh.Actions) != 0 {
		s.t.Errorf("rehearsal of an empty plan: %+v", rh)
	}
	fix()
	if d := s.dryRun(); len(d.Report.Findings) != 0 {
		s.t.Fatalf("after the human's fix the dry run still reports:\n%s", strings.Join(findings(d.Report), "\n"))
	}
}

// repair: 3-5 of TestAcceptance_BlockedRefusals for an automated action.
func (s *scene) repair(d *DryRun, b breakage, record string) {
	s.t.Helper()
	s.planned(d, b, record)
	pre := snapshotDumps{exact: s.dump(true), loose: s.dump(false)}

	// 4. Apply.
	o := s.apply(d, b)
	s.records(o, 1, 0)

	// 5. Rollback of that outcome restores the pre-apply state.
	verified := s.cursor().VerifiedThroughSeq
	ro, err := s.wf.Rollback(ctxb, o, approver)
	s.rollbacks++
	if err != nil || len(ro.RolledBack) != 1 || len(ro.RollbackFailed) != 0 || len(ro.Manual) != 0 {
		s.t.Fatalf("rollback: %v %+v", err, ro)
	}
	s.restored(pre, b, verified, ro)
	s.records(o, 1, 1)

	// 5'. Again, rolled back from the audit trail alone (cross-checked
	// against the journal) by a fresh workflow holding no Outcome.
	d = s.dryRun()
	s.planned(d, b, record)
	o = s.apply(d, b)
	verified = s.cursor().VerifiedThroughSeq
	ro, err = s.freshRunner().RollbackRun(ctxb, s.scope, o.CorrelationID, approver, 0)
	s.rollbacks++
	if err != nil || len(ro.RolledBack) != 1 || !recon.SameRepair(ro.RolledBack[0], o.Applied[0]) || len(ro.Manual) != 0 {
		s.t.Fatalf("rollback from the audit trail: %v %+v", err, ro)
	}
	s.restored(pre, b, verified, ro)
	s.records(o, 1, 1)

	// 6. The repair that stays.
	d = s.dryRun()
	s.planned(d, b, record)
	s.apply(d, b)
}

// planned: one action of the expected kind on the record, targeting every
// finding, and a rehearsal that says it would succeed.
func (s *scene) planned(d *DryRun, b breakage, record string) {
	s.t.Helper()
	if len(d.Plan.Actions) != 1 || len(d.Plan.Manual) != 0 {
		s.t.Fatalf("want one %s action:\n%s", b.action, recon.FormatPlan(d.Plan))
	}
	a := d.Plan.Actions[0]
	if a.Kind != b.action || a.ID != string(b.action)+":"+record {
		s.t.Fatalf("action %s, want %s on %s", a.ID, b.action, record)
	}
	if got, want := sorted(a.Findings), sorted(findingIDs(d.Report)); strings.Join(got, ",") != strings.Join(want, ",") {
		s.t.Fatalf("the action targets %v, the report holds %v", got, want)
	}
	if rh := s.wf.Rehearse(ctxb, d.Plan, d.Run.ID); !rh.WouldSucceed() || len(rh.Actions) != 1 || rh.Actions[0].ActionID != a.ID {
		s.t.Fatalf("rehearsal: %+v", rh)
	}
}

// apply approves the plan; verification must be clean.
func (s *scene) apply(d *DryRun, b breakage) *recon.Outcome {
	s.t.Helper()
	o, err := s.wf.Apply(ctxb, d.Plan, recon.ApplyOptions{Principal: approver, Confirm: d.Plan.PlanID})
	s.applies++
	if err != nil || o.Code != "" || len(o.Applied) != 1 {
		s.t.Fatalf("apply: %v %+v", err, o)
	}
	targeted := d.Plan.Actions[0].Findings
	if !o.VerificationRan || len(o.StillDrifting) != 0 || strings.Join(sorted(o.Verified), ",") != strings.Join(sorted(targeted), ",") {
		s.t.Fatalf("verification: ran %v, verified %v, still drifting %v; targeted %v", o.VerificationRan, o.Verified, o.StillDrifting, targeted)
	}
	if !strings.HasPrefix(s.leaseOwner(), RepairOwnerPrefix) {
		s.t.Errorf("the repair did not write under its own lease: owner %q", s.leaseOwner())
	}
	return o
}

func (s *scene) leaseOwner() string {
	s.t.Helper()
	var owner string
	s.one(`SELECT owner FROM projection_catchup_lease WHERE scope = $1`, []any{s.scope}, &owner)
	return owner
}

// restored: every projection table as before the apply, byte for byte, but
// positions.updated_at of a position a handler rewrote from Before; when
// the rollback puts the record back inside a verified window (b.withdraws)
// the cursor is at genesis without bases instead, and the outcome says it
// withdrew the verification through verified (0: the cursor was at genesis
// already, withdrawn by an earlier rollback).
func (s *scene) restored(pre snapshotDumps, b breakage, verified int64, ro *recon.RollbackOutcome) {
	s.t.Helper()
	exact := b.action != recon.ActionRederivePosition && b.action != recon.ActionAdoptSourceOpening
	want := pre.exact
	if !exact {
		want = pre.loose
	}
	got := withoutNotes(s.dump(exact))
	want = withoutNotes(want)
	wantWithdrawn := int64(0)
	if b.withdraws {
		wantWithdrawn = verified
		c := s.cursor()
		if c.VerifiedThroughSeq != 0 || c.State != store.StateCatchingUp || !strings.HasPrefix(got["projection_catchup_basis"], "0 rows") {
			s.t.Fatalf("cursor %+v, bases %q after the rollback: want the verification withdrawn", c, got["projection_catchup_basis"])
		}
		got, want = withoutCursor(got), withoutCursor(want)
		delete(got, "projection_catchup_basis")
		delete(want, "projection_catchup_basis")
	}
	if ro.WithdrawnThrough != wantWithdrawn {
		s.t.Fatalf("the rollback withdrew the verification through %d, want %d", ro.WithdrawnThrough, wantWithdrawn)
	}
	if d := sameDump(got, want); len(d) != 0 {
		s.t.Fatalf("rollback is not exact:\n%s", strings.Join(d, "\n"))
	}
}

// snapshotDumps is the pre-apply state, with and without positions.updated_at.
type snapshotDumps struct{ exact, loose map[string]string }

// records: the run's journal and audit trail hold one applied (and
// reverted) entry per action, all reconciliation.repaired with the run's
// correlation id and principal.
func (s *scene) records(o *recon.Outcome, applied, reverted int) {
	s.t.Helper()
	recs, err := s.wf.Audit().Records(ctxb, o.CorrelationID)
	if err != nil {
		s.t.Fatal(err)
	}
	n := map[string]int{}
	for _, r := range recs {
		n[r.Outcome]++
		if r.Action != recon.AuditAction || r.CorrelationID != o.CorrelationID || r.Principal != approver || r.PlanID != o.PlanID {
			s.t.Errorf("audit record %+v", r)
		}
	}
	if n[recon.AuditApplied] != applied || n[recon.AuditReverted] != reverted || len(recs) != applied+reverted {
		s.t.Errorf("audit of %s: %v, want %d applied and %d reverted", o.CorrelationID, n, applied, reverted)
	}
	entries, err := s.wf.Journal().Entries(ctxb, o.CorrelationID)
	if err != nil {
		s.t.Fatal(err)
	}
	n = map[string]int{}
	for _, e := range entries {
		n[e.Event]++
	}
	if n[recon.JournalApplied] != applied || n[recon.JournalReverted] != reverted || len(entries) != applied+reverted {
		s.t.Errorf("journal of %s: %v, want %d applied and %d reverted", o.CorrelationID, n, applied, reverted)
	}
}

func findingIDs(r *recon.Report) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.ID)
	}
	return out
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestAcceptance_ApplyWhileTheWorkerHoldsTheLease: the recovery worker is
// mid-cycle (its lease unexpired): the rehearsal cannot run and says why,
// and an approved apply refuses with lease_unavailable (transient) after
// every guard passed, auditing each action as refused and writing nothing,
// neither projection row nor lease. Once the worker's cycle ends the same
// plan applies.
func TestAcceptance_ApplyWhileTheWorkerHoldsTheLease(t *testing.T) {
	t.Parallel()
	b := breakages[1] // UNEXPLAINED_BALANCE
	s := newScene(t, "venue-held", sceneOpts{})
	record, _ := b.corrupt(s)
	held, err := s.rec.AcquireLease(ctxb, s.scope, workerOwner, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lease := func() string {
		var v string
		s.one(`SELECT l::text FROM projection_catchup_lease l WHERE scope = $1`, []any{s.scope}, &v)
		return v
	}
	before, beforeLease := s.dump(true), lease()

	d := s.dryRun()
	s.explains(d, b, record)
	if got := lease(); got != beforeLease {
		t.Fatalf("the dry run touched the worker's lease:\nbefore %s\nafter  %s", beforeLease, got)
	}
	if rh := s.wf.Rehearse(ctxb, d.Plan, d.Run.ID); rh.Ran || rh.WouldSucceed() || !strings.Contains(rh.Reason, string(codes.LeaseHeld)) {
		t.Fatalf("rehearsal under the worker's lease: %+v", rh)
	}
	// The guards come first: a principal who may not approve learns
	// nothing about the lease and touches nothing.
	if _, err := s.wf.Apply(ctxb, d.Plan, recon.ApplyOptions{Principal: "mallory", Confirm: d.Plan.PlanID}); recon.CodeOf(err) != recon.ResultRepairDenied {
		t.Fatalf("apply by a principal who may not approve: %v", err)
	}
	o, err := s.wf.Apply(ctxb, d.Plan, recon.ApplyOptions{Principal: approver, Confirm: d.Plan.PlanID})
	if recon.CodeOf(err) != recon.ResultLeaseUnavailable || o.Code != recon.ResultLeaseUnavailable || codes.Of(err) != codes.LeaseHeld {
		t.Fatalf("apply under the worker's lease: %v (%s), want %s wrapping %s", err, recon.CodeOf(err), recon.ResultLeaseUnavailable, codes.LeaseHeld)
	}
	if !codes.LeaseHeld.Transient() || len(o.Applied) != 0 {
		t.Fatalf("outcome %+v", o)
	}
	if diff := sameDump(s.dump(true), before); len(diff) != 0 || lease() != beforeLease {
		t.Fatalf("a refused apply wrote: %v (lease %s, was %s)", diff, lease(), beforeLease)
	}
	recs, err := s.wf.Audit().Records(ctxb, o.CorrelationID)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Outcome != recon.AuditRefused || recs[0].Code != recon.ResultLeaseUnavailable {
		t.Fatalf("audit of the refusal: %+v", recs)
	}
	if entries, err := s.wf.Journal().Entries(ctxb, o.CorrelationID); err != nil || len(entries) != 0 {
		t.Fatalf("journal of a refusal: %v %v", entries, err)
	}

	// The worker's cycle ends: the same plan applies.
	if err := s.rec.ReleaseLease(ctxb, held); err != nil {
		t.Fatal(err)
	}
	s.apply(d, b)
	if pr, err := s.recover(); err != nil || !pr.Current() {
		t.Fatalf("recovery after the repair: %v %+v", err, pr)
	}
	storetest.AssertPositions(t, s.admin, s.scope, s.events)
}

// telemetry: one record per run, as a log line and in the metrics: every
// run the test made, its findings by invariant, its actions by outcome.
func (s *scene) telemetry(b breakage) {
	s.t.Helper()
	for _, c := range []struct {
		name string
		n    int
	}{{TelemetryDryRun, s.dryRuns}, {TelemetryRepair, s.applies}, {TelemetryRollback, s.rollbacks}} {
		if got := s.logs.count(`"msg"="` + c.name + `"`); got != c.n {
			s.t.Errorf("%d %s log lines, want one per run: %d", got, c.name, c.n)
		}
	}
	tel := s.wf.tel
	for _, c := range []struct {
		what string
		got  float64
		want int
	}{
		{"dry runs ok", testutil.ToFloat64(tel.runs.WithLabelValues(OpDryRun, CodeOK)), s.dryRuns},
		{"applies ok", testutil.ToFloat64(tel.runs.WithLabelValues(OpApply, CodeOK)), s.applies},
		{"rollbacks ok", testutil.ToFloat64(tel.runs.WithLabelValues(OpRollback, CodeOK)), s.rollbacks},
		{"actions applied", testutil.ToFloat64(tel.actions.WithLabelValues(string(b.action), ActionApplied)), s.applies},
		{"actions rolled back", testutil.ToFloat64(tel.actions.WithLabelValues(string(b.action), ActionRolledBack)), s.rollbacks},
	} {
		if int(c.got) != c.want {
			s.t.Errorf("metric %s = %v, want %d", c.what, c.got, c.want)
		}
	}
	// The broken record was reported by the dry runs before its repair
	// (manual: before the human's fix), and counted by invariant.
	if n := testutil.ToFloat64(tel.findings.WithLabelValues(string(b.invariant))); n < 1 {
		s.t.Errorf("findings of %s counted %v times", b.invariant, n)
	}
}
