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

	"github.com/projection-recovery/projection-recovery/internal/codes"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/position"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// derive reads every touched key's pre-page row, basis and retained trades,
// checks the key and re-derives it (R1). The balance rule: a key's stored
// quantity must equal its proven start (proveStart) plus the signed
// quantities of its retained BOOKED trades after the start, and a key with
// retained trades must have a row; else UNEXPLAINED_BALANCE (a manual edit,
// a lost update, a double apply). Average cost is order-dependent and is not
// compared: it is what the re-derivation repairs.
// docs/design/page-transaction.md, "The balance rule".
func (w *pageTx) derive(ctx context.Context) error {
	rows, err := w.tx.Query(ctx, touchedKeysSQL, w.scope)
	if err != nil {
		return dbErr("store: read touched keys", err)
	}
	w.rows = make([]posRow, 0, len(w.p.keys))
	for rows.Next() {
		var r posRow
		var dq, da decimal.NullDecimal
		if err := rows.Scan(&r.k.account, &r.k.instrument, &r.exists, &r.pre.Quantity, &r.pre.AvgCost, &r.openQty, &r.openAvg,
			&r.openProven, &r.openSeq, &r.basisSeq, &r.basis.Quantity, &r.basis.AvgCost, &dq, &da); err != nil {
			rows.Close()
			return dbErr("store: scan touched key", err)
		}
		if dq.Valid && da.Valid {
			r.derived = &position.State{Quantity: dq.Decimal, AvgCost: da.Decimal}
		}
		w.rows = append(w.rows, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return dbErr("store: read touched keys", err)
	}
	// Keys whose last full fold still holds (derivedHolds) are not re-read:
	// their fold is taken as unchanged and they are marked deferred.
	var missA, missI []string
	for i := range w.rows {
		r := &w.rows[i]
		if r.deferred = !w.noDefer && w.derivedHolds(r); !r.deferred {
			missA, missI = append(missA, r.k.account), append(missI, r.k.instrument)
		}
	}
	retained := map[key][]position.NumFill{}
	if len(missA) > 0 {
		if retained, err = w.readLegs(ctx, missA, missI); err != nil {
			return err
		}
	}
	for i := range w.rows {
		r := &w.rows[i]
		if r.deferred {
			w.deferFold(r)
			continue
		}
		open := w.p.openings[r.k]
		if r.exists && !r.openProven && open == nil {
			return refuse(codes.UnprovenInitialBalance, "key %s has an unproven opening balance %s@%s", r.describe(), r.openQty, r.openAvg)
		}
		start, err := w.proveStart(r, open, retained[r.k])
		if err != nil {
			return err
		}
		// Balance rule (see above), on the pre-page state.
		expect := position.NumOf(start.Quantity)
		for _, f := range retained[r.k] {
			expect = position.AddNum(expect, f.Quantity)
		}
		if (!r.exists && len(retained[r.k]) > 0) || (r.exists && !r.pre.Quantity.Equal(expect.Decimal())) {
			return refuse(codes.UnexplainedBalance, "key %s holds %s but its opening and retained trades explain %s", r.describe(), r.pre.Quantity, expect.Decimal())
		}

		// R1: all retained trades plus the ones the page inserts, in
		// authoritative order from the proven start.
		fills := make([]position.NumFill, 0, len(retained[r.k])+len(w.p.fills[r.k])) // one allocation per key
		fills = append(fills, retained[r.k]...)
		for _, f := range w.p.fills[r.k] {
			if !w.existing[f.t.TradeID] {
				fills = append(fills, f.num())
			}
		}
		position.SortNum(fills)
		if open != nil {
			start = position.State{Quantity: open.Quantity, AvgCost: open.AvgCost}
			r.openQty, r.openAvg, r.openProven, r.openSeq = open.Quantity, open.AvgCost, true, &open.Seq
		} else if !r.exists {
			r.openQty, r.openAvg, r.openProven = decimal.Zero, decimal.Zero, true
		}
		// The fold in Nums: Apply's exact coefficients and exponents without a
		// big.Int per step (position.ApplyNum); the hot loop of a
		// re-verification, which folds every retained trade newer than the
		// page for every key the page touches.
		s := position.NumStateOf(start)
		basis := s
		for _, f := range fills {
			s = position.ApplyNum(s, f.Quantity, f.Price)
			if f.Seq <= w.p.through {
				basis = s
			}
		}
		r.newBasis = basis.State()
		r.final = s.State()
		r.changed = !r.exists || !r.final.Equal(r.pre)
		if r.changed {
			w.changed++
		}
	}
	return nil
}

// proveStart returns the state a touched key's pre-page balance is checked
// from. A flag in SQL proves nothing: an opening is proven only by the
// verified source event (in this page, same seq and values) or by the key's
// basis, which a verified page derived. So: a basis is the start (an
// opening arriving now is OPENING_CONFLICT); else an opening event in the
// page, which must follow none of the key's trades and match any stored
// opening; else zero, and a stored non-zero opening refuses
// (UNPROVEN_INITIAL_BALANCE or OPENING_CONFLICT). Without this, a row
// claiming an opening of 7 would be certified at 7 plus its trades where the
// source derives 0 plus its trades. docs/design/page-transaction.md.
func (w *pageTx) proveStart(r *posRow, open *wire.Opening, retained []position.NumFill) (position.State, error) {
	if r.basisSeq != nil {
		if open != nil {
			return position.State{}, refuse(codes.OpeningConflict, "opening of %s at seq %d arrives after verified trades (basis seq %d)", r.describe(), open.Seq, *r.basisSeq)
		}
		return r.basis, nil
	}
	if open != nil {
		for _, f := range retained {
			if f.Seq <= open.Seq {
				return position.State{}, refuse(codes.OpeningConflict, "opening of %s at seq %d follows its retained trade at seq %d", r.describe(), open.Seq, f.Seq)
			}
		}
		for _, f := range w.p.fills[r.k] {
			if f.t.Seq <= open.Seq {
				return position.State{}, refuse(codes.OpeningConflict, "opening of %s at seq %d follows its trade %s at seq %d", r.describe(), open.Seq, f.t.TradeID, f.t.Seq)
			}
		}
		switch {
		case r.openSeq != nil && (*r.openSeq != open.Seq || !r.openQty.Equal(open.Quantity) || !r.openAvg.Equal(open.AvgCost)):
			return position.State{}, refuse(codes.OpeningConflict, "key %s retains opening %s@%s at seq %d, source %s@%s at seq %d",
				r.describe(), r.openQty, r.openAvg, *r.openSeq, open.Quantity, open.AvgCost, open.Seq)
		case r.openSeq == nil && !(r.openQty.IsZero() && r.openAvg.IsZero()) && !(r.openQty.Equal(open.Quantity) && r.openAvg.Equal(open.AvgCost)):
			return position.State{}, refuse(codes.OpeningConflict, "key %s retains opening %s@%s without provenance, source %s@%s at seq %d",
				r.describe(), r.openQty, r.openAvg, open.Quantity, open.AvgCost, open.Seq)
		}
		return position.State{Quantity: r.openQty, AvgCost: r.openAvg}, nil
	}
	if r.openQty.IsZero() && r.openAvg.IsZero() {
		return position.State{Quantity: decimal.Zero, AvgCost: decimal.Zero}, nil
	}
	if r.openSeq == nil {
		return position.State{}, refuse(codes.UnprovenInitialBalance, "key %s holds opening %s@%s that no source event proves", r.describe(), r.openQty, r.openAvg)
	}
	if *r.openSeq <= w.p.through {
		return position.State{}, refuse(codes.OpeningConflict, "key %s retains opening %s@%s at seq %d, but the verified source has no opening of it through seq %d",
			r.describe(), r.openQty, r.openAvg, *r.openSeq, w.p.through)
	}
	return position.State{}, refuse(codes.OpeningConflict, "key %s retains opening %s@%s at seq %d, after its trades verified through seq %d",
		r.describe(), r.openQty, r.openAvg, *r.openSeq, w.p.through)
}

// checkPhantomBalances runs when a page makes the scope CURRENT: a position
// row that no page ever touched (no basis), that has no retained trade, and
// that holds a non-zero balance, is a balance nothing explains
// (UNEXPLAINED_BALANCE), whatever its opening_seq says: a verified opening
// event would have touched the key and left a basis, so an opening_seq <= the
// page's through names a window whose source had no such opening. The one
// exception is an opening_seq beyond the page's through: a live opening newer
// than B, which the later page holding it verifies (and refuses if it does
// not match). Without this check a row written outside the trade path would
// survive a genesis re-verification simply because the source never
// mentions its key, or because it names a seq.
func (w *pageTx) checkPhantomBalances(ctx context.Context) error {
	var acct, instr string
	var qty decimal.Decimal
	err := w.tx.QueryRow(ctx, phantomBalancesSQL, w.scope, w.p.through).Scan(&acct, &instr, &qty)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return dbErr("store: phantom balances", err)
	}
	return refuse(codes.UnexplainedBalance, "key %s/%s holds %s but no source event or retained trade explains it", acct, instr, qty)
}

// posRow is one touched key: its pre-page row, its starting point and result.
type posRow struct {
	k                key
	exists           bool
	pre              position.State
	openQty, openAvg decimal.Decimal
	openProven       bool
	openSeq          *int64
	basisSeq         *int64
	basis            position.State
	final, newBasis  position.State
	changed          bool
	derived          *position.State // the basis row's derived position (NULL: nil)
	deferred         bool            // the slice took derived as the key's fold (derivedHolds)
}

func (r posRow) describe() string { return fmt.Sprintf("%s/%s", r.k.account, r.k.instrument) }
