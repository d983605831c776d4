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
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/source"
)

// A projection caught up by the store from a real member is clean: the
// provider reads both sides completely (every event through B, chained from
// genesis), the cursor's chain point is the source's, and Detect finds
// nothing.
func TestProvider_CaughtUpScopeIsClean(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "clean", 400, worldOpts{catchUp: true, keep: true})
	snap, err := w.provider(64).Read(ctxb, w.scope) // 64: many pages, chain points inside pages
	if err != nil {
		t.Fatal(err)
	}
	src := snap.Source
	if !src.Complete || src.Boundary != w.log.Committed() || src.EventCount != int64(len(w.events)) {
		t.Fatalf("source side: complete=%v boundary=%d (member %d) events=%d (member %d)",
			src.Complete, src.Boundary, w.log.Committed(), src.EventCount, len(w.events))
	}
	if n := len(src.Trades) + len(src.Orders) + len(src.Openings); int64(n) != src.EventCount || len(src.Openings) == 0 || len(src.Trades) == 0 {
		t.Fatalf("decoded %d trades, %d orders, %d openings for %d events", len(src.Trades), len(src.Orders), len(src.Openings), src.EventCount)
	}
	if d, _ := w.digestThrough(src.Boundary); src.Digest != d {
		t.Fatalf("digest through B %s, independent fold %s", src.Digest, d)
	}
	c := snap.SQL.Cursor
	if c == nil || c.State != recon.StateCurrent || len(snap.SQL.Trades) == 0 || len(snap.SQL.Positions) == 0 ||
		len(snap.SQL.OrderEvents) == 0 || len(snap.SQL.Basis) == 0 || len(snap.SQL.Runs) != 1 || snap.SQL.Lease == nil ||
		len(snap.Scopes) != 1 || len(snap.SQL.Outbox) == 0 {
		t.Fatalf("SQL side incomplete: cursor %+v trades %d positions %d order events %d basis %d runs %d lease %v scopes %d outbox %d",
			c, len(snap.SQL.Trades), len(snap.SQL.Positions), len(snap.SQL.OrderEvents), len(snap.SQL.Basis), len(snap.SQL.Runs),
			snap.SQL.Lease, len(snap.Scopes), len(snap.SQL.Outbox))
	}
	if len(src.Chain) != 1 || src.Chain[0].Seq != c.VerifiedThroughSeq || src.Chain[0].Digest != c.ChainDigest || src.Chain[0].EventCount != c.EventCount {
		t.Fatalf("chain points %+v, cursor at %d %s count %d", src.Chain, c.VerifiedThroughSeq, c.ChainDigest, c.EventCount)
	}
	rep, err := recon.Detect(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean || len(rep.Findings) != 0 || !rep.SourceComplete {
		t.Fatalf("a caught-up scope is not clean: %v", findings(rep))
	}
}

// The chain point at a run's explicit-recovery checkpoint is recorded by
// refolding the page that contains it, even mid-page: the right digest is
// accepted, a wrong one reported as an identity change.
func TestProvider_CheckpointChainPointInsideAPage(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "ckpt", 300, worldOpts{catchUp: true, keep: true})
	mid := w.events[len(w.events)/2+1].Seq // inside a page of 64
	d, n := w.digestThrough(mid)
	w.exec(`UPDATE projection_runs SET recovery_checkpoint_seq = $2, recovery_checkpoint_digest = $3,
 recovery_checkpoint_descriptor_hash = descriptor_hash, recovery_checkpoint_protocol_version = 1 WHERE scope = $1`, w.scope, mid, d)
	p := w.provider(64)
	snap, err := p.Read(ctxb, w.scope)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(snap.Source.Chain, func(c recon.ChainPoint) bool { return c.Seq == mid }); i < 0 ||
		snap.Source.Chain[i].Digest != d || snap.Source.Chain[i].EventCount != n {
		t.Fatalf("chain points %+v, want seq %d digest %s count %d", snap.Source.Chain, mid, d, n)
	}
	if rep, _ := recon.Detect(snap); len(rep.Findings) != 0 {
		t.Fatalf("a correct checkpoint is reported: %v", findings(rep))
	}
	w.exec(`UPDATE projection_runs SET recovery_checkpoint_digest = $2 WHERE scope = $1`, w.scope, strings.Repeat("a", 64))
	snap, err = p.Read(ctxb, w.scope)
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := recon.Detect(snap)
	if !has(rep, recon.CursorIdentityAgrees, recon.CauseDescriptorChanged) {
		t.Fatalf("a wrong checkpoint digest is not reported: %v", findings(rep))
	}
}

