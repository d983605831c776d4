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
	"fmt"
	"math"
	"sort"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// MaxPendingRows bounds the rows detection holds across pages: rows without
// a consensus seq, rows no source event of their own page claims (they wait
// for a later one, or are orphans), rows paired ahead of the stream, and
// current orders that differ from their source. A clean scope holds none;
// each is drift. Past the bound detection stops with ErrSnapshotTooLarge
// rather than grow with a hostile scope (a row costs a few hundred bytes).
const MaxPendingRows = 100_000

// maxPendingRows is MaxPendingRows (a variable so a test can reach it
// without a hundred thousand rows).
var maxPendingRows = MaxPendingRows

// engine is one streaming detection: it pairs each source event with the
// SQL row of the same identity as both stream by in seq order, and keeps
// per-key state (positions, the current version per order) plus the rows
// that drift. A row and its event normally share a seq and a page; a row
// re-sequenced earlier waits in pend* until its event comes, one
// re-sequenced later is fetched by identity when its event finds no row
// (ahead*, so the stream skips it when it gets there).
type engine struct {
	ctx context.Context
	h   History
	d   *detector
	s   Snapshot // the head, its Source completed once the history ends

	pendT  map[string]*TradeRow
	aheadT map[string]bool
	dupID  map[string]bool        // trade ids held by several rows
	seenID map[string]*TradeRow   // the first row streamed of each duplicated id
	group  map[string]*groupState // rows of trade_seq groups
	groups [][]TradeRow
	pastB  []TradeRow // BOOKED rows past B with a seq: position inputs

	pendE  map[orderKey]*OrderRow
	aheadE map[orderKey]bool

	cur       orderIndex
	pendC     map[string]*OrderRow
	aheadC    map[string]bool
	unpairedC []OrderRow // current rows no source event claimed
	diffC     map[string]*curDiff
	diffOrder []string
	wantC     map[string]*wire.Order // newest wanted version past the order's row (or of an order without a row)
	wantOrder []string

	pos  *positions
	pace *pacer // nil: unpaced

	// the page's rows by identity, reused from page to page
	pageT map[string]*TradeRow
	pageE map[orderKey]*OrderRow
	pageC map[string]*OrderRow
}

// groupState: whether the source verifies a row of a trade_seq group (its
// first source event with the id carries the row's trade_seq).
type groupState struct {
	tradeSeq       int64
	seen, verified bool
}

// curDiff is a current row that differs from its version's source event.
type curDiff struct {
	row OrderRow
	sv  wire.Order
}

func newEngine(ctx context.Context, s *Snapshot, h History) (*engine, error) {
	e := &engine{ctx: ctx, h: h, s: *s,
		pendT: map[string]*TradeRow{}, aheadT: map[string]bool{}, dupID: map[string]bool{}, seenID: map[string]*TradeRow{},
		group: map[string]*groupState{}, pendE: map[orderKey]*OrderRow{}, aheadE: map[orderKey]bool{},
		pendC: map[string]*OrderRow{}, aheadC: map[string]bool{}, diffC: map[string]*curDiff{}, wantC: map[string]*wire.Order{},
		pageT: map[string]*TradeRow{}, pageE: map[orderKey]*OrderRow{}, pageC: map[string]*OrderRow{}}
	e.s.Source.Trades, e.s.Source.Orders, e.s.Source.Openings = nil, nil, nil
	e.d = newDetector(&e.s)
	e.d.b = unknownBoundary
	e.pos = newPositions(e.d, s)
	return e, nil
}

func (e *engine) histErr(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrHistory, what, err)
}

// held is how many rows the engine holds across pages.
func (e *engine) held() int {
	return len(e.pendT) + len(e.aheadT) + len(e.pendE) + len(e.aheadE) + len(e.pendC) + len(e.aheadC) + len(e.diffC) +
		len(e.wantC) + len(e.pastB) + len(e.unpairedC)
}

func (e *engine) checkHeld() error {
	if n := e.held(); n > maxPendingRows {
		return fmt.Errorf("%w: more than %d rows drift across the history (re-sequenced, legacy, orphaned or rewound): too many to hold; repair them in bulk first",
			ErrSnapshotTooLarge, maxPendingRows)
	}
	return nil
}

