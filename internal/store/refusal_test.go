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

package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/codes"

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/source"
	. "github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// The base scenario of the refusal tests: an opening, an order, two trades and
// a zero-output command, boundary 4.
var (
	evOpen   = Opening(1, "A", "ACME", "10", "100")
	evOrder  = Order(2, "o1", 1, "A", "ACME", wire.SideBuy, "110", "5", "0", wire.StatusFilled)
	evTrade1 = Trade(2, 1, "t1", "ACME", "110", "5", "A", "B")
	evTrade2 = Trade(3, 2, "t2", "ACME", "120", "2", "B", "A")
)

func baseLedger(t testing.TB) *Ledger { return NewLedger(t, 4, evOpen, evOrder, evTrade1, evTrade2) }

type fixture struct {
	s   *Store
	run Run
	l   Lease
	src *Ledger
}

func setup(t *testing.T) fixture {
	t.Helper()
	t.Parallel()
	return newFixture(t)
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	s := newStore(t)
	return fixture{s: s, run: addRun(t, s, "s", PhaseActive, nil), l: lease(t, s, "s", "a"), src: baseLedger(t)}
}

func (f fixture) page() *source.Page { return f.src.Page(0, 100) }

// rehash recomputes a page's digestThrough after a test edits its events.
func rehash(p *source.Page) *source.Page {
	d := p.DigestAfter
	for _, e := range p.Events {
		d = chain.Next(d, e.Wire)
	}
	p.DigestThrough = d
	return p
}

// Every code has a test named TestRefusal_<CODE> (this file's convention).
func TestCodes_EveryRefusalCodeHasATest(t *testing.T) {
	var all strings.Builder
	files, _ := os.ReadDir(".")
	for _, f := range files {
		if strings.HasSuffix(f.Name(), "_test.go") {
			b, _ := os.ReadFile(f.Name())
			all.Write(b)
		}
	}
	for _, c := range codes.All {
		if !regexp.MustCompile(`func TestRefusal_` + string(c) + `\(`).MatchString(all.String()) {
			t.Errorf("code %s has no TestRefusal_%s", c, c)
		}
	}
	transient := map[codes.Code]bool{codes.SourceUnavailable: true, codes.LeaseHeld: true, codes.LeaseLost: true, codes.Superseded: true, codes.CursorMoved: true, codes.DatabaseUnavailable: true,
		codes.CommitOutcomeUnknown: true} // SchemaMissing is not transient: a DBA migrates
	for _, c := range codes.All {
		if c.Transient() != transient[c] {
			t.Errorf("%s.Transient() = %v", c, c.Transient())
		}
	}
}

func TestRefusal_ORPHAN_TRADE(t *testing.T) {
	f := setup(t)
	seedTrade(t, f.s, "s", Trade(2, 9, "t9", "ACME", "1", "1", "A", "B"), i64(2), "BOOKED")
	refused(t, f.s, f.l, f.run, f.page(), codes.OrphanTrade)
}

// Orphans are found by counting the window's retained trades against the
// page trades retained inside it (checkTrades): a page trade retained at
// another seq, inside or outside the window, must neither hide an orphan nor
// pass for one, and ORPHAN_TRADE comes before what the comparison finds.
func TestRefusal_ORPHAN_TRADE_Counted(t *testing.T) {
	orphan := Trade(2, 9, "t9", "ACME", "1", "1", "A", "B")
	type seeded struct {
		e   wire.Event
		seq int64
	}
	for _, tc := range []struct {
		name string
		rows []seeded
		want codes.Code
	}{
		{"an orphan beside a page trade retained where it belongs", []seeded{{evTrade1, 2}, {orphan, 2}}, codes.OrphanTrade},
		{"an orphan beside a page trade retained after the window", []seeded{{evTrade1, 99}, {orphan, 2}}, codes.OrphanTrade},
		{"an orphan beside a page trade retained at another seq of the window", []seeded{{evTrade1, 3}, {orphan, 4}}, codes.OrphanTrade},
		{"a page trade retained after the window, no orphan", []seeded{{evTrade1, 99}}, codes.TradeProvenanceConflict},
		{"a page trade retained at another seq of the window, no orphan", []seeded{{evTrade1, 3}, {evTrade2, 3}}, codes.TradeProvenanceConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			for _, r := range tc.rows {
				seedTrade(t, f.s, "s", r.e, i64(r.seq), "BOOKED")
			}
			refused(t, f.s, f.l, f.run, f.page(), tc.want)
		})
	}
}

