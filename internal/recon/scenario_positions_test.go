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
	"testing"

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

func TestScenario_Positions(t *testing.T) { runScenarios(t, positionScenarios()) }

func positionScenarios() []scenario {
	acc2, acc3e, acc0, acc1e := posKeyOf("acc-2", "BTC-USD"), posKeyOf("acc-3", "ETH-USD"), posKeyOf("acc-0", "BTC-USD"), posKeyOf("acc-1", "ETH-USD")
	phantom := posKeyOf("acc-0", "XRP-USD")
	addPhantom := func(s *Snapshot, account string) {
		s.SQL.Positions = append(s.SQL.Positions, PositionRow{Account: account, Instrument: "XRP-USD", OpeningQuantity: decimal.Zero,
			OpeningAvgCost: decimal.Zero, OpeningProven: true, Quantity: d("5"), AvgCost: d("1")})
	}
	return []scenario{
		{name: "position.derivation_agrees: arrival-order average cost is re-derived",
			mutate:  func(s *Snapshot) { s.pos("acc-2", "BTC-USD").AvgCost = d("101.25") },
			want:    []string{"position.derivation_agrees@" + acc2 + "=arrival_order"},
			actions: []string{"rederive_position:" + acc2},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				a := action(t, p, "rederive_position:"+acc2)
				b := s.basisOf("acc-2", "BTC-USD")
				if a.Before["avg_cost"] != "101.25" || a.After["avg_cost"] != b.AvgCost.String() || a.After["quantity"] != b.Quantity.String() ||
					a.Before["basis_seq"] != "14" || !a.Reversible || a.Target["account"] != "acc-2" || a.Target["table"] != TablePositions {
					t.Errorf("rederive action: %+v", a)
				}
			}},
		{name: "position.derivation_agrees: a quantity nothing explains",
			mutate:  func(s *Snapshot) { s.pos("acc-2", "BTC-USD").Quantity = s.pos("acc-2", "BTC-USD").Quantity.Add(d("7")) },
			want:    []string{"position.derivation_agrees@" + acc2 + "=unexplained_write"},
			actions: []string{"rederive_position:" + acc2}},
		{name: "position.derivation_agrees: a key with inputs but no row",
			mutate: func(s *Snapshot) {
				p := s.SQL.Positions[:0]
				for _, r := range s.SQL.Positions {
					if r.Account != "acc-3" || r.Instrument != "ETH-USD" {
						p = append(p, r)
					}
				}
				s.SQL.Positions = p
				b := s.SQL.Basis[:0]
				for _, r := range s.SQL.Basis {
					if r.Account != "acc-3" || r.Instrument != "ETH-USD" {
						b = append(b, r)
					}
				}
				s.SQL.Basis = b
			},
			want:    []string{"position.derivation_agrees@" + acc3e + "=position_never_written"},
			actions: []string{"rederive_position:" + acc3e},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if a := action(t, p, "rederive_position:"+acc3e); a.Before != nil || a.After["opening_proven"] != "true" || a.After["quantity"] == "" {
					t.Errorf("creating action: %+v", a)
				}
			}},
		{name: "position.derivation_agrees: more than 12 places is precision_mismatch",
			mutate: func(s *Snapshot) {
				s.pos("acc-2", "BTC-USD").AvgCost = s.pos("acc-2", "BTC-USD").AvgCost.Add(d("0.0000000000004"))
			},
			want:    []string{"position.derivation_agrees@" + acc2 + "=precision_mismatch"},
			actions: []string{"rederive_position:" + acc2}},
		{name: "position.derivation_agrees: trailing zeros are not drift",
			mutate: func(s *Snapshot) {
				p := s.pos("acc-2", "BTC-USD")
				p.AvgCost = decimal.RequireFromString(p.AvgCost.StringFixed(20)) // numeric keeps no canonical scale
			}},
		{name: "position.source_backed: a phantom balance on a clean read is dropped",
			mutate:  func(s *Snapshot) { addPhantom(s, "acc-0") },
			want:    []string{"position.source_backed@" + phantom + "=phantom_balance"},
			actions: []string{"drop_position:" + phantom},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if a := action(t, p, "drop_position:"+phantom); a.After != nil || a.Before["quantity"] != "5" || !a.Reversible {
					t.Errorf("drop action: %+v", a)
				}
			}},
		{name: "position.source_backed: an account the source does not know is key_not_loaded",
			mutate: func(s *Snapshot) { addPhantom(s, "ghost") },
			want:   []string{"position.source_backed@" + posKeyOf("ghost", "XRP-USD") + "=key_not_loaded"},
			manual: map[string]string{"position.source_backed@" + posKeyOf("ghost", "XRP-USD"): "not a clean source read"}},
		{name: "position.source_backed: a row claiming an unproven opening is manual",
			mutate: func(s *Snapshot) {
				addPhantom(s, "acc-0")
				p := &s.SQL.Positions[len(s.SQL.Positions)-1]
				p.OpeningQuantity, p.OpeningAvgCost, p.OpeningProven = d("5"), d("1"), false
			},
			want: []string{"position.source_backed@" + phantom + "=unproven_opening_claim",
				"opening.proven@" + phantom + "=opening_without_source_event"},
			manual: map[string]string{"position.source_backed@" + phantom: "claims an opening the source never emitted",
				"opening.proven@" + phantom: "claims an opening the source never emitted"}},
		{name: "position.basis_agrees: a stale basis is invalidated by a re-derivation",
			mutate:  func(s *Snapshot) { s.basisOf("acc-2", "BTC-USD").Quantity = d("42") },
			want:    []string{"position.basis_agrees@" + acc2 + "=basis_stale"},
			actions: []string{"rederive_position:" + acc2},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if a := action(t, p, "rederive_position:"+acc2); a.Before["basis_quantity"] != "42" || a.After["quantity"] != a.Before["quantity"] {
					t.Errorf("basis action: %+v", a)
				}
			}},
		{name: "position.basis_agrees: a basis past the cursor",
			mutate:  func(s *Snapshot) { s.basisOf("acc-2", "BTC-USD").BasisSeq = 15 },
			want:    []string{"position.basis_agrees@" + acc2 + "=basis_ahead_of_cursor"},
			actions: []string{"rederive_position:" + acc2}},
		{name: "opening.proven: source values without the proven flag are adopted",
			mutate:  func(s *Snapshot) { s.pos("acc-0", "BTC-USD").OpeningProven = false },
			want:    []string{"opening.proven@" + acc0 + "=opening_flag_unproven"},
			actions: []string{"adopt_source_opening:" + acc0},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if a := action(t, p, "adopt_source_opening:"+acc0); a.After["opening_proven"] != "true" || a.After["opening_seq"] != "1" ||
					a.After["opening_quantity"] != "10" || a.After["opening_avg_cost"] != "100.5" {
					t.Errorf("adopt action: %+v", a)
				}
			}},
		{name: "opening.proven: a retained opening contradicting the source is adopted",
			mutate:  func(s *Snapshot) { s.pos("acc-0", "BTC-USD").OpeningQuantity = d("11") },
			want:    []string{"opening.proven@" + acc0 + "=opening_values_differ"},
			actions: []string{"adopt_source_opening:" + acc0},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if a := action(t, p, "adopt_source_opening:"+acc0); a.Before["opening_quantity"] != "11" || a.After["opening_quantity"] != "10" {
					t.Errorf("adopt action: %+v", a)
				}
			}},
		{name: "opening.proven: a missing opening is adopted with the derivation, in one action",
			mutate: func(s *Snapshot) {
				p := s.pos("acc-1", "ETH-USD")
				p.Quantity = p.Quantity.Sub(p.OpeningQuantity)
				p.OpeningQuantity, p.OpeningAvgCost, p.OpeningSeq = decimal.Zero, decimal.Zero, nil
			},
			want:    []string{"opening.proven@" + acc1e + "=opening_missing", "position.derivation_agrees@" + acc1e + "=opening_unproven"},
			actions: []string{"adopt_source_opening:" + acc1e},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				a := action(t, p, "adopt_source_opening:"+acc1e)
				b := s.basisOf("acc-1", "ETH-USD")
				if len(a.Findings) != 2 || a.After["quantity"] != b.Quantity.String() || a.After["opening_quantity"] != "-4" {
					t.Errorf("adopt action: %+v", a)
				}
			}},
		{name: "opening.proven: a stored opening without a source event is manual, and so is its derivation",
			mutate: func(s *Snapshot) {
				p := s.pos("acc-2", "BTC-USD")
				p.OpeningQuantity, p.OpeningAvgCost = d("3"), d("90")
				p.Quantity = p.Quantity.Add(d("3"))
			},
			want: []string{"opening.proven@" + acc2 + "=opening_without_source_event", "position.derivation_agrees@" + acc2 + "=opening_unproven"},
			manual: map[string]string{"opening.proven@" + acc2: "source has no opening",
				"position.derivation_agrees@" + acc2: "source has no opening"}},
		{name: "opening.proven: a source opening after trades of the key is a conflict",
			mutate: func(s *Snapshot) {
				s.Source.Openings = append(s.Source.Openings, wire.Opening{Seq: 6, Account: "acc-2", Instrument: "BTC-USD", Quantity: d("1"), AvgCost: d("1")})
				s.Source.EventCount++
				s.SQL.Cursor.EventCount++
			},
			want:   []string{"opening.proven@" + acc2 + "=opening_after_trades"},
			manual: map[string]string{"opening.proven@" + acc2: "follows trades of the key"}},
	}
}
