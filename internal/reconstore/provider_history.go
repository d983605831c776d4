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
	"fmt"
	"sort"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// The streamed history's statements, internal/store's (each in its table's
// file), all parameterised by the scope ($1). The three history tables are
// read through server-side cursors in (seq, identity) order (their (scope,
// seq) indexes), FETCHed a batch at a time, so the rows never sit in memory
// whole; the lookups and the up-front reads run between FETCHes in the same
// transaction, so every statement sees the cursors' snapshot.
const (
	tradesStreamSQL      = store.TradesHistorySQL
	orderEventsStreamSQL = store.OrderEventsHistorySQL
	ordersStreamSQL      = store.OrdersHistorySQL
	fetchBatch           = store.HistoryFetchBatch // rows a FETCH returns (the statements below)
	fetchTradesSQL       = store.TradesHistoryFetchSQL
	fetchOrderEventsSQL  = store.OrderEventsHistoryFetchSQL
	fetchOrdersSQL       = store.OrdersHistoryFetchSQL

	legacyTradesSQL = store.TradesLegacySQL
	legacyEventsSQL = store.OrderEventsLegacySQL
	legacyOrdersSQL = store.OrdersLegacySQL

	dupTradeIDsSQL = store.TradeDuplicateIDsSQL
	dupTradeSeqSQL = store.TradeDuplicateSeqSQL

	currentOrdersSQL = store.CurrentOrdersSQL

	tradesByIDSQL       = store.TradesByIDSQL
	orderEventsByKeySQL = store.OrderEventsByKeySQL
	ordersByIDSQL       = store.OrdersByIDSQL

	closeHistorySQL = store.HistoryCloseSQL
)

var _ recon.HistoryProvider = (*Provider)(nil)