func TestRefusal_IMMUTABLE_TRADE_CONFLICT(t *testing.T) {
	f := setup(t)
	seedTrade(t, f.s, "s", Trade(2, 1, "t1", "ACME", "111", "5", "A", "B"), i64(2), "BOOKED")
	refused(t, f.s, f.l, f.run, f.page(), codes.ImmutableTradeConflict)
}

func TestRefusal_REJECTED_BOOKING(t *testing.T) {
	f := setup(t)
	seedTrade(t, f.s, "s", evTrade1, i64(2), "REJECTED")
	refused(t, f.s, f.l, f.run, f.page(), codes.RejectedBooking)
}

func TestRefusal_TRADE_PROVENANCE_CONFLICT(t *testing.T) {
	f := setup(t)
	seedTrade(t, f.s, "s", evTrade1, i64(3), "BOOKED")
	refused(t, f.s, f.l, f.run, f.page(), codes.TradeProvenanceConflict)
}

// Rows without consensus provenance (seq NULL) anywhere in the scope refuse:
// trades, order versions and current orders alike.
func TestRefusal_UNKNOWN_LEGACY_HISTORY(t *testing.T) {
	f := setup(t)
	seedTrade(t, f.s, "s", Trade(2, 7, "legacy", "ACME", "1", "1", "X", "Y"), nil, "BOOKED")
	refused(t, f.s, f.l, f.run, f.page(), codes.UnknownLegacyHistory)
	mustExec(t, f.s, `DELETE FROM trades`)
	seedOrder(t, f.s, "s", Order(9, "legacy-o", 1, "X", "ACME", wire.SideBuy, "1", "1", "1", wire.StatusNew), nil)
	refused(t, f.s, f.l, f.run, f.page(), codes.UnknownLegacyHistory)
}

func TestRefusal_ORPHAN_ORDER(t *testing.T) {
	f := setup(t)
	seedOrder(t, f.s, "s", Order(3, "o9", 1, "A", "ACME", wire.SideBuy, "1", "1", "1", wire.StatusNew), i64(3))
	refused(t, f.s, f.l, f.run, f.page(), codes.OrphanOrder)
}

func TestRefusal_ORDER_PROVENANCE_CONFLICT(t *testing.T) {
	f := setup(t)
	seedOrder(t, f.s, "s", evOrder, i64(7))
	refused(t, f.s, f.l, f.run, f.page(), codes.OrderProvenanceConflict)
}

func TestRefusal_ORDER_ROW_MISMATCH(t *testing.T) {
	f := setup(t)
	o := *evOrder.Order
	o.Remaining = Dec("1")
	seedOrder(t, f.s, "s", wire.Event{Type: wire.TypeOrder, Order: &o}, i64(2))
	refused(t, f.s, f.l, f.run, f.page(), codes.OrderRowMismatch)
}

// FR-APR06: the reviewed timestamp comparator: timestamptz keeps microseconds and pgx
// truncates nanoseconds, so a row equal to the source truncated to the
// microsecond matches, and a row one microsecond off (e.g. a writer that
// rounded instead of truncating) is a mismatch.
func TestFRAPR06_OrderTimestampComparatorAtMicrosecondPrecision(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	run := addRun(t, s, "s", PhaseActive, nil)
	l := lease(t, s, "s", "a")
	src := Order(1, "o1", 1, "A", "ACME", wire.SideBuy, "1", "1", "1", wire.StatusNew)
	src.Order.TS = time.Date(2026, 3, 1, 0, 0, 0, 123456999, time.UTC) // .123456999: 999 ns below the next µs
	led := NewLedger(t, 1, src)
	// The live projector wrote it through pgx: stored as .123456.
	seedOrder(t, s, "s", src, i64(1))
	if _, err := s.ApplyPage(ctxb, l, run, led.Page(0, 10)); err != nil {
		t.Fatalf("row truncated to µs must match its source event: %v", err)
	}

	s2 := newStore(t)
	run2 := addRun(t, s2, "s", PhaseActive, nil)
	l2 := lease(t, s2, "s", "a")
	rounded := *src.Order
	rounded.TS = time.Date(2026, 3, 1, 0, 0, 0, 123457000, time.UTC) // rounded up: one µs off
	seedOrder(t, s2, "s", wire.Event{Type: wire.TypeOrder, Order: &rounded}, i64(1))
	refused(t, s2, l2, run2, led.Page(0, 10), codes.OrderRowMismatch)
}

