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
	"time"
)

func (s *Snapshot) order(id string) *OrderRow {
	for i := range s.SQL.Orders {
		if s.SQL.Orders[i].OrderID == id {
			return &s.SQL.Orders[i]
		}
	}
	panic("no order " + id)
}

func (s *Snapshot) event(id string, v int64) *OrderRow {
	for i := range s.SQL.OrderEvents {
		if e := &s.SQL.OrderEvents[i]; e.OrderID == id && e.Version == v {
			return e
		}
	}
	panic("no order event " + id)
}

func (s *Snapshot) removeEvent(id string, v int64) {
	out := s.SQL.OrderEvents[:0]
	for _, e := range s.SQL.OrderEvents {
		if e.OrderID != id || e.Version != v {
			out = append(out, e)
		}
	}
	s.SQL.OrderEvents = out
}

func TestScenario_Orders(t *testing.T) { runScenarios(t, orderScenarios()) }

func orderScenarios() []scenario {
	ev := func(id, v string) string { return "order_events/order_id=" + id + ",version=" + v }
	cur := func(id string) string { return "orders/order_id=" + id }
	return []scenario{
		{name: "order.present_in_source: a version the consensus never emitted is manual",
			mutate: func(s *Snapshot) {
				e := *s.event("ob-1", 1)
				e.OrderID = "o-ghost"
				s.SQL.OrderEvents = append(s.SQL.OrderEvents, e)
			},
			want:   []string{"order.present_in_source@" + ev("o-ghost", "1") + "=not_in_consensus"},
			manual: map[string]string{"order.present_in_source@" + ev("o-ghost", "1"): "a human decides"}},
		{name: "order.present_in_source: a version past B is not verifiable, not drift",
			mutate: func(s *Snapshot) {
				e := *s.event("ob-1", 1)
				e.OrderID, e.Seq = "o-new", Seq(99)
				s.SQL.OrderEvents = append(s.SQL.OrderEvents, e)
				s.SQL.Orders = append(s.SQL.Orders, e)
			}},
		{name: "order.source_retained: a deleted version is rewritten",
			mutate:  func(s *Snapshot) { s.removeEvent("ob-3", 1) },
			want:    []string{"order.source_retained@" + ev("ob-3", "1") + "=row_deleted_after_verification"},
			actions: []string{"rewrite_order_version:" + ev("ob-3", "1")},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if a := action(t, p, "rewrite_order_version:"+ev("ob-3", "1")); a.Before != nil || a.After["status"] != "NEW" || a.After["version"] != "1" {
					t.Errorf("rewrite action: %+v", a)
				}
			}},
		{name: "order.source_retained: a deleted current row is rewritten to the newest version",
			mutate: func(s *Snapshot) {
				out := s.SQL.Orders[:0]
				for _, o := range s.SQL.Orders {
					if o.OrderID != "os-4" {
						out = append(out, o)
					}
				}
				s.SQL.Orders = out
			},
			want:    []string{"order.source_retained@" + cur("os-4") + "=row_deleted_after_verification"},
			actions: []string{"rewrite_order_version:" + cur("os-4")},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if a := action(t, p, "rewrite_order_version:"+cur("os-4")); a.After["version"] != "2" || a.After["status"] != "FILLED" {
					t.Errorf("rewrite action: %+v", a)
				}
			}},
		{name: "order.version_agrees: a differing row is rewritten to its source event",
			mutate:  func(s *Snapshot) { s.event("ob-2", 2).Remaining = d("1") },
			want:    []string{"order.version_agrees@" + ev("ob-2", "2") + "=row_mismatch"},
			actions: []string{"rewrite_order_version:" + ev("ob-2", "2")},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if a := action(t, p, "rewrite_order_version:"+ev("ob-2", "2")); a.Before["remaining"] != "1" || a.After["remaining"] != "0" {
					t.Errorf("rewrite action: %+v", a)
				}
			}},
		{name: "order.version_agrees: a rounded timestamp is timestamp_rounded",
			mutate: func(s *Snapshot) {
				e := s.event("ob-2", 2)
				e.TS = e.TS.Add(time.Microsecond) // the source ts ends in 789ns: rounding adds a microsecond
			},
			want:    []string{"order.version_agrees@" + ev("ob-2", "2") + "=timestamp_rounded"},
			actions: []string{"rewrite_order_version:" + ev("ob-2", "2")}},
		{name: "order.version_agrees: a nanosecond source ts truncated to the microsecond agrees",
			mutate: func(s *Snapshot) {
				for i := range s.SQL.OrderEvents {
					if s.SQL.OrderEvents[i].TS.Nanosecond()%1000 != 0 {
						panic("fixture rows must be at microseconds")
					}
				}
			}},
		{name: "order.version_agrees: re-sequenced row is a provenance conflict, rewritten",
			mutate:  func(s *Snapshot) { s.event("ob-2", 1).Seq = Seq(4) },
			want:    []string{"order.version_agrees@" + ev("ob-2", "1") + "=provenance_conflict"},
			actions: []string{"rewrite_order_version:" + ev("ob-2", "1")}},
		{name: "order.version_agrees: a legacy current row is manual",
			mutate: func(s *Snapshot) { s.order("os-5").Seq = NullSeq },
			want:   []string{"order.version_agrees@" + cur("os-5") + "=legacy_row"},
			manual: map[string]string{"order.version_agrees@" + cur("os-5"): "legacy history"}},
		{name: "order.never_rewound: a current row behind its verified version is rewritten forward",
			mutate:  func(s *Snapshot) { *s.order("ob-6") = *s.event("ob-6", 1) },
			want:    []string{"order.never_rewound@" + cur("ob-6") + "=version_rewound"},
			actions: []string{"rewrite_order_version:" + cur("ob-6")},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if a := action(t, p, "rewrite_order_version:"+cur("ob-6")); a.Before["version"] != "1" || a.After["version"] != "2" {
					t.Errorf("rewrite action: %+v", a)
				}
			}},
		{name: "order.never_rewound and version_agrees on one row: one action to the newest version",
			mutate: func(s *Snapshot) {
				*s.order("ob-6") = *s.event("ob-6", 1)
				s.order("ob-6").Price = d("1")
			},
			want:    []string{"order.never_rewound@" + cur("ob-6") + "=version_rewound", "order.version_agrees@" + cur("ob-6") + "=row_mismatch"},
			actions: []string{"rewrite_order_version:" + cur("ob-6")},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if a := action(t, p, "rewrite_order_version:"+cur("ob-6")); a.After["version"] != "2" || len(a.Findings) != 2 {
					t.Errorf("rewrite action: %+v", a)
				}
			}},
	}
}