// Open reads the scope's small tables and opens its history for streaming
// detection: one read-only REPEATABLE READ snapshot, taken (the counts)
// before the source's first page, so every SQL row and the cursor's
// verified seq are at or below B. A paced read ends the transaction at its
// first page and keeps the cursors (releaseSnapshot). Past the read's cap
// or deadline the history fails with recon.ErrSnapshotTooLarge. release
// ends the read and must be called.
func (p *Provider) Open(ctx context.Context, scope string) (*recon.Snapshot, recon.History, func(), error) {
	lim, err := p.limits(scope)
	if err != nil {
		return nil, nil, nil, err
	}
	dctx, cancel := context.WithTimeoutCause(ctx, lim.deadline, errReadDeadline)
	h := &history{p: p, lim: lim, parent: ctx, ctx: dctx, scope: scope, digest: chain.Genesis, first: -1, start: time.Now()}
	fail := func(what string, err error) (*recon.Snapshot, recon.History, func(), error) {
		cancel()
		return nil, nil, nil, fmt.Errorf("reconstore: open scope %s: %s: %w", scope, what, lim.overdue(ctx, dctx, err))
	}
	conn, err := p.Pool.Acquire(dctx)
	if err != nil {
		return fail("acquire a connection", err)
	}
	tx, err := conn.BeginTx(dctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		conn.Release()
		return fail("begin read-only transaction", err)
	}
	h.conn, h.tx, h.q = conn, tx, tx
	release := func() {
		// A fill still running (detection stopped mid-stream) ends with the
		// read's context; the transaction is ended after it, never beside it.
		cancel()
		_ = h.waitFill()
		h.finish(context.WithoutCancel(ctx))
		logr.FromContextOrDiscard(ctx).V(1).Info("reconciliation history", "scope", scope, "boundary", h.end.Boundary,
			"sourceEvents", h.count, "pages", h.pages, "trades", h.counts.Trades, "orderEvents", h.counts.OrderEvents,
			"took", time.Since(h.start).String())
	}
	c := &h.counts
	if err := tx.QueryRow(dctx, countsSQL, scope).Scan(&c.Trades, &c.Orders, &c.OrderEvents); err != nil {
		release()
		return fail("row counts", err)
	}
	if n := c.Trades + c.Orders + c.OrderEvents; n > lim.records {
		release()
		return fail("size", fmt.Errorf("%w: the projection holds %d history rows (%d trades, %d orders, %d order versions), more than the snapshot cap of %d records",
			recon.ErrSnapshotTooLarge, n, c.Trades, c.Orders, c.OrderEvents, lim.records))
	}
	snap := &recon.Snapshot{Scope: scope, Now: p.Clock(), StaleAfter: p.StaleAfter}
	in := newInterner()
	steps := []struct {
		what string
		run  func() error
	}{
		{"positions", func() error { return readPositions(dctx, tx, scope, &snap.SQL, in) }},
		{"projection_catchup_basis", func() error { return readBasis(dctx, tx, scope, &snap.SQL, in) }},
		{"projection_catchup_cursor", func() error { return readCursor(dctx, tx, scope, &snap.SQL) }},
		{"projection_catchup_lease", func() error { return readLease(dctx, tx, scope, &snap.SQL) }},
		{"projection_runs", func() error { return readRuns(dctx, tx, scope, &snap.SQL) }},
		{"projection_catchup_outbox", func() error { return readOutbox(dctx, tx, scope, &snap.SQL, in) }},
		{"cursor summary", func() error { return readScopes(dctx, tx, snap) }},
		{"history cursors", func() error {
			for _, q := range []string{tradesStreamSQL, orderEventsStreamSQL, ordersStreamSQL} {
				if _, err := tx.Exec(dctx, q, scope); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	for _, st := range steps {
		if err := st.run(); err != nil {
			release()
			return fail(st.what, err)
		}
	}
	if p.Publisher != nil {
		snap.Publisher = p.Publisher()
	}
	h.want = chainSeqs(snap)
	sort.Slice(h.want, func(i, j int) bool { return h.want[i] < h.want[j] })
	h.trades = seqStream[recon.TradeRow]{fetch: fetchTradesSQL, scan: scanTrade, seq: func(r *recon.TradeRow) recon.RowSeq { return r.Seq }}
	h.events = seqStream[recon.OrderRow]{fetch: fetchOrderEventsSQL, scan: scanOrder, seq: func(r *recon.OrderRow) recon.RowSeq { return r.Seq }}
	h.orders = seqStream[recon.OrderRow]{fetch: fetchOrdersSQL, scan: scanOrder, seq: func(r *recon.OrderRow) recon.RowSeq { return r.Seq }}
	return snap, h, release, nil
}

// history is one scope's streamed history (recon.History).
type history struct {
	p           *Provider
	lim         readLimits
	parent, ctx context.Context
	conn        *pgxpool.Conn
	tx          pgx.Tx
	q           store.Querier // tx; conn once the snapshot is released (held)
	scope       string
	start       time.Time
	counts      recon.HistoryCounts

	trades         seqStream[recon.TradeRow]
	events, orders seqStream[recon.OrderRow]
	through        int64 // the last seq RowsThrough returned rows through
	// filling carries the outcome of the cursors' next batches, FETCHed
	// while detection checks the page RowsThrough returned (nil: no fill
	// running). The transaction runs one statement at a time, so every
	// other use of it waits for the fill first (waitFill).
	filling chan error

	// the source read
	after          int64
	digest, expect string
	count, first   int64
	pages          int
	want           []int64 // chain points still to record, ascending
	end            recon.SourceSide
	done           bool
	// ahead is the next page, fetched while detection works on this one:
	// the member prepares a page while detection checks the previous, so
	// neither waits on the other (one page in flight, ended with the
	// read's context).
	ahead chan fetched
	// serial: no reading ahead, neither the next page nor the cursors'
	// next batches (ReadSerially, a paced detection).
	serial bool
	// held: the transaction was committed before the first page
	// (releaseSnapshot): the cursors read what PostgreSQL kept of its
	// snapshot, and statements run on conn, each in its own.
	held bool
}

var _ recon.SerialHistory = (*history)(nil)

// ReadSerially stops reading ahead: a paced detection's busy time then
// covers every page and batch it causes (recon.Pace). Called before the
// first page; a page or fill already under way is awaited as always. Its
// pages are at most pacedPageEvents: a page is one stretch of work for the
// member and the client's verification, which the detection cannot cut.
func (h *history) ReadSerially() {
	h.serial = true
	h.lim.page = min(h.lim.page, pacedPageEvents)
}

// releaseSnapshot commits a paced read's transaction before its first
// page. A paced run lasts minutes, and a snapshot held that long keeps
// every row version the catch-up and the live feed leave in the database
// from being pruned: their writes slow down for as long (docs:
// performance.md, "A paced run holds no snapshot"). The history cursors
// are WITH HOLD: at COMMIT PostgreSQL keeps their rows as of the snapshot,
// so the stream, the small tables, the counts and the current orders stay
// one snapshot. Only the lookups of rows re-sequenced ahead of the stream
// (drift) then read the database as it is.
func (h *history) releaseSnapshot() error {
	if err := h.waitFill(); err != nil {
		return err
	}
	if err := h.tx.Commit(h.ctx); err != nil {
		return fmt.Errorf("keep the history cursors and end the snapshot: %w", err)
	}
	h.q, h.held = h.conn, true
	return nil
}

// finish ends the read: the transaction rolled back, or the held cursors
// closed, before the connection goes back to the pool (a held cursor
// outlives its transaction: the next reader of the connection would find
// its name taken). A connection that cannot close them is destroyed.
func (h *history) finish(ctx context.Context) {
	defer h.conn.Release()
	if !h.held {
		// Nothing to commit: ending a read-only transaction either way is the same.
		_ = h.tx.Rollback(ctx)
		return
	}
	if _, err := h.conn.Exec(ctx, closeHistorySQL); err != nil {
		_ = h.conn.Conn().Close(ctx)
	}
}

// pacedPageEvents is a paced read's page size: about ten milliseconds of
// the member's and the client's work, where a page of the contract's
// maximum is a tenth of a second that a live writer on the same cores
// would wait behind.
const pacedPageEvents = 1000

type fetched struct {
	p    *source.Page
	page *recon.SourcePage // p decoded
	err  error
}

// fetchPage fetches and decodes the page after afterSeq: run ahead of
// detection, decoding (a third of the read's CPU) overlaps detection's
// work on the previous page.
func (h *history) fetchPage(after int64, digest, expect string) fetched {
	p, err := h.p.Source.Fetch(h.ctx, after, digest, expect, h.lim.page)
	if err != nil {
		return fetched{err: err}
	}
	out := &recon.SourcePage{Through: p.ThroughSeq}
	for i := range p.Events {
		ev, err := wire.Decode(p.Events[i].Wire)
		if err != nil { // the client decoded it already: unreachable unless the client changed
			return fetched{err: fmt.Errorf("decode event %d of the page after seq %d: %w", i, after, err)}
		}
		switch {
		case ev.Trade != nil:
			out.Trades = append(out.Trades, *ev.Trade)
		case ev.Order != nil:
			out.Orders = append(out.Orders, *ev.Order)
		case ev.Opening != nil:
			out.Openings = append(out.Openings, *ev.Opening)
		default:
			return fetched{err: fmt.Errorf("event %d of the page after seq %d has no payload", i, after)}
		}
	}
	return fetched{p: p, page: out}
}

func (h *history) fail(what string, err error) error {
	return fmt.Errorf("reconstore: scope %s: %s: %w", h.scope, what, h.lim.overdue(h.parent, h.ctx, err))
}

func (h *history) Counts(context.Context) (recon.HistoryCounts, error) { return h.counts, nil }

// waitFill waits for a running fill and returns its error.
func (h *history) waitFill() error {
	if h.filling == nil {
		return nil
	}
	err := <-h.filling
	h.filling = nil
	return err
}

// startFill FETCHes, in the background, the next batch of every cursor
// holding less than a batch ahead: PostgreSQL reads and sends the next
// page's rows while detection checks this one. Never more: a fill per page
// regardless would outrun what pages consume and buffer the whole table.
func (h *history) startFill() {
	tr, ev, or := h.trades.low(), h.events.low(), h.orders.low()
	if h.serial || !tr && !ev && !or {
		return
	}
	h.filling = make(chan error, 1)
	go func(ch chan<- error) {
		var err error
		if tr {
			err = h.trades.more(h.ctx, h.q)
		}
		if ev && err == nil {
			err = h.events.more(h.ctx, h.q)
		}
		if or && err == nil {
			err = h.orders.more(h.ctx, h.q)
		}
		ch <- err
	}(h.filling)
}

func (h *history) Legacy(context.Context) (recon.LegacyRows, error) {
	var l recon.LegacyRows
	err := h.waitFill()
	if err != nil {
		return l, h.fail("rows", err)
	}
	max := recon.MaxPendingRows + 1
	if l.Trades, err = queryRows(h.ctx, h.q, scanTrade, legacyTradesSQL, h.scope, max); err != nil {
		return l, h.fail("legacy trades", err)
	}
	if l.OrderEvents, err = queryRows(h.ctx, h.q, scanOrder, legacyEventsSQL, h.scope, max); err != nil {
		return l, h.fail("legacy order versions", err)
	}
	if l.Orders, err = queryRows(h.ctx, h.q, scanOrder, legacyOrdersSQL, h.scope, max); err != nil {
		return l, h.fail("legacy orders", err)
	}
	return l, nil
}

func (h *history) Duplicates(context.Context) ([]string, [][]recon.TradeRow, error) {
	if err := h.waitFill(); err != nil {
		return nil, nil, h.fail("rows", err)
	}
	max := recon.MaxPendingRows + 1
	ids, err := queryRows(h.ctx, h.q, func(r pgx.Rows) (string, error) {
		var id string
		return id, r.Scan(&id)
	}, dupTradeIDsSQL, h.scope, max)
	if err != nil {
		return nil, nil, h.fail("duplicated trade ids", err)
	}
	rows, err := queryRows(h.ctx, h.q, scanTrade, dupTradeSeqSQL, h.scope, max)
	if err != nil {
		return nil, nil, h.fail("duplicated trade_seqs", err)
	}
	if len(ids) >= max || len(rows) >= max {
		return nil, nil, h.fail("duplicates", fmt.Errorf("%w: more than %d duplicated trade rows", recon.ErrSnapshotTooLarge, recon.MaxPendingRows))
	}
	// Groups in the order their second row comes in trade_id order, as a
	// reader of the table in primary-key order meets them; rows by trade_id.
	by := map[int64][]recon.TradeRow{}
	var order []int64
	for _, r := range rows {
		if len(by[r.TradeSeq]) == 1 {
			order = append(order, r.TradeSeq)
		}
		by[r.TradeSeq] = append(by[r.TradeSeq], r)
	}
	groups := make([][]recon.TradeRow, 0, len(order))
	for _, seq := range order {
		groups = append(groups, by[seq])
	}
	return ids, groups, nil
}

func (h *history) CurrentOrders(_ context.Context, fn func(string, int64)) error {
	if err := h.waitFill(); err != nil {
		return h.fail("rows", err)
	}
	rows, err := h.q.Query(h.ctx, currentOrdersSQL, h.scope)
	if err != nil {
		return h.fail("current orders", err)
	}
	defer rows.Close()
	var id string
	var version int64
	for rows.Next() {
		if err := rows.Scan(&id, &version); err != nil {
			return h.fail("current orders", err)
		}
		fn(id, version)
	}
	if err := rows.Err(); err != nil {
		return h.fail("current orders", err)
	}
	return nil
}

// NextPage reads the member's next verified page. B is the boundary the
// first page reports: the read stops at the first page reaching it (pages
// end on whole commands, so the stop is a verified chain point); without
// the stop a busy member could keep the read going forever.
func (h *history) NextPage(context.Context) (*recon.SourcePage, error) {
	if h.done {
		return nil, nil
	}
	if err := h.ctx.Err(); err != nil {
		return nil, h.fail("source", err)
	}
	if h.serial && !h.held && h.first < 0 {
		if err := h.releaseSnapshot(); err != nil {
			return nil, h.fail("history", err)
		}
	}
	var f fetched
	if h.ahead != nil {
		f = <-h.ahead
		h.ahead = nil
	} else {
		f = h.fetchPage(h.after, h.digest, h.expect)
	}
	if f.err != nil {
		return nil, h.fail(fmt.Sprintf("source page after seq %d", h.after), f.err)
	}
	p, out := f.p, f.page
	h.pages++
	if h.first < 0 {
		// Every later page must carry the descriptor of the first: the read
		// is one history or none.
		h.first, h.expect = p.BoundarySeq, p.DescriptorHash
		h.end.DescriptorHash, h.end.ProtocolVersion = p.DescriptorHash, p.ProtocolVersion
	}
	out.Boundary = h.first
	if n := h.count + int64(len(p.Events)); n > h.lim.records {
		return nil, h.fail("source", fmt.Errorf("%w: the source holds more than the snapshot cap of %d events through its boundary %d (%d read by seq %d)",
			recon.ErrSnapshotTooLarge, h.lim.records, h.first, n, p.ThroughSeq))
	}
	for len(h.want) > 0 && h.want[0] <= h.after {
		h.want = h.want[1:] // at or before a previous page's end: recorded there, or 0
	}
	if len(h.want) > 0 && h.want[0] <= p.ThroughSeq {
		h.end.Chain, h.want = chainPoints(p, h.count, h.want, h.end.Chain)
	}
	h.count += int64(len(p.Events))
	h.after, h.digest = p.ThroughSeq, p.DigestThrough
	if p.Idle || p.ThroughSeq >= p.BoundarySeq || p.ThroughSeq >= h.first {
		// Complete is set only here, at the end of a read that reached B
		// with every page verified; any error fails the history.
		h.done = true
		h.end.Boundary, h.end.Digest, h.end.EventCount, h.end.Complete = h.after, h.digest, h.count, true
		return out, nil
	}
	if h.serial {
		return out, nil
	}
	// The next page follows this one's verified end: fetch it now.
	h.ahead = make(chan fetched, 1)
	go func(ch chan<- fetched, after int64, digest, expect string) {
		ch <- h.fetchPage(after, digest, expect)
	}(h.ahead, h.after, h.digest, h.expect)
	return out, nil
}

func (h *history) End() recon.SourceSide { return h.end }

func (h *history) RowsThrough(_ context.Context, through int64) (recon.HistoryRows, error) {
	var out recon.HistoryRows
	h.through = max(h.through, through)
	if err := h.waitFill(); err != nil {
		return out, h.fail("rows", err)
	}
	var err error
	if out.Trades, err = h.trades.through(h.ctx, h.q, through); err != nil {
		return out, h.fail("trades", err)
	}
	if out.OrderEvents, err = h.events.through(h.ctx, h.q, through); err != nil {
		return out, h.fail("order_events", err)
	}
	if out.Orders, err = h.orders.through(h.ctx, h.q, through); err != nil {
		return out, h.fail("orders", err)
	}
	h.startFill()
	return out, nil
}

func (h *history) TradesByID(_ context.Context, ids []string) ([]recon.TradeRow, error) {
	if err := h.waitFill(); err != nil {
		return nil, h.fail("rows", err)
	}
	if h.trades.exhausted() {
		return nil, nil
	}
	rows, err := queryRows(h.ctx, h.q, scanTrade, tradesByIDSQL, h.scope, ids, h.through)
	if err != nil {
		return nil, h.fail("trades by id", err)
	}
	return rows, nil
}

func (h *history) OrderEventsByKey(_ context.Context, ids []string, versions []int64) ([]recon.OrderRow, error) {
	if err := h.waitFill(); err != nil {
		return nil, h.fail("rows", err)
	}
	if h.events.exhausted() {
		return nil, nil
	}
	rows, err := queryRows(h.ctx, h.q, scanOrder, orderEventsByKeySQL, h.scope, ids, versions, h.through)
	if err != nil {
		return nil, h.fail("order versions by key", err)
	}
	return rows, nil
}

func (h *history) OrdersByID(_ context.Context, ids []string) ([]recon.OrderRow, error) {
	if err := h.waitFill(); err != nil {
		return nil, h.fail("rows", err)
	}
	rows, err := queryRows(h.ctx, h.q, scanOrder, ordersByIDSQL, h.scope, ids)
	if err != nil {
		return nil, h.fail("orders by id", err)
	}
	return rows, nil
}