func TestRefusal_OPENING_CONFLICT(t *testing.T) {
	f := setup(t)
	mustExec(t, f.s, `INSERT INTO positions (scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq, quantity, avg_cost)
VALUES ('s', 'A', 'ACME', 11, 100, true, 1, 11, 100)`)
	refused(t, f.s, f.l, f.run, f.page(), codes.OpeningConflict)
}

// Balances of EVERY touched key are checked, also keys the page touches only
// through a trade that is already retained.
func TestRefusal_UNEXPLAINED_BALANCE(t *testing.T) {
	f := setup(t)
	// t1 retained correctly, but B's balance says 0 instead of -5.
	seedTrade(t, f.s, "s", evTrade1, i64(2), "BOOKED")
	seedPosition(t, f.s, "s", "A", "ACME", "5", "110", true, "0")
	seedPosition(t, f.s, "s", "B", "ACME", "0", "0", true, "0")
	refused(t, f.s, f.l, f.run, f.page(), codes.UnexplainedBalance)

	// A key with a row but no retained trades must hold its opening.
	g := newFixture(t)
	seedPosition(t, g.s, "s", "B", "ACME", "7", "50", true, "0")
	refused(t, g.s, g.l, g.run, g.page(), codes.UnexplainedBalance)
}

// FR-APR06: a balance on a key the source never mentions blocks the page that
// would make the scope CURRENT.
func TestFRAPR06_UnexplainedPhantomBalanceBlocksCompleteness(t *testing.T) {
	f := setup(t)
	seedPosition(t, f.s, "s", "Z", "ACME", "5", "10", true, "0")
	if _, err := f.s.ApplyPage(ctxb, f.l, f.run, f.src.Page(0, 3)); err != nil {
		t.Fatalf("a partial page claims nothing about Z: %v", err)
	}
	refused(t, f.s, f.l, f.run, f.src.Page(2, 100), codes.UnexplainedBalance)
}

func TestRefusal_UNPROVEN_INITIAL_BALANCE(t *testing.T) {
	f := setup(t)
	seedPosition(t, f.s, "s", "B", "ACME", "3", "90", false, "3")
	refused(t, f.s, f.l, f.run, f.page(), codes.UnprovenInitialBalance)
}

func TestRefusal_CHAIN_MISMATCH(t *testing.T) {
	f := setup(t)
	p := f.page()
	p.DigestThrough = strings.Repeat("a", 64)
	refused(t, f.s, f.l, f.run, p, codes.ChainMismatch)
	// digestAfter that is not the cursor's digest (cursor at genesis).
	if _, err := f.s.ApplyPage(ctxb, f.l, f.run, f.src.Page(0, 1)); err != nil {
		t.Fatal(err)
	}
	q := f.src.Page(1, 100)
	q.DigestAfter = strings.Repeat("b", 64)
	refused(t, f.s, f.l, f.run, rehash(q), codes.ChainMismatch)
}

func TestRefusal_MALFORMED_EVENT(t *testing.T) {
	f := setup(t)
	p := f.page()
	p.Events[1].Wire = []byte(`{"type":"order","seq":2}`)
	refused(t, f.s, f.l, f.run, rehash(p), codes.MalformedEvent)
}

func TestRefusal_ORDERING_VIOLATION(t *testing.T) {
	f := setup(t)
	p := f.page()
	p.Events[2], p.Events[3] = p.Events[3], p.Events[2] // seq 3 before seq 2
	refused(t, f.s, f.l, f.run, rehash(p), codes.OrderingViolation)
	q := f.page()
	q.ThroughSeq = 5 // beyond the boundary
	refused(t, f.s, f.l, f.run, q, codes.OrderingViolation)
	r := f.page()
	r.Events[3].Seq = 2 // page seq disagrees with the wire seq
	refused(t, f.s, f.l, f.run, r, codes.OrderingViolation)
}

func TestRefusal_PROTOCOL_MISMATCH(t *testing.T) {
	f := setup(t)
	p := f.page()
	p.ProtocolVersion = 2
	refused(t, f.s, f.l, f.run, p, codes.ProtocolMismatch)
}

