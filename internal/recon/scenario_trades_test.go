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
	"testing"
	"time"
)

// scenario: one drift on the clean fixture, the findings it must produce
// (exactly: "invariant@record=cause"), the actions the plan must hold
// (exactly, by id) and the manual entries (finding id -> reason substring).
type scenario struct {
	name    string
	mutate  func(s *Snapshot)
	want    []string
	actions []string
	manual  map[string]string
	check   func(t *testing.T, s *Snapshot, r *Report, p *Plan)
}

const fxCmds = 12 // seq 3..14: B = 14

func runScenarios(t *testing.T, cases []scenario) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fixture(fxCmds)
			c.mutate(s)
			r := mustDetect(t, s)
			got := summary(r)
			want := append([]string{}, c.want...)
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("findings:%s\nwant:%s", joinLines(got), joinLines(want))
			}
			p := mustPlan(t, r, s)
			var ids []string
			covered := map[string]bool{}
			for _, a := range p.Actions {
				ids = append(ids, a.ID)
				for _, f := range a.Findings {
					covered[f] = true
				}
			}
			if strings.Join(ids, "\n") != strings.Join(c.actions, "\n") {
				t.Fatalf("actions:%s\nwant:%s", joinLines(ids), joinLines(c.actions))
			}
			manual := map[string]string{}
			for _, m := range p.Manual {
				manual[m.FindingID] = m.Reason
				covered[m.FindingID] = true
			}
			if len(manual) != len(c.manual) {
				t.Errorf("manual: got %d entries %v, want %d", len(manual), manual, len(c.manual))
			}
			for id, sub := range c.manual {
				if reason, ok := manual[id]; !ok || !strings.Contains(reason, sub) {
					t.Errorf("manual %s: reason %q, want it to contain %q", id, reason, sub)
				}
			}
			for _, f := range r.Findings {
				if !covered[f.ID] {
					t.Errorf("finding %s is neither repaired nor manual", f.ID)
				}
				inv, _ := Lookup(f.Invariant)
				if f.Statement != inv.Statement || f.Guidance != inv.Guidance || f.Strategy != inv.Strategy || f.Kind != inv.Kind {
					t.Errorf("finding %s does not copy its invariant's declaration", f.ID)
				}
			}
			if c.check != nil {
				c.check(t, s, r, p)
			}
		})
	}
}

func action(t *testing.T, p *Plan, id string) *Action {
	t.Helper()
	a := p.Action(id)
	if a == nil {
		t.Fatalf("no action %s", id)
	}
	return a
}

func TestScenario_Trades(t *testing.T) { runScenarios(t, tradeScenarios()) }