func (e *engine) run() error {
	ctx, h, d := e.ctx, e.h, e.d
	counts, err := h.Counts(ctx)
	if err != nil {
		return e.histErr("counts", err)
	}
	d.counts = counts
	legacy, err := h.Legacy(ctx)
	if err != nil {
		return e.histErr("legacy rows", err)
	}
	for i := range legacy.Trades {
		r := &legacy.Trades[i]
		if e.pendT[r.TradeID] == nil {
			e.pendT[r.TradeID] = r
		}
	}
	for i := range legacy.OrderEvents {
		r := &legacy.OrderEvents[i]
		if k := (orderKey{r.OrderID, r.Version}); e.pendE[k] == nil {
			e.pendE[k] = r
		}
	}
	for i := range legacy.Orders {
		if r := &legacy.Orders[i]; e.pendC[r.OrderID] == nil {
			e.pendC[r.OrderID] = r
		}
	}
	if err := e.pace.yield(ctx); err != nil {
		return e.paceErr(err)
	}
	ids, groups, err := h.Duplicates(ctx)
	if err != nil {
		return e.histErr("duplicates", err)
	}
	for _, id := range ids {
		e.dupID[id] = true
	}
	e.groups = groups
	for _, g := range groups {
		for _, r := range g {
			e.group[r.TradeID] = &groupState{tradeSeq: r.TradeSeq}
		}
	}
	if err := e.pace.yield(ctx); err != nil {
		return e.paceErr(err)
	}
	e.cur.reserve(counts.Orders)
	if err := h.CurrentOrders(ctx, e.cur.add); err != nil {
		return e.histErr("current orders", err)
	}
	e.cur.build()
	if err := e.checkHeld(); err != nil {
		return err
	}
	if err := e.pace.yield(ctx); err != nil {
		return e.paceErr(err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return e.histErr("source", err)
		}
		p, err := h.NextPage(ctx)
		if err != nil {
			return e.histErr("source page", err)
		}
		if p == nil {
			break
		}
		if err := e.pace.yield(ctx); err != nil {
			return e.paceErr(err)
		}
		if err := e.page(p); err != nil {
			return err
		}
		if d.err != nil {
			return d.err
		}
		if err := e.checkHeld(); err != nil {
			return err
		}
		if err := e.pace.page(ctx, p.Through, p.Boundary); err != nil {
			return e.paceErr(err)
		}
	}
	e.s.Source = h.End()
	d.b = e.s.Source.Boundary
	rest, err := h.RowsThrough(ctx, math.MaxInt64)
	if err != nil {
		return e.histErr("rows past the source", err)
	}
	if err := e.end(rest); err != nil {
		return err
	}
	return d.err
}

// page pairs one page of source events with the SQL rows through its end,
// then checks each pair (and each unpaired event) in source order.
func (e *engine) page(p *SourcePage) error {
	rows, err := e.h.RowsThrough(e.ctx, p.Through)
	if err != nil {
		return e.histErr("rows", err)
	}
	if err := e.pace.yield(e.ctx); err != nil {
		return e.paceErr(err)
	}
	pageT, pageE, pageC := e.pageT, e.pageE, e.pageC
	clear(pageT)
	clear(pageE)
	clear(pageC)
	for i := range rows.Trades {
		r := &rows.Trades[i]
		if e.aheadT[r.TradeID] {
			delete(e.aheadT, r.TradeID)
			continue
		}
		if e.duplicateRow(r) || pageT[r.TradeID] != nil {
			continue
		}
		pageT[r.TradeID] = r
	}
	for i := range rows.OrderEvents {
		r := &rows.OrderEvents[i]
		k := orderKey{r.OrderID, r.Version}
		if e.aheadE[k] {
			delete(e.aheadE, k)
			continue
		}
		if pageE[k] == nil {
			pageE[k] = r
		}
	}
	for i := range rows.Orders {
		r := &rows.Orders[i]
		if e.aheadC[r.OrderID] {
			delete(e.aheadC, r.OrderID)
			continue
		}
		if pageC[r.OrderID] == nil {
			pageC[r.OrderID] = r
		}
	}

	pairT, err := e.pairTrades(p, pageT)
	if err != nil {
		return err
	}
	pairE, pairC, curs, err := e.pairOrders(p, pageE, pageC)
	if err != nil {
		return err
	}
	// What no event of this page claimed waits for a later one: a copy, so
	// a waiting row never keeps its page's rows alive.
	for id, r := range pageT {
		cp := *r
		e.pendT[id] = &cp
	}
	for k, r := range pageE {
		cp := *r
		e.pendE[k] = &cp
	}
	for id, r := range pageC {
		cp := *r
		e.pendC[id] = &cp
	}

	for i := range p.Openings {
		e.countEvent(p.Openings[i].Seq)
		e.pos.opening(&p.Openings[i])
	}
	for i := range p.Trades {
		if err := e.every(i); err != nil {
			return err
		}
		e.trade(&p.Trades[i], pairT[i])
	}
	for i := range p.Orders {
		if err := e.every(i); err != nil {
			return err
		}
		e.order(&p.Orders[i], pairE[i], pairC[i], curs[i])
	}
	e.pos.flush()
	return nil
}