// Each broken row on real parts is reported with its invariant and cause.
func TestProvider_BrokenRowsAreDetected(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		noOpenings bool
		break_     string // run as the admin with $1 = scope
		inv        recon.InvariantID
		cause      recon.CauseCode
	}{
		{"orphan trade", false, `INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts, written_by)
SELECT scope, 'orphan-1', trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts, 'live'
  FROM trades WHERE scope = $1 ORDER BY seq LIMIT 1`, recon.TradePresentInSource, recon.CauseNotInConsensus},
		{"changed position", false, `UPDATE positions SET quantity = quantity + 7
 WHERE scope = $1 AND (account, instrument) = (SELECT account, instrument FROM positions WHERE scope = $1 ORDER BY account, instrument LIMIT 1)`,
			recon.PositionDerivationAgrees, recon.CauseUnexplainedWrite},
		{"stored opening without a source event", true, `UPDATE positions SET opening_quantity = 5, opening_avg_cost = 100, opening_proven = true, quantity = quantity + 5
 WHERE scope = $1 AND (account, instrument) = (SELECT account, instrument FROM positions WHERE scope = $1 ORDER BY account, instrument LIMIT 1)`,
			recon.OpeningProven, recon.CauseOpeningWithoutSourceEvent},
		{"order row mismatch", false, `UPDATE orders SET remaining = remaining + 1
 WHERE scope = $1 AND order_id = (SELECT order_id FROM orders WHERE scope = $1 ORDER BY order_id LIMIT 1)`,
			recon.OrderVersionAgrees, recon.CauseRowMismatch},
		{"immutable trade conflict", false, `UPDATE trades SET price = price + 1
 WHERE scope = $1 AND trade_id = (SELECT trade_id FROM trades WHERE scope = $1 ORDER BY trade_id LIMIT 1)`,
			recon.TradeImmutableAgrees, recon.CauseImmutableRewritten},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "broken", 200, worldOpts{catchUp: true, noOpenings: tc.noOpenings})
			p := w.provider(0)
			if rep := detect(t, p, w.scope); len(rep.Findings) != 0 {
				t.Fatalf("not clean before breaking: %v", findings(rep))
			}
			w.exec(tc.break_, w.scope)
			rep := detect(t, p, w.scope)
			if !has(rep, tc.inv, tc.cause) {
				t.Fatalf("want %s with cause %s, got %v", tc.inv, tc.cause, findings(rep))
			}
		})
	}
}

// A member that is down or refuses yields an error and no snapshot; through
// the workflow, snapshot_unavailable and no report.
func TestProvider_SourceFailureYieldsNoReport(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "down", 50, worldOpts{catchUp: true})
	refusing, err := source.NewClient(source.ClientConfig{BaseURL: w.srv.URL + "/no-such-prefix"})
	if err != nil {
		t.Fatal(err)
	}
	down, err := source.NewClient(source.ClientConfig{BaseURL: "http://127.0.0.1:1", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		src  Fetcher
		want func(error) bool
	}{
		{"member down", down, func(err error) bool { var u *source.UnavailableError; return errors.As(err, &u) }},
		{"member refuses", refusing, func(err error) bool { var r *source.RefusalError; return errors.As(err, &r) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := w.provider(0)
			p.Source = tc.src
			snap, err := p.Read(ctxb, w.scope)
			if err == nil || snap != nil || !tc.want(err) {
				t.Fatalf("Read = %v, %v", snap, err)
			}
			wf := &recon.Workflow{Provider: p, Clock: time.Now, StaleAfter: time.Minute}
			res, err := wf.DryRun(ctxb, w.scope)
			if recon.CodeOf(err) != recon.ResultSnapshotUnavailable || res == nil || res.Report != nil || res.Plan != nil {
				t.Fatalf("DryRun = %+v, %v", res, err)
			}
		})
	}
}

// A member whose boundary is 0 (an empty source) while SQL holds rows: the
// read is complete and empty, and every finding is explained as
// source_read_empty; the planner touches nothing.
func TestProvider_EmptySourceIsSourceReadEmpty(t *testing.T) {
	t.Parallel()
	full := newWorld(t, "empty", 60, worldOpts{catchUp: true})
	empty := newWorld(t, "empty", 0, worldOpts{})
	// Point the populated projection at the empty member.
	p := full.provider(0)
	p.Source = empty.client
	snap, err := p.Read(ctxb, full.scope)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Source.Complete || snap.Source.Boundary != 0 || !snap.Source.Empty() {
		t.Fatalf("source side %+v", snap.Source)
	}
	rep, err := recon.Detect(snap)
	if err != nil {
		t.Fatal(err)
	}
	// Every SQL row is past B = 0 (not verifiable); the cursor claims more
	// than the source holds, and the empty read, not the projection, is why.
	if !rep.SourceReadEmpty || len(rep.Findings) == 0 || !has(rep, recon.CursorWithinBoundary, recon.CauseSourceReadEmpty) {
		t.Fatalf("want source_read_empty, got sourceReadEmpty=%v %v", rep.SourceReadEmpty, findings(rep))
	}
	for _, f := range rep.Findings {
		if f.RootCause.Code != recon.CauseSourceReadEmpty {
			t.Errorf("finding %s explained as %s, not source_read_empty", f.ID, f.RootCause.Code)
		}
	}
	plan, err := recon.PlanRepairs(rep, snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Actions) != 0 {
		t.Fatalf("the planner acts on an empty read: %+v", plan.Actions)
	}
}

