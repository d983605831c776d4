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
	"context"
	"math"
	"slices"
	"sort"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// History is a scope's history as detection consumes it: once, in
// consensus-seq order, never held whole, so detection's heap holds per-key
// state and drifting rows only. The Snapshot beside it carries the small
// tables. Every method reads; all SQL reads of one History see one
// snapshot of the database, so a lookup agrees with the rows streamed.
type History interface {
	// Counts are the SQL history's row counts.
	Counts(ctx context.Context) (HistoryCounts, error)
	// Legacy returns the SQL history rows without a consensus seq.
	Legacy(ctx context.Context) (LegacyRows, error)
	// Duplicates returns the trade ids held by more than one row (the
	// primary key was lost) and, per trade_seq held by several rows, the
	// first row of each of their ids, in trade_id order.
	Duplicates(ctx context.Context) (ids []string, groups [][]TradeRow, err error)
	// CurrentOrders calls fn with the order id and version of every orders
	// row (the first row of an id when the primary key was lost).
	CurrentOrders(ctx context.Context, fn func(id string, version int64)) error
	// NextPage returns the next page of verified source events, nil after
	// the last: pages follow each other in seq order and never split a
	// seq.
	NextPage(ctx context.Context) (*SourcePage, error)
	// RowsThrough returns the SQL rows with a consensus seq <= through not
	// returned yet, each table in (seq, identity) order.
	RowsThrough(ctx context.Context, through int64) (HistoryRows, error)
	// TradesByID and OrderEventsByKey return the rows of the given
	// identities that RowsThrough has not returned yet (re-sequenced ahead
	// of the stream): nothing once the table's stream is exhausted, so a
	// scope whose backlog SQL simply lacks costs no lookup.
	TradesByID(ctx context.Context, ids []string) ([]TradeRow, error)
	OrderEventsByKey(ctx context.Context, ids []string, versions []int64) ([]OrderRow, error)
	// OrdersByID returns the orders rows with a consensus seq of the given
	// ids, whatever their seq.
	OrdersByID(ctx context.Context, ids []string) ([]OrderRow, error)
	// End is the source read's outcome once NextPage returned nil: every
	// field of SourceSide but the event slices.
	End() SourceSide
}

// HistoryCounts are the SQL history's row counts.
type HistoryCounts struct {
	Trades, Orders, OrderEvents int64
}

// LegacyRows are the SQL history rows whose seq is NULL.
type LegacyRows struct {
	Trades      []TradeRow
	OrderEvents []OrderRow
	Orders      []OrderRow
}

// HistoryRows are SQL rows with a consensus seq, each table in (seq,
// identity) order.
type HistoryRows struct {
	Trades      []TradeRow
	OrderEvents []OrderRow
	Orders      []OrderRow
}

// SourcePage is one page of verified source events: every event with a seq
// in (the previous page's Through, Through], each type in source order.
type SourcePage struct {
	Through int64
	// Boundary is the seq the read stops at (the source boundary B the
	// read's first page reported), the measure of a paced detection's
	// progress (Through / Boundary); 0: unknown.
	Boundary int64
	Trades   []wire.Trade
	Orders   []wire.Order
	Openings []wire.Opening
}

// snapshotHistory serves a materialised Snapshot as a History (tests,
// fixtures, and providers that read everything): the same detection runs
// over it as over a provider's stream. pageSeqs is how many distinct seqs a
// page holds (0: one page). It never writes into the snapshot.
type snapshotHistory struct {
	s        *Snapshot
	pageSeqs int

	seqs          []int64 // distinct source seqs, ascending
	trades        []int   // source trades by (seq, slice order)
	orders        []int
	openings      []int
	next          int // next index into seqs
	ti, oi, pi    int
	rt, re, ro    []int // SQL rows with a seq, in (seq, identity, slice order)
	rti, rei, roi int
	through       int64 // the last RowsThrough
}