// every yields a paced detection before the i-th event of a page's loop
// once every PaceEvery events.
func (e *engine) every(i int) error {
	if e.pace == nil || i == 0 || i%PaceEvery != 0 {
		return nil
	}
	if err := e.pace.yield(e.ctx); err != nil {
		return e.paceErr(err)
	}
	return nil
}

// paceErr is a pacing failure: the estimate past the deadline as it is,
// a sleep cut by the run's end as a failed read.
func (e *engine) paceErr(err error) error {
	if IsPacedPastDeadline(err) {
		return err
	}
	return e.histErr("paced", err)
}

func (e *engine) countEvent(seq int64) {
	e.d.srcEvents++
	if seq <= e.d.v {
		e.d.srcThroughV++
	}
}

// pairTrades finds each source trade's row: waiting from an earlier page,
// on this page, or (re-sequenced later) further in the stream. A verified
// source never repeats a trade id; if one did, its later events would find
// no row (the first took it) and be checked as unretained, where the
// materialised detection compared only the first.
func (e *engine) pairTrades(p *SourcePage, page map[string]*TradeRow) ([]*TradeRow, error) {
	pairs := make([]*TradeRow, len(p.Trades))
	var look []string
	lookAt := map[string]int{}
	for i := range p.Trades {
		id := p.Trades[i].TradeID
		if r := e.pendT[id]; r != nil {
			pairs[i] = r
			delete(e.pendT, id)
		} else if r := page[id]; r != nil {
			pairs[i] = r
			delete(page, id)
		} else if _, dup := lookAt[id]; !dup {
			look, lookAt[id] = append(look, id), i
		}
	}
	if len(look) == 0 {
		return pairs, nil
	}
	ahead, err := e.h.TradesByID(e.ctx, look)
	if err != nil {
		return nil, e.histErr("trades by id", err)
	}
	for j := range ahead {
		r := &ahead[j]
		i, ok := lookAt[r.TradeID]
		if !ok || int64(r.Seq) <= p.Through || pairs[i] != nil || e.aheadT[r.TradeID] {
			continue // streamed already: paired with an earlier event of the id
		}
		if e.duplicateRow(r) {
			continue
		}
		pairs[i] = r
		e.aheadT[r.TradeID] = true
	}
	return pairs, nil
}

// duplicateRow reports (and skips) every row of a duplicated trade id after
// the first one streamed: two rows under one primary key.
func (e *engine) duplicateRow(r *TradeRow) bool {
	if !e.dupID[r.TradeID] {
		return false
	}
	first := e.seenID[r.TradeID]
	if first == nil {
		cp := *r
		e.seenID[r.TradeID] = &cp
		return false
	}
	d := e.d
	d.cur = checkTradesDecl
	bk, sk := legKeys(r.BuyAccount, r.SellAccount, r.Instrument)
	rel := relatedKeys(bk, sk)
	// Two rows under one primary key: the table lost its constraint; no row
	// can be chosen from the snapshot (Expected nil: manual).
	d.emit(TradeIdentityUnique, tradeRecord(r.TradeID), tradeRowFields(first), nil,
		RootCause{Code: CauseDuplicateWritePath, Confidence: Likely,
			Hint:     "two rows share the primary key trade_id: the table lost its constraint or two write paths bypassed it",
			Evidence: []string{"trade_id=" + r.TradeID, "rows=2+"}}, false, "duplicate primary key", rel...)
	d.markLegs(bk, sk, rowOrder(r.TradeID), "trade "+r.TradeID+" duplicated")
	return true
}