func tradeScenarios() []scenario {
	orphan := func(s *Snapshot) {
		s.SQL.Trades = append(s.SQL.Trades, TradeRow{TradeID: "t-x", TradeSeq: 999, Seq: Seq(5), Instrument: "BTC-USD", Price: d("100"),
			Quantity: d("1"), BuyOrderID: "ob-x", SellOrderID: "os-x", BuyAccount: "acc-2", SellAccount: "acc-7", TS: fxBaseTS,
			BookingStatus: "BOOKED", WrittenBy: "live"})
		// The live projector applied it to both keys.
		s.pos("acc-2", "BTC-USD").Quantity = s.pos("acc-2", "BTC-USD").Quantity.Add(d("1"))
		s.pos("acc-7", "BTC-USD").Quantity = s.pos("acc-7", "BTC-USD").Quantity.Sub(d("1"))
	}
	acc2, acc7 := posKeyOf("acc-2", "BTC-USD"), posKeyOf("acc-7", "BTC-USD")
	return []scenario{
		{name: "trade.present_in_source: orphan quarantined, its keys wait",
			mutate: orphan,
			want: []string{"trade.present_in_source@trades/trade_id=t-x=not_in_consensus",
				"position.derivation_agrees@" + acc2 + "=inputs_drift", "position.derivation_agrees@" + acc7 + "=inputs_drift"},
			actions: []string{"quarantine_trade:trades/trade_id=t-x"},
			manual: map[string]string{"position.derivation_agrees@" + acc2: "fix the key's trades first",
				"position.derivation_agrees@" + acc7: "fix the key's trades first"},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				a := action(t, p, "quarantine_trade:trades/trade_id=t-x")
				if !a.Reversible || a.LifecycleEvent != "trade.quarantined" || a.Target["scope"] != fxScope || a.Target["trade_id"] != "t-x" ||
					a.Before["seq"] != "5" || a.After["location"] != "quarantine" || a.Risk != RiskHigh || a.Rollback == "" {
					t.Errorf("quarantine action: %+v", a)
				}
			}},
		{name: "trade.present_in_source: refused on an incomplete source read",
			mutate: func(s *Snapshot) {
				orphan(s)
				s.Source.Complete, s.Source.IncompleteReason = false, "replay stopped at seq 10"
			},
			want: []string{"trade.present_in_source@trades/trade_id=t-x=source_read_incomplete",
				"position.derivation_agrees@" + acc2 + "=source_read_incomplete", "position.derivation_agrees@" + acc7 + "=source_read_incomplete"},
			manual: map[string]string{"trade.present_in_source@trades/trade_id=t-x": "may be incomplete (replay stopped at seq 10)",
				"position.derivation_agrees@" + acc2: "may be incomplete", "position.derivation_agrees@" + acc7: "may be incomplete"}},
		{name: "trade.present_in_source: a read whose decoded count disagrees with its own count is partial",
			mutate: func(s *Snapshot) { orphan(s); s.Source.EventCount++ },
			want: []string{"trade.present_in_source@trades/trade_id=t-x=source_read_incomplete",
				"position.derivation_agrees@" + acc2 + "=source_read_incomplete", "position.derivation_agrees@" + acc7 + "=source_read_incomplete"},
			manual: map[string]string{"trade.present_in_source@trades/trade_id=t-x": "decoded 62 events, the read counts 63 through B",
				"position.derivation_agrees@" + acc2: "may be incomplete", "position.derivation_agrees@" + acc7: "may be incomplete"}},
		{name: "trade.source_retained: a verified trade deleted below the cursor is restored",
			mutate:  func(s *Snapshot) { s.removeTrade("t-2") },
			want:    []string{"trade.source_retained@trades/trade_id=t-2=row_deleted_after_verification"},
			actions: []string{"restore_trade:trades/trade_id=t-2"},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				a := action(t, p, "restore_trade:trades/trade_id=t-2")
				src := s.srcTrade("t-2")
				if a.Before != nil || a.After["written_by"] != "recovery" || a.After["booking_status"] != "BOOKED" ||
					a.After["ts"] != ts(src.TS.Truncate(time.Microsecond)) || a.After["price"] != src.Price.String() || !a.Reversible {
					t.Errorf("restore action: %+v", a)
				}
			}},
		{name: "trade.source_retained: backlog above the cursor is not drift",
			mutate: func(s *Snapshot) {
				// Cursor at 12: t-10 (seq 13) and t-11 (seq 14) are catch-up's
				// backlog; the live feed lost t-11.
				*s.SQL.Cursor = CursorRow{DescriptorHash: fxDescriptor, ProtocolVersion: 1, VerifiedThroughSeq: 12, ChainDigest: fxDigestMid,
					EventCount: eventsThrough(s, 12), State: StateCatchingUp, UpdatedAt: fxNow}
				s.Source.Chain = []ChainPoint{{Seq: 12, Digest: fxDigestMid, EventCount: eventsThrough(s, 12)}}
				s.SQL = withBasisAt(s, 12)
				s.removeTrade("t-11")
				s.SQL.Positions = positionsWithout(s, "t-11")
			}},
		{name: "trade.immutable_agrees: rewritten price is manual",
			mutate: func(s *Snapshot) { s.trade("t-3").Price = s.trade("t-3").Price.Add(d("1")) },
			want:   []string{"trade.immutable_agrees@trades/trade_id=t-3=immutable_rewritten"},
			manual: map[string]string{"trade.immutable_agrees@trades/trade_id=t-3": "a human decides"}},
		{name: "trade.immutable_agrees: more than 12 places is precision_mismatch",
			mutate: func(s *Snapshot) { s.trade("t-3").Price = s.trade("t-3").Price.Add(d("0.0000000000001")) },
			want:   []string{"trade.immutable_agrees@trades/trade_id=t-3=precision_mismatch"},
			manual: map[string]string{"trade.immutable_agrees@trades/trade_id=t-3": "a human decides"}},
		{name: "trade.immutable_agrees: a rounded timestamp is timestamp_rounded",
			mutate: func(s *Snapshot) { s.trade("t-3").TS = s.srcTrade("t-3").TS.Round(time.Microsecond) },
			want:   []string{"trade.immutable_agrees@trades/trade_id=t-3=timestamp_rounded"},
			manual: map[string]string{"trade.immutable_agrees@trades/trade_id=t-3": "a human decides"}},
		{name: "trade.identity_unique: the unverified copy is quarantined once",
			mutate: func(s *Snapshot) {
				cp := *s.trade("t-3")
				cp.TradeID = "t-3b"
				s.SQL.Trades = append(s.SQL.Trades, cp)
			},
			want: []string{"trade.identity_unique@trades/trade_id=t-3b=duplicate_write_path",
				"trade.present_in_source@trades/trade_id=t-3b=not_in_consensus"},
			actions: []string{"quarantine_trade:trades/trade_id=t-3b"},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if a := action(t, p, "quarantine_trade:trades/trade_id=t-3b"); len(a.Findings) != 2 {
					t.Errorf("one record, two findings, one action: %v", a.Findings)
				}
			}},
		{name: "trade.identity_unique: no verified copy is manual",
			mutate: func(s *Snapshot) {
				for _, id := range []string{"t-y1", "t-y2"} {
					s.SQL.Trades = append(s.SQL.Trades, TradeRow{TradeID: id, TradeSeq: 500, Seq: Seq(100), Instrument: "BTC-USD", Price: d("100"),
						Quantity: d("1"), BuyOrderID: "ob-y", SellOrderID: "os-y", BuyAccount: "acc-2", SellAccount: "acc-7", TS: fxBaseTS,
						BookingStatus: "BOOKED", WrittenBy: "live"})
				}
			},
			want: []string{"trade.identity_unique@trades/trade_id=t-y2=duplicate_write_path",
				"position.derivation_agrees@" + acc2 + "=inputs_drift", "position.derivation_agrees@" + acc7 + "=inputs_drift"},
			manual: map[string]string{"trade.identity_unique@trades/trade_id=t-y2": "no row of the group is verified",
				"position.derivation_agrees@" + acc2: "fix the key's trades first", "position.derivation_agrees@" + acc7: "fix the key's trades first"}},
		{name: "trade.booking_accepted: a rejected source trade is manual",
			mutate: func(s *Snapshot) { s.trade("t-4").BookingStatus = "REJECTED" },
			want:   []string{"trade.booking_accepted@trades/trade_id=t-4=booking_rejected"},
			manual: map[string]string{"trade.booking_accepted@trades/trade_id=t-4": "a human decides"}},
		{name: "trade.provenance: legacy row (seq NULL) is manual",
			mutate: func(s *Snapshot) { s.trade("t-5").Seq = NullSeq },
			want:   []string{"trade.provenance@trades/trade_id=t-5=legacy_row"},
			manual: map[string]string{"trade.provenance@trades/trade_id=t-5": "a human decides"}},
		{name: "trade.provenance: re-sequenced row is manual",
			mutate: func(s *Snapshot) { s.trade("t-5").Seq = Seq(9) },
			want:   []string{"trade.provenance@trades/trade_id=t-5=provenance_conflict"},
			manual: map[string]string{"trade.provenance@trades/trade_id=t-5": "a human decides"}},
	}
}

// withBasisAt rebuilds the bases as a catch-up through v leaves them.
func withBasisAt(s *Snapshot, v int64) SQLSide {
	q := s.SQL
	keep := *s
	keep.Source.Trades = nil
	for _, t := range s.Source.Trades {
		if t.Seq <= v {
			keep.Source.Trades = append(keep.Source.Trades, t)
		}
	}
	m := mirror(&keep, v)
	q.Basis = m.Basis
	return q
}

// positionsWithout re-derives the SQL positions as a correct live
// projector would hold them had it never received the given trades.
func positionsWithout(s *Snapshot, ids ...string) []PositionRow {
	drop := map[string]bool{}
	for _, id := range ids {
		drop[id] = true
	}
	keep := *s
	keep.Source.Trades = nil
	for _, t := range s.Source.Trades {
		if !drop[t.TradeID] {
			keep.Source.Trades = append(keep.Source.Trades, t)
		}
	}
	return mirror(&keep, s.Source.Boundary).Positions
}