func TestRefusal_DESCRIPTOR_MISMATCH(t *testing.T) {
	f := setup(t)
	p := f.page()
	p.DescriptorHash = strings.Repeat("e", 64)
	refused(t, f.s, f.l, f.run, p, codes.DescriptorMismatch)
}

func TestRefusal_NOT_ELIGIBLE(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	if _, err := s.SelectedRun(ctxb, "none"); codes.Of(err) != codes.NotEligible {
		t.Fatalf("no selected run: %v", err)
	}
	// The rows share the parent's database (one scope each) and run in
	// order: refused compares a snapshot of the whole database, so no row
	// may run concurrently with another.
	for _, c := range []struct {
		name         string
		scope, phase string
		managed      bool
	}{
		{"sealed run", "sealed", PhaseSealed, true},
		{"unmanaged run", "unmanaged", PhaseActive, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			mustExec(t, s, `INSERT INTO projection_runs (scope, managed, selected, phase, descriptor_hash, protocol_version) VALUES ($1, $2, true, $3, $4, 1)`,
				c.scope, c.managed, c.phase, testDescriptor)
			run, err := s.SelectedRun(ctxb, c.scope)
			if err != nil {
				t.Fatal(err)
			}
			refused(t, s, lease(t, s, c.scope, "a"), run, baseLedger(t).Page(0, 100), codes.NotEligible)
		})
	}
}

// FR-APR09: a DRAINING run whose cursor is already past its frozen seq.
func TestRefusal_BEYOND_FROZEN(t *testing.T) {
	f := setup(t)
	catchUp(t, f.s, f.l, f.run, f.src, 100)
	mustExec(t, f.s, `UPDATE projection_runs SET phase = 'DRAINING', frozen_seq = 2`)
	run, err := f.s.SelectedRun(ctxb, "s")
	if err != nil {
		t.Fatal(err)
	}
	refused(t, f.s, f.l, run, f.src.Page(4, 100), codes.BeyondFrozen)
}

// FR-APR09: any change of the selected run's barrier since the caller read it
// supersedes the page; nothing is written.
func TestRefusal_SUPERSEDED(t *testing.T) {
	for _, tc := range []struct {
		name, change string
	}{
		{"run began draining", `UPDATE projection_runs SET phase = 'DRAINING', frozen_seq = 3`},
		{"descriptor changed", `UPDATE projection_runs SET descriptor_hash = 'other'`},
		{"run deselected", `UPDATE projection_runs SET selected = false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			mustExec(t, f.s, tc.change)
			refused(t, f.s, f.l, f.run, f.page(), codes.Superseded)
		})
	}
}

// FR-APR09 with per-key locks (docs/live-writes.md): the slice reads the run without a
// row lock first, so that live writes (which update the run row) do not wait
// for it; a barrier change that commits after that read is seen by the
// FOR SHARE re-read before the cursor moves, and supersedes the slice:
// nothing written.
func TestRefusal_SUPERSEDED_MidSlice(t *testing.T) {
	for _, tc := range []struct {
		name, change string
	}{
		{"run began draining", `UPDATE projection_runs SET phase = 'DRAINING', frozen_seq = 3`},
		{"run deselected", `UPDATE projection_runs SET selected = false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			before := snapshot(t, f.s)
			f.s.hooks.afterRunRead = func(context.Context, pgx.Tx) error {
				_, err := adminOf(t, f.s).Exec(ctxb, tc.change) // commits at once: no row lock is held
				return err
			}
			_, err := f.s.ApplyPage(ctxb, f.l, f.run, f.page())
			wantCode(t, err, codes.Superseded)
			f.s.hooks.afterRunRead = nil
			// Everything but the runs (the last line: the change itself).
			projection := func(snap string) string { return snap[:strings.LastIndex(strings.TrimSuffix(snap, "\n"), "\n")] }
			if after := snapshot(t, f.s); projection(after) != projection(before) {
				t.Fatalf("a superseded slice wrote:\n%s\nwas:\n%s", after, before)
			}
		})
	}
}

func TestRefusal_CURSOR_MOVED(t *testing.T) {
	f := setup(t)
	if _, err := f.s.ApplyPage(ctxb, f.l, f.run, f.src.Page(0, 1)); err != nil {
		t.Fatal(err)
	}
	refused(t, f.s, f.l, f.run, f.src.Page(0, 1), codes.CursorMoved)
}