func rowOrder(id string) driftOrder { return driftOrder{phase: 1, id: id} }

// trade checks one source trade and its row (nil: SQL has none).
func (e *engine) trade(t *wire.Trade, r *TradeRow) {
	d := e.d
	d.cur = checkTradesDecl
	e.countEvent(t.Seq)
	d.accounts[t.BuyAccount] = true
	d.accounts[t.SellAccount] = true
	if g := e.group[t.TradeID]; g != nil && !g.seen {
		g.seen, g.verified = true, g.tradeSeq == t.TradeSeq
	}
	if t.Seq <= d.b {
		e.pos.sourceTrade(t)
	}
	bk, sk := legKeys(t.BuyAccount, t.SellAccount, t.Instrument)
	switch {
	case r != nil:
		e.pairTrade(r, t, bk, sk)
	case t.Seq <= d.v:
		// The cursor claims it but SQL lacks it. Above the cursor it is
		// catch-up's backlog, not drift.
		d.emit(TradeSourceRetained, tradeRecord(t.TradeID), nil, srcTradeFields(t),
			RootCause{Code: CauseRowDeleted, Confidence: Likely,
				Hint:     "the cursor claims completeness through its verified seq, yet this verified trade is gone: deleted after verification",
				Evidence: []string{"seq=" + itoa(t.Seq), "verified_through=" + itoa(d.v)}},
			false, "", relatedKeys(bk, sk)...)
		d.markLegs(bk, sk, driftOrder{phase: 3, n: t.Seq}, "trade "+t.TradeID+" missing")
	}
	// The key's inputs: source trades through the cursor, and retained
	// trades past it (as their source event).
	if (t.Seq <= d.b && t.Seq <= d.v) || (r != nil && r.Seq.Valid() && t.Seq > d.v) {
		e.pos.tradeFills(t.Seq, t.TradeSeq, t.BuyAccount, t.SellAccount, t.Instrument, t.Quantity, t.Price)
	}
}

// pairTrade checks a row against its source event.
func (e *engine) pairTrade(r *TradeRow, t *wire.Trade, bk, sk posKey) {
	d := e.d
	seq, hasSeq := r.Seq.Get()
	if hasSeq && seq == t.Seq && r.BookingStatus == BookingBooked && sameTrade(r, t) {
		return // the clean path: nothing allocated
	}
	rel := relatedKeys(bk, sk)
	if !hasSeq {
		e.legacyTrade(r, srcTradeFields(t), rel, bk, sk)
		return
	}
	d.compareTrade(r, t, rel, bk, sk)
}

func (e *engine) legacyTrade(r *TradeRow, expected Fields, rel []string, bk, sk posKey) {
	d := e.d
	d.cur = checkTradesDecl
	d.emit(TradeProvenance, tradeRecord(r.TradeID), tradeRowFields(r), expected,
		RootCause{Code: CauseLegacyRow, Confidence: Likely,
			Hint:     "the row carries no consensus seq: unknown legacy history that cannot be placed in authoritative order",
			Evidence: []string{"seq=NULL", "written_by=" + r.WrittenBy}}, false, "", rel...)
	d.markLegs(bk, sk, rowOrder(r.TradeID), "trade "+r.TradeID+" legacy")
}

