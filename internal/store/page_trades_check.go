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
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// Window first, probes for the rest (FR-APR06; docs/design/page-transaction.md):
// retained rows are read by one range scan of the window (after, through]
// and primary-key probes for only the page rows the window did not show. The
// keys are unique, so a page row the window shows has no other retained row
// a probe could find; reading in index order keeps re-verification linear.

// retainedTrade is one retained trade row as checkTrades compares it.
type retainedTrade struct {
	id, instrument, buyOrder, sellOrder, buyAccount, sellAccount, status string
	seq                                                                  *int64
	tradeSeq                                                             int64
	price, quantity                                                      pgtype.Numeric
	ts                                                                   time.Time
}

func (r *retainedTrade) dest() []any {
	return []any{&r.id, &r.seq, &r.tradeSeq, &r.instrument, &r.price, &r.quantity, &r.buyOrder, &r.sellOrder,
		&r.buyAccount, &r.sellAccount, &r.ts, &r.status}
}

// sameAs reports whether the row is the SQL representation of src: decimals
// compared numerically (numeric keeps no canonical scale; a NaN or an
// infinity equals nothing), the timestamp at the column's microseconds.
func (r *retainedTrade) sameAs(src *wire.Trade) bool {
	return r.tradeSeq == src.TradeSeq && r.instrument == src.Instrument && r.buyOrder == src.BuyOrderID &&
		r.sellOrder == src.SellOrderID && r.buyAccount == src.BuyAccount && r.sellAccount == src.SellAccount &&
		r.ts.Equal(tsSQL(src.TS)) && numericEquals(r.price, src.Price) && numericEquals(r.quantity, src.Quantity)
}

func numericEquals(n pgtype.Numeric, d decimal.Decimal) bool {
	return finiteNumeric(n) == nil && decimal.NewFromBigInt(n.Int, n.Exp).Equal(d)
}

// tradeRefusal keeps the refusal of the earliest page trade in
// authoritative order, whichever query found it, so that a page refused for
// several reasons names the same one however its rows were read.
type tradeRefusal struct {
	err           error
	seq, tradeSeq int64
}

func (f *tradeRefusal) offer(src *wire.Trade, err error) {
	if f.err == nil || src.Seq < f.seq || (src.Seq == f.seq && src.TradeSeq < f.tradeSeq) {
		f.err, f.seq, f.tradeSeq = err, src.Seq, src.TradeSeq
	}
}

// checkTrades compares every page trade with its retained row, if any
// (provenance, immutable content, booking), and refuses orphans: retained
// trades positioned in the window that the page does not hold. ORPHAN_TRADE
// takes precedence over what the comparison found. w.existing collects the
// page trades already retained, wherever they sit.
func (w *pageTx) checkTrades(ctx context.Context) error {
	var page map[string]*wire.Trade // built at the first row read: a bootstrap's window is empty
	pageTrade := func(id string) *wire.Trade {
		if page == nil {
			page = w.p.tradeByID()
		}
		return page[id]
	}
	w.existing = map[string]bool{}
	var first tradeRefusal
	var retained int64
	var orphans []string
	rows, err := w.tx.Query(ctx, windowTradesSQL, w.scope, w.p.after, w.p.through)
	if err != nil {
		return dbErr("store: retained window trades", err)
	}
	var r retainedTrade
	for rows.Next() {
		if err := rows.Scan(r.dest()...); err != nil {
			rows.Close()
			return dbErr("store: scan retained trade", err)
		}
		retained++
		src := pageTrade(r.id)
		if src == nil {
			if len(orphans) < 5 {
				orphans = append(orphans, r.id+"@"+strconv.FormatInt(*r.seq, 10))
			}
			continue
		}
		w.existing[r.id] = true
		w.compareTrade(&r, src, &first)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return dbErr("store: retained window trades", err)
	}
	inWindow := int64(len(w.existing)) // the page trades the window showed: trade_id is the key
	if retained > inWindow {
		return refuse(codes.OrphanTrade, "%d retained trades in (%d, %d], %d of them in the source; absent from the source: %s",
			retained, w.p.after, w.p.through, inWindow, strings.Join(orphans, ", "))
	}
	probe := make([]string, 0, len(w.p.trades)-int(inWindow))
	for _, t := range w.p.trades {
		if !w.existing[t.TradeID] {
			probe = append(probe, t.TradeID)
		}
	}
	if len(probe) == 0 {
		return first.err
	}
	if first.err == nil {
		// Only a refusal could be found (page_unprobed.go); the COPY's key finds it.
		skip, err := w.unprobed(ctx)
		if err != nil {
			return err
		}
		if skip {
			w.skipped = true
			return nil
		}
	}
	if rows, err = w.tx.Query(ctx, probeTradesSQL, w.scope, probe); err != nil {
		return dbErr("store: retained page trades", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(r.dest()...); err != nil {
			return dbErr("store: scan retained trade", err)
		}
		w.existing[r.id] = true
		w.compareTrade(&r, pageTrade(r.id), &first)
	}
	if err := rows.Err(); err != nil {
		return dbErr("store: retained page trades", err)
	}
	return first.err
}

// compareTrade offers the refusal, if any, that the retained row r of the
// page trade src calls for.
func (w *pageTx) compareTrade(r *retainedTrade, src *wire.Trade, first *tradeRefusal) {
	switch {
	case r.seq == nil:
		first.offer(src, refuse(codes.UnknownLegacyHistory, "trade %s has no consensus seq", r.id))
	case *r.seq != src.Seq:
		first.offer(src, refuse(codes.TradeProvenanceConflict, "trade %s retained at seq %d, source seq %d", r.id, *r.seq, src.Seq))
	case !r.sameAs(src):
		first.offer(src, refuse(codes.ImmutableTradeConflict, "trade %s at seq %d differs from its source event", r.id, src.Seq))
	case r.status != "BOOKED":
		first.offer(src, refuse(codes.RejectedBooking, "trade %s at seq %d is retained with booking status %s", r.id, src.Seq, r.status))
	}
}

// tradeByID indexes the slice's trades by trade_id (unique in a page:
// prepare refuses a repeat).
func (p *prepared) tradeByID() map[string]*wire.Trade {
	m := make(map[string]*wire.Trade, len(p.trades))
	for _, t := range p.trades {
		m[t.TradeID] = t
	}
	return m
}