func newSnapshotHistory(s *Snapshot, pageSeqs int) *snapshotHistory {
	h := &snapshotHistory{s: s, pageSeqs: pageSeqs}
	src := &s.Source
	h.trades = sortedBy(len(src.Trades), func(i int) int64 { return src.Trades[i].Seq })
	h.orders = sortedBy(len(src.Orders), func(i int) int64 { return src.Orders[i].Seq })
	h.openings = sortedBy(len(src.Openings), func(i int) int64 { return src.Openings[i].Seq })
	for _, i := range h.trades {
		h.seqs = append(h.seqs, src.Trades[i].Seq)
	}
	for _, i := range h.orders {
		h.seqs = append(h.seqs, src.Orders[i].Seq)
	}
	for _, i := range h.openings {
		h.seqs = append(h.seqs, src.Openings[i].Seq)
	}
	slices.Sort(h.seqs)
	h.seqs = slices.Compact(h.seqs)
	h.rt = rowsBySeq(len(s.SQL.Trades), func(i int) (RowSeq, string, int64) { r := &s.SQL.Trades[i]; return r.Seq, r.TradeID, r.TradeSeq })
	h.re = rowsBySeq(len(s.SQL.OrderEvents), func(i int) (RowSeq, string, int64) { r := &s.SQL.OrderEvents[i]; return r.Seq, r.OrderID, r.Version })
	h.ro = rowsBySeq(len(s.SQL.Orders), func(i int) (RowSeq, string, int64) { r := &s.SQL.Orders[i]; return r.Seq, r.OrderID, r.Version })
	return h
}

// sortedBy is 0..n-1 stably sorted by seq.
func sortedBy(n int, seq func(int) int64) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return seq(idx[a]) < seq(idx[b]) })
	return idx
}