// unpairedTrade is a row no source event claimed, once the source ended.
func (e *engine) unpairedTrade(r *TradeRow) {
	d := e.d
	d.cur = checkTradesDecl
	bk, sk := legKeys(r.BuyAccount, r.SellAccount, r.Instrument)
	seq, hasSeq := r.Seq.Get()
	switch {
	case !hasSeq:
		e.legacyTrade(r, nil, relatedKeys(bk, sk), bk, sk)
	case seq <= d.b:
		d.emit(TradePresentInSource, tradeRecord(r.TradeID), tradeRowFields(r), nil,
			RootCause{Code: CauseNotInConsensus, Confidence: Likely,
				Hint:     "the row sits at or below the source boundary yet the consensus never emitted it: written outside the consensus (replayed, forged or hand-written)",
				Evidence: []string{"seq=" + itoa(seq), "boundary=" + itoa(d.b), "written_by=" + r.WrittenBy}},
			true, "", relatedKeys(bk, sk)...)
		d.markLegs(bk, sk, rowOrder(r.TradeID), "trade "+r.TradeID+" orphan")
	case r.BookingStatus == BookingBooked:
		// Past B: newer than the source read; not verifiable, not drift,
		// but kept as R1 keeps newer live trades: an input of its keys.
		e.pastB = append(e.pastB, *r)
	}
}

// end checks what only the end of the source decides: rows no event
// claimed, trade_seq groups, the orders' current rows, and every key.
func (e *engine) end(rest HistoryRows) error {
	var unpaired []TradeRow
	for _, r := range e.pendT {
		unpaired = append(unpaired, *r)
	}
	for i := range rest.Trades {
		r := &rest.Trades[i]
		if e.aheadT[r.TradeID] || e.duplicateRow(r) {
			continue
		}
		unpaired = append(unpaired, *r)
	}
	sort.SliceStable(unpaired, func(i, j int) bool { return unpaired[i].TradeID < unpaired[j].TradeID })
	for i := range unpaired {
		e.unpairedTrade(&unpaired[i])
	}
	for n, g := range e.groups {
		e.duplicateTradeSeq(n, g)
	}
	if err := e.endOrders(rest); err != nil {
		return err
	}
	sort.SliceStable(e.pastB, func(i, j int) bool {
		a, b := &e.pastB[i], &e.pastB[j]
		if a.Seq != b.Seq {
			return a.Seq < b.Seq
		}
		if a.TradeSeq != b.TradeSeq {
			return a.TradeSeq < b.TradeSeq
		}
		return a.TradeID < b.TradeID
	})
	for i := range e.pastB {
		r := &e.pastB[i]
		e.pos.tradeFills(int64(r.Seq), r.TradeSeq, r.BuyAccount, r.SellAccount, r.Instrument, r.Quantity, r.Price)
	}
	e.pos.flush()
	e.pos.check()
	return nil
}

// duplicateTradeSeq reports every row of a group sharing one engine trade
// sequence that the source does not verify (trade_id known with that
// trade_seq). Expected names the verified row to keep, nil when none is.
func (e *engine) duplicateTradeSeq(n int, rows []TradeRow) {
	d := e.d
	d.cur = checkTradesDecl
	keep := ""
	for _, r := range rows {
		if g := e.group[r.TradeID]; g != nil && g.verified {
			keep = r.TradeID
			break
		}
	}
	ids := make([]string, len(rows))
	for i := range rows {
		ids[i] = rows[i].TradeID
	}
	for i := range rows {
		r := &rows[i]
		if r.TradeID == keep || (keep == "" && i == 0) {
			continue
		}
		var expected Fields
		if keep != "" {
			expected = Fields{"keep_trade_id": keep}
		}
		bk, sk := legKeys(r.BuyAccount, r.SellAccount, r.Instrument)
		d.emit(TradeIdentityUnique, tradeRecord(r.TradeID), tradeRowFields(r), expected,
			RootCause{Code: CauseDuplicateWritePath, Confidence: Likely,
				Hint:     "several rows claim one engine trade sequence: two write paths recorded the same trade under different ids",
				Evidence: []string{"trade_seq=" + itoa(r.TradeSeq), "trade_ids=" + joinIDs(ids), "verified=" + keep}},
			false, "", relatedKeys(bk, sk)...)
		d.markLegs(bk, sk, driftOrder{phase: 2, n: int64(n)}, "trade "+r.TradeID+" duplicates trade_seq "+itoa(r.TradeSeq))
	}
}