// The provider, Detect, PlanRepairs and a whole dry run never write: they run
// as projection_recovery_readonly (SELECT only) and every table is
// byte-identical afterwards, on a clean and on a broken scope.
func TestProvider_ReadOnlyRoleWritesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "ro", 150, worldOpts{catchUp: true})
	w.exec(`UPDATE positions SET quantity = quantity + 1 WHERE scope = $1`, w.scope)
	before := w.dump()
	p := w.provider(100)
	snap, err := p.Read(ctxb, w.scope)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := recon.Detect(snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) == 0 {
		t.Fatal("the broken scope reads clean")
	}
	if _, err := recon.PlanRepairs(rep, snap); err != nil {
		t.Fatal(err)
	}
	wf := &recon.Workflow{Provider: p, Clock: time.Now, StaleAfter: time.Minute}
	if _, err := wf.DryRun(ctxb, w.scope); err != nil {
		t.Fatal(err)
	}
	if after := w.dump(); after != before {
		t.Fatalf("reading wrote:\nbefore %s\nafter  %s", before, after)
	}
}

// A cancelled context ends the read with an error, never a partial snapshot.
func TestProvider_CancelledReadReturnsNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "cancel", 50, worldOpts{catchUp: true})
	ctx, cancel := context.WithCancel(ctxb)
	cancel()
	if snap, err := w.provider(0).Read(ctx, w.scope); err == nil || snap != nil {
		t.Fatalf("Read = %v, %v", snap, err)
	}
}

func detect(t *testing.T, p *Provider, scope string) *recon.Report {
	t.Helper()
	snap, err := p.Read(ctxb, scope)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := recon.Detect(snap)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func has(r *recon.Report, inv recon.InvariantID, cause recon.CauseCode) bool {
	return slices.ContainsFunc(r.Findings, func(f recon.Finding) bool { return f.Invariant == inv && f.RootCause.Code == cause })
}

// A row's seq is a value (recon.RowSeq), NULL its sentinel: a NULL seq on
// real PostgreSQL still reads as legacy history (trade and order version),
// and the one stored value that collides with the sentinel fails the read
// instead of turning a corrupt row into legacy history.
func TestProvider_RowSeqNullIsLegacyAndTheSentinelIsRefused(t *testing.T) {
	t.Parallel()
	first := func(table, id string) string {
		return `UPDATE ` + table + ` SET seq = %s WHERE scope = $1 AND ` + id + ` = (SELECT ` + id + ` FROM ` + table + ` WHERE scope = $1 ORDER BY ` + id + ` LIMIT 1)`
	}
	for _, tc := range []struct {
		name, break_ string
		inv          recon.InvariantID
		refused      string // the read fails naming this; "" = reads
	}{
		{"NULL trade seq is legacy", fmt.Sprintf(first("trades", "trade_id"), "NULL"), recon.TradeProvenance, ""},
		{"NULL order version seq is legacy", fmt.Sprintf(first("order_events", "order_id"), "NULL"), recon.OrderVersionAgrees, ""},
		{"trade seq at the sentinel is refused", fmt.Sprintf(first("trades", "trade_id"), "-9223372036854775808"), "", "trades: trade "},
		{"order seq at the sentinel is refused", fmt.Sprintf(first("orders", "order_id"), "-9223372036854775808"), "", "orders: order "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "rowseq", 60, worldOpts{catchUp: true})
			w.exec(tc.break_, w.scope)
			p := w.provider(0)
			if tc.refused != "" {
				snap, err := p.Read(ctxb, w.scope)
				if err == nil || snap != nil || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "not a consensus seq") {
					t.Fatalf("Read = %v, %v; want a refusal naming %q", snap != nil, err, tc.refused)
				}
				return
			}
			if rep := detect(t, p, w.scope); !has(rep, tc.inv, recon.CauseLegacyRow) {
				t.Fatalf("want %s with cause %s, got %v", tc.inv, recon.CauseLegacyRow, findings(rep))
			}
		})
	}
}