// rowsBySeq is the rows with a seq in (seq, id, n) order, as a provider
// streams them.
func rowsBySeq(n int, key func(int) (RowSeq, string, int64)) []int {
	var idx []int
	for i := 0; i < n; i++ {
		if s, _, _ := key(i); s.Valid() {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool {
		sa, ia, na := key(idx[a])
		sb, ib, nb := key(idx[b])
		switch {
		case sa != sb:
			return sa < sb
		case ia != ib:
			return ia < ib
		}
		return na < nb
	})
	return idx
}

func (h *snapshotHistory) Counts(context.Context) (HistoryCounts, error) {
	q := &h.s.SQL
	return HistoryCounts{Trades: int64(len(q.Trades)), Orders: int64(len(q.Orders)), OrderEvents: int64(len(q.OrderEvents))}, nil
}

func (h *snapshotHistory) Legacy(context.Context) (LegacyRows, error) {
	var l LegacyRows
	q := &h.s.SQL
	for i := range q.Trades {
		if !q.Trades[i].Seq.Valid() {
			l.Trades = append(l.Trades, q.Trades[i])
		}
	}
	for i := range q.OrderEvents {
		if !q.OrderEvents[i].Seq.Valid() {
			l.OrderEvents = append(l.OrderEvents, q.OrderEvents[i])
		}
	}
	for i := range q.Orders {
		if !q.Orders[i].Seq.Valid() {
			l.Orders = append(l.Orders, q.Orders[i])
		}
	}
	return l, nil
}

// Duplicates follows the snapshot's row order: the first row of an id is
// the first in the slice, and a trade_seq group lists its rows in slice
// order (a provider reads both in primary-key order).
func (h *snapshotHistory) Duplicates(context.Context) ([]string, [][]TradeRow, error) {
	q := &h.s.SQL
	seen := map[string]bool{}
	var ids []string
	bySeq := map[int64][]TradeRow{}
	var order []int64
	for i := range q.Trades {
		r := &q.Trades[i]
		if seen[r.TradeID] {
			if !slices.Contains(ids, r.TradeID) {
				ids = append(ids, r.TradeID)
			}
			continue
		}
		seen[r.TradeID] = true
		if len(bySeq[r.TradeSeq]) == 1 {
			order = append(order, r.TradeSeq)
		}
		bySeq[r.TradeSeq] = append(bySeq[r.TradeSeq], *r)
	}
	var groups [][]TradeRow
	for _, seq := range order {
		groups = append(groups, bySeq[seq])
	}
	return ids, groups, nil
}

func (h *snapshotHistory) CurrentOrders(_ context.Context, fn func(string, int64)) error {
	seen := map[string]bool{}
	for i := range h.s.SQL.Orders {
		r := &h.s.SQL.Orders[i]
		if !seen[r.OrderID] {
			seen[r.OrderID] = true
			fn(r.OrderID, r.Version)
		}
	}
	return nil
}

func (h *snapshotHistory) NextPage(context.Context) (*SourcePage, error) {
	if h.next >= len(h.seqs) {
		return nil, nil
	}
	end := len(h.seqs)
	if h.pageSeqs > 0 {
		end = min(end, h.next+h.pageSeqs)
	}
	through := h.seqs[end-1]
	h.next = end
	p := &SourcePage{Through: through, Boundary: h.seqs[len(h.seqs)-1]}
	src := &h.s.Source
	for ; h.ti < len(h.trades) && src.Trades[h.trades[h.ti]].Seq <= through; h.ti++ {
		p.Trades = append(p.Trades, src.Trades[h.trades[h.ti]])
	}
	for ; h.oi < len(h.orders) && src.Orders[h.orders[h.oi]].Seq <= through; h.oi++ {
		p.Orders = append(p.Orders, src.Orders[h.orders[h.oi]])
	}
	for ; h.pi < len(h.openings) && src.Openings[h.openings[h.pi]].Seq <= through; h.pi++ {
		p.Openings = append(p.Openings, src.Openings[h.openings[h.pi]])
	}
	return p, nil
}

func (h *snapshotHistory) RowsThrough(_ context.Context, through int64) (HistoryRows, error) {
	var out HistoryRows
	h.through = max(h.through, through)
	q := &h.s.SQL
	for ; h.rti < len(h.rt) && int64(q.Trades[h.rt[h.rti]].Seq) <= through; h.rti++ {
		out.Trades = append(out.Trades, q.Trades[h.rt[h.rti]])
	}
	for ; h.rei < len(h.re) && int64(q.OrderEvents[h.re[h.rei]].Seq) <= through; h.rei++ {
		out.OrderEvents = append(out.OrderEvents, q.OrderEvents[h.re[h.rei]])
	}
	for ; h.roi < len(h.ro) && int64(q.Orders[h.ro[h.roi]].Seq) <= through; h.roi++ {
		out.Orders = append(out.Orders, q.Orders[h.ro[h.roi]])
	}
	return out, nil
}

func (h *snapshotHistory) TradesByID(_ context.Context, ids []string) ([]TradeRow, error) {
	want := setOf(ids)
	var out []TradeRow
	for i := range h.s.SQL.Trades {
		if r := &h.s.SQL.Trades[i]; r.Seq.Valid() && int64(r.Seq) > h.through && want[r.TradeID] {
			out = append(out, *r)
		}
	}
	return out, nil
}

func (h *snapshotHistory) OrderEventsByKey(_ context.Context, ids []string, versions []int64) ([]OrderRow, error) {
	want := map[orderKey]bool{}
	for i := range ids {
		want[orderKey{ids[i], versions[i]}] = true
	}
	var out []OrderRow
	for i := range h.s.SQL.OrderEvents {
		if r := &h.s.SQL.OrderEvents[i]; r.Seq.Valid() && int64(r.Seq) > h.through && want[orderKey{r.OrderID, r.Version}] {
			out = append(out, *r)
		}
	}
	return out, nil
}

func (h *snapshotHistory) OrdersByID(_ context.Context, ids []string) ([]OrderRow, error) {
	want := setOf(ids)
	var out []OrderRow
	for i := range h.s.SQL.Orders {
		if r := &h.s.SQL.Orders[i]; r.Seq.Valid() && want[r.OrderID] {
			out = append(out, *r)
		}
	}
	return out, nil
}

func (h *snapshotHistory) End() SourceSide {
	src := h.s.Source
	src.Trades, src.Orders, src.Openings = nil, nil, nil
	return src
}

func setOf(ids []string) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// unknownBoundary is B while a provider's source read is under way: every
// event it returns is at or below the final B, so no event is past it.
const unknownBoundary = math.MaxInt64