func TestRefusal_LEASE_HELD(t *testing.T) {
	f := setup(t)
	_, err := f.s.AcquireLease(ctxb, "s", "b", time.Minute)
	wantCode(t, err, codes.LeaseHeld)
}

func TestRefusal_LEASE_LOST(t *testing.T) {
	f := setup(t)
	if err := f.s.ReleaseLease(ctxb, f.l); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.AcquireLease(ctxb, "s", "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	refused(t, f.s, f.l, f.run, f.page(), codes.LeaseLost)
	_, err := f.s.RenewLease(ctxb, f.l, time.Minute)
	wantCode(t, err, codes.LeaseLost)
	wantCode(t, f.s.RecordOutcome(ctxb, f.l, "s", StateBlocked, codes.OrphanTrade, 4), codes.LeaseLost)
}

// The database goes away mid-page (the backend is terminated after the lease
// is locked): a typed, transient refusal and nothing written.
func TestRefusal_DATABASE_UNAVAILABLE(t *testing.T) {
	f := setup(t)
	before := snapshot(t, f.s)
	f.s.hooks.afterLeaseLocked = func(ctx context.Context, tx pgx.Tx) error {
		var pid int
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return err
		}
		_, err := f.s.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
		return err
	}
	_, err := f.s.ApplyPage(ctxb, f.l, f.run, f.page())
	wantCode(t, err, codes.DatabaseUnavailable)
	var r *codes.Refusal
	if !errors.As(err, &r) || !r.Code.Transient() {
		t.Fatalf("want a transient *codes.Refusal, got %T %v", err, err)
	}
	f.s.hooks.afterLeaseLocked = nil
	if after := snapshot(t, f.s); after != before {
		t.Fatal("a page interrupted by the database wrote something")
	}
	// A server that is not there at all.
	_, err = Open(ctxb, "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2")
	wantCode(t, err, codes.DatabaseUnavailable)
}

func TestRefusal_EXPLICIT_CHECKPOINT_MISMATCH(t *testing.T) {
	f := setup(t)
	mustExec(t, f.s, `UPDATE projection_runs SET recovery_checkpoint_seq = 2, recovery_checkpoint_digest = $1`, strings.Repeat("c", 64))
	run, _ := f.s.SelectedRun(ctxb, "s")
	refused(t, f.s, f.l, run, f.page(), codes.ExplicitCheckpointMismatch)
	mustExec(t, f.s, `UPDATE projection_runs SET recovery_checkpoint_seq = NULL, recovery_checkpoint_digest = NULL, recovery_checkpoint_descriptor_hash = 'other'`)
	run, _ = f.s.SelectedRun(ctxb, "s")
	refused(t, f.s, f.l, run, f.page(), codes.ExplicitCheckpointMismatch)
}

func TestRefusal_SOURCE_UNAVAILABLE(t *testing.T) {
	wantCode(t, &source.UnavailableError{Status: 503, Err: errors.New("down")}, codes.SourceUnavailable)
	wantCode(t, &source.RefusalError{Status: 409, Code: source.CodeAfterSeqBeyondBoundary}, codes.SourceUnavailable)
}

func TestRefusal_SOURCE_REFUSED(t *testing.T) {
	wantCode(t, &source.RefusalError{Status: 409, Code: source.CodeDiscontinuity}, codes.SourceRefused)
}

func TestRefusal_SOURCE_VERIFICATION(t *testing.T) {
	wantCode(t, &source.VerificationError{Code: source.VerifyDigestMismatch}, codes.SourceVerification)
}

// TestRefusal_HISTORY_REWRITTEN: the idle proof's refusal (internal/catchup,
// TestFRAPR04_IdleAnswerOverARewrittenHistoryIsNeverCurrent, runs it against
// a real member) keeps its code through the error chain and needs review.
func TestRefusal_HISTORY_REWRITTEN(t *testing.T) {
	err := fmt.Errorf("cycle: %w", codes.Newf(codes.HistoryRewritten, "chain through 40 differs"))
	wantCode(t, err, codes.HistoryRewritten)
	if codes.HistoryRewritten.Transient() {
		t.Fatal("HISTORY_REWRITTEN is transient: a member serving another history would be retried as if it were down")
	}
}

func TestRefusal_INTERNAL(t *testing.T) {
	wantCode(t, errors.New("something else"), codes.Internal)
	if codes.Of(nil) != "" {
		t.Fatal("nil error has a code")
	}
}
