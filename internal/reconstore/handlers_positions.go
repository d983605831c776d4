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

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/position"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// positionFields reads the key's positions row and basis row in the Fields
// spelling of recon's positionBefore (nil: neither exists). The caller holds
// the projection write lock, so no writer moves them until COMMIT.
func positionFields(ctx context.Context, tx pgx.Tx, scope, acct, instr string) (recon.Fields, error) {
	f := recon.Fields{}
	p, err := store.PositionGet(ctx, tx, scope, acct, instr)
	switch {
	case err != nil:
		return nil, fmt.Errorf("reconstore: read position %s/%s: %w", acct, instr, err)
	case p == nil:
		f["row"] = "absent"
	default:
		f["account"], f["instrument"] = acct, instr
		f["quantity"], f["avg_cost"] = p.Quantity.String(), p.AvgCost.String()
		f["opening_quantity"], f["opening_avg_cost"] = p.OpeningQuantity.String(), p.OpeningAvgCost.String()
		f["opening_proven"], f["opening_seq"] = fmt.Sprint(p.OpeningProven), fieldSeq(p.OpeningSeq)
	}
	b, err := store.BasisGet(ctx, tx, scope, acct, instr)
	switch {
	case err != nil:
		return nil, fmt.Errorf("reconstore: read basis %s/%s: %w", acct, instr, err)
	case b == nil:
		if f["row"] == "absent" {
			return nil, nil
		}
	default:
		f["basis_seq"], f["basis_quantity"], f["basis_avg_cost"] = fmt.Sprint(b.BasisSeq), b.Quantity.String(), b.AvgCost.String()
	}
	return f, nil
}

// rowPart is f without its basis fields (what After describes).
func rowPart(f recon.Fields) recon.Fields {
	if f == nil {
		return nil
	}
	r := recon.Fields{}
	for k, v := range f {
		if k != "basis_seq" && k != "basis_quantity" && k != "basis_avg_cost" {
			r[k] = v
		}
	}
	return r
}

// atRow matches a position record at f: exactly, or at f's row (an absent
// record: f's row=absent) without any basis. A cursor at genesis keeps no
// basis: a revert that withdrew the scope's certificate dropped every
// basis of the scope (store.WithdrawTx), and so does a bootstrap page. A
// basis only saves a page re-reading the key's history, so a record at
// f's row without one is f for every move here: without this, the same
// revert repeated (a crash before its journal entry) would refuse its own
// write as moved, and so would every plan made before the withdrawal.
func atRow(f recon.Fields) func(recon.Fields) bool {
	return func(cur recon.Fields) bool {
		if cur.Equal(f) {
			return true
		}
		if f == nil {
			return false
		}
		if cur == nil {
			cur = recon.Fields{"row": "absent"}
		}
		return cur["basis_seq"] == "" && rowPart(cur).Equal(rowPart(f))
	}
}

func keyOf(a recon.Action) (scope, acct, instr string) {
	return a.Target["scope"], a.Target["account"], a.Target["instrument"]
}

// positionRow reads the key's row and basis in the handler's transaction.
func positionRow(scope, acct, instr string) func(context.Context, pgx.Tx) (recon.Fields, error) {
	return func(ctx context.Context, tx pgx.Tx) (recon.Fields, error) {
		return positionFields(ctx, tx, scope, acct, instr)
	}
}

// writePosition applies rederive_position and adopt_source_opening: the row
// becomes After (quantity and average cost re-derived, the proven source
// opening), and the key's basis is rewritten to agree with it (see
// rebaseKey). Before → write; row already After → no-op; else refused. A
// changed balance is announced in the same transaction (announce), as is
// every other position write below.
func (h *Handlers) writePosition(ctx context.Context, a recon.Action) error {
	scope, acct, instr := keyOf(a)
	n := h.announcer(a, "apply")
	return n.kick(h.compareAndWrite(ctx, a, transition{
		read: n.read(positionRow(scope, acct, instr)),
		// Applied before (a crash between the write and the journal): the
		// row is After. A record still equal to Before is never the goal,
		// even when its row already holds After's values: its basis is
		// Before's, and without the rebase the next page would fold the
		// key from it.
		done: func(cur recon.Fields) bool { return !cur.Equal(a.Before) && rowPart(cur).Equal(a.After) },
		from: atRow(a.Before), want: "Before",
		write: n.write(func(ctx context.Context, tx pgx.Tx) error {
			if err := upsertPosition(ctx, tx, scope, a.After); err != nil {
				return err
			}
			return rebaseKey(ctx, tx, scope, acct, instr, a.After)
		}),
	}))
}

// revertPosition writes Before back exactly: the row (deleted when Before
// has row=absent) and the basis Before recorded (deleted when it had none).
// Exact in every value Before carries: a numeric column the apply did not
// change keeps its bytes (keepScale), one it changed comes back as Before's
// canonical decimal (Before carries values, not numeric scale), and
// updated_at, which Before does not carry, is stamped anew. drop_position's
// revert is byte-exact instead: it moves the quarantined row itself back.
func (h *Handlers) revertPosition(ctx context.Context, a recon.Action) error {
	scope, acct, instr := keyOf(a)
	n := h.announcer(a, "revert")
	return n.kick(h.compareAndWrite(ctx, a, transition{
		revert: true, reinstated: anywhere,
		read: n.read(positionRow(scope, acct, instr)),
		done: atRow(a.Before), // never applied, or reverted already
		from: func(cur recon.Fields) bool { return rowPart(cur).Equal(a.After) }, want: "After",
		write: n.write(func(ctx context.Context, tx pgx.Tx) error {
			return restorePosition(ctx, tx, scope, acct, instr, a.Before)
		}),
	}))
}

// restorePosition makes the key's row and basis exactly f (positionBefore
// spelling; nil or row=absent: no row; no basis fields: no basis).
func restorePosition(ctx context.Context, tx pgx.Tx, scope, acct, instr string, f recon.Fields) error {
	if f == nil || f["row"] == "absent" {
		if err := store.PositionDelete(ctx, tx, scope, acct, instr); err != nil {
			return fmt.Errorf("reconstore: delete position %s/%s: %w", acct, instr, err)
		}
	} else if err := upsertPosition(ctx, tx, scope, f); err != nil {
		return err
	}
	if f == nil || f["basis_seq"] == "" {
		if err := deleteBasis(ctx, tx, scope, acct, instr); err != nil {
			return fmt.Errorf("reconstore: delete basis %s/%s: %w", acct, instr, err)
		}
		return nil
	}
	if err := writeBasis(ctx, tx, scope, acct, instr, f["basis_seq"], f["basis_quantity"], f["basis_avg_cost"]); err != nil {
		return fmt.Errorf("reconstore: restore basis %s/%s: %w", acct, instr, err)
	}
	return nil
}

func deleteBasis(ctx context.Context, tx pgx.Tx, scope, acct, instr string) error {
	return store.BasisDelete(ctx, tx, scope, acct, instr)
}

// writeBasis upserts the key's basis row (store.BasisUpsert: a value the
// row holds already keeps its stored scale, so a revert is byte-exact for
// every value the repair did not change). The derived position and the
// deferred mark stay: a page defers a key only where its row holds that
// position, and every deferred key is re-derived from the basis before any
// slice makes the scope CURRENT, so a hint the new basis no longer
// supports costs a full fold, never a certificate.
func writeBasis(ctx context.Context, tx pgx.Tx, scope, acct, instr string, seq, qty, avg any) error {
	return store.BasisUpsert(ctx, tx, scope, acct, instr, seq, qty, avg)
}

func upsertPosition(ctx context.Context, tx pgx.Tx, scope string, f recon.Fields) error {
	oseq, err := seqArg(f["opening_seq"])
	if err != nil {
		return err
	}
	err = store.PositionUpsert(ctx, tx, scope, store.PositionValues{Account: f["account"], Instrument: f["instrument"],
		OpeningQuantity: f["opening_quantity"], OpeningAvgCost: f["opening_avg_cost"], OpeningProven: f["opening_proven"],
		OpeningSeq: oseq, Quantity: f["quantity"], AvgCost: f["avg_cost"]})
	if err != nil {
		return fmt.Errorf("reconstore: write position %s/%s: %w", f["account"], f["instrument"], err)
	}
	return nil
}

// rebaseKey keeps the key's derivation basis consistent with the repaired
// row, so the next page's balance rule (store's proveStart) holds: the basis
// becomes the fold, from the repaired opening, of the key's retained BOOKED
// trades through the cursor's verified-through V; none when V is 0 or the
// opening lies after V (the page carrying it proves it). The fold of ALL
// retained trades must reproduce After exactly, else the trades are not what
// the plan derived from: refused, nothing written. Without it the next page
// would refuse the key against a stale basis, or fold it from one that
// contradicts the row (docs/design/repairs.md, "Rebasing a repaired key").
func rebaseKey(ctx context.Context, tx pgx.Tx, scope, acct, instr string, after recon.Fields) error {
	open, err := openingOf(after)
	if err != nil {
		return err
	}
	oseq, err := seqArg(after["opening_seq"])
	if err != nil {
		return err
	}
	v, err := store.CursorVerifiedThrough(ctx, tx, scope)
	if err != nil {
		return fmt.Errorf("reconstore: read cursor of %q: %w", scope, err)
	}
	fills, err := retainedFills(ctx, tx, scope, acct, instr)
	if err != nil {
		return err
	}
	final, atV := open, open
	for _, f := range fills {
		final = position.Apply(final, f.Quantity, f.Price)
		if f.Seq <= v {
			atV = final
		}
	}
	want, err := stateOf(after["quantity"], after["avg_cost"])
	if err != nil {
		return err
	}
	if !final.Equal(want) {
		return fmt.Errorf("%w: %s/%s: the retained trades derive %s@%s from the opening, not After %s@%s: fix the key's trades first",
			ErrRecordMoved, acct, instr, final.Quantity, final.AvgCost, want.Quantity, want.AvgCost)
	}
	if v == 0 || (oseq != nil && *oseq > v) {
		err = deleteBasis(ctx, tx, scope, acct, instr)
	} else {
		err = writeBasis(ctx, tx, scope, acct, instr, v, atV.Quantity, atV.AvgCost)
	}
	if err != nil {
		return fmt.Errorf("reconstore: rebase %s/%s: %w", acct, instr, err)
	}
	return nil
}

func stateOf(q, a string) (position.State, error) {
	dq, err := decimal.NewFromString(q)
	if err != nil {
		return position.State{}, fmt.Errorf("reconstore: quantity %q: %w", q, err)
	}
	da, err := decimal.NewFromString(a)
	if err != nil {
		return position.State{}, fmt.Errorf("reconstore: avg_cost %q: %w", a, err)
	}
	return position.State{Quantity: dq, AvgCost: da}, nil
}

func openingOf(f recon.Fields) (position.State, error) {
	return stateOf(f["opening_quantity"], f["opening_avg_cost"])
}

// retainedFills are the key's retained BOOKED trade legs in authoritative
// order (the same selection as the page's derivation).
func retainedFills(ctx context.Context, tx pgx.Tx, scope, acct, instr string) ([]position.Fill, error) {
	fills, err := store.TradeFillsOfKey(ctx, tx, scope, acct, instr)
	if err != nil {
		return nil, fmt.Errorf("reconstore: read trades of %s/%s: %w", acct, instr, err)
	}
	return fills, nil
}

// dropPosition moves a phantom row (and its basis) into
// projection_position_quarantine when it still equals Before; absent → no-op.
func (h *Handlers) dropPosition(ctx context.Context, a recon.Action) error {
	scope, acct, instr := keyOf(a)
	n := h.announcer(a, "apply")
	return n.kick(h.compareAndWrite(ctx, a, transition{
		read: n.read(positionRow(scope, acct, instr)), done: is(nil), from: atRow(a.Before), want: "Before",
		write: n.write(func(ctx context.Context, tx pgx.Tx) error {
			// Written once, never updated (see quarantineTrade): a copy there
			// already is kept when it holds Before's values, else refused.
			ct, err := tx.Exec(ctx, `
INSERT INTO projection_position_quarantine (scope, account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq,
    quantity, avg_cost, updated_at, basis_seq, basis_quantity, basis_avg_cost)
SELECT p.scope, p.account, p.instrument, p.opening_quantity, p.opening_avg_cost, p.opening_proven, p.opening_seq,
       p.quantity, p.avg_cost, p.updated_at, b.basis_seq, b.quantity, b.avg_cost
  FROM positions p LEFT JOIN projection_catchup_basis b ON b.scope = p.scope AND b.account = p.account AND b.instrument = p.instrument
 WHERE p.scope = $1 AND p.account = $2 AND p.instrument = $3
ON CONFLICT (scope, account, instrument) DO NOTHING`, scope, acct, instr)
			if err != nil {
				return fmt.Errorf("reconstore: quarantine position %s/%s: %w", acct, instr, err)
			}
			if ct.RowsAffected() == 0 {
				q, err := quarantinedPosition(ctx, tx, scope, acct, instr)
				if err != nil {
					return err
				}
				if !atRow(a.Before)(q) {
					return fmt.Errorf("%w: %s: another copy of position %s/%s is quarantined already (%v); a human compares the two",
						ErrRecordMoved, a.ID, acct, instr, q)
				}
			}
			return restorePosition(ctx, tx, scope, acct, instr, nil)
		}),
	}))
}

// undropPosition re-inserts the quarantined row and basis exactly (numeric
// scale and updated_at included) when the key is still absent.
func (h *Handlers) undropPosition(ctx context.Context, a recon.Action) error {
	scope, acct, instr := keyOf(a)
	n := h.announcer(a, "revert")
	return n.kick(h.compareAndWrite(ctx, a, transition{
		revert: true, reinstated: anywhere,
		read: n.read(positionRow(scope, acct, instr)), done: atRow(a.Before), from: is(nil), want: "absent",
		write: n.write(func(ctx context.Context, tx pgx.Tx) error {
			restored, err := store.PositionRestoreFromQuarantine(ctx, tx, scope, acct, instr)
			if err != nil {
				return fmt.Errorf("reconstore: restore position %s/%s: %w", acct, instr, err)
			}
			if !restored {
				// No quarantined copy (dropped by another path): Before's values.
				return restorePosition(ctx, tx, scope, acct, instr, a.Before)
			}
			if err := store.BasisRestoreFromPositionQuarantine(ctx, tx, scope, acct, instr); err != nil {
				return fmt.Errorf("reconstore: restore basis %s/%s: %w", acct, instr, err)
			}
			if _, err := tx.Exec(ctx, `DELETE FROM projection_position_quarantine WHERE scope = $1 AND account = $2 AND instrument = $3`, scope, acct, instr); err != nil {
				return fmt.Errorf("reconstore: release quarantined position %s/%s: %w", acct, instr, err)
			}
			after, err := positionFields(ctx, tx, scope, acct, instr)
			if err != nil {
				return err
			}
			if !atRow(a.Before)(after) {
				return moved(a, "the quarantined copy to equal Before", after)
			}
			return nil
		}),
	}))
}

// quarantinedPosition reads the key's quarantined copy in the spelling of
// positionFields (nil: none).
func quarantinedPosition(ctx context.Context, tx pgx.Tx, scope, acct, instr string) (recon.Fields, error) {
	var q, a, oq, oa decimal.Decimal
	var proven bool
	var oseq, bseq *int64
	var bq, ba decimal.NullDecimal
	err := tx.QueryRow(ctx, `SELECT quantity, avg_cost, opening_quantity, opening_avg_cost, opening_proven, opening_seq, basis_seq, basis_quantity, basis_avg_cost
  FROM projection_position_quarantine WHERE scope = $1 AND account = $2 AND instrument = $3`, scope, acct, instr).
		Scan(&q, &a, &oq, &oa, &proven, &oseq, &bseq, &bq, &ba)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reconstore: read quarantined position %s/%s: %w", acct, instr, err)
	}
	f := recon.Fields{"account": acct, "instrument": instr, "quantity": q.String(), "avg_cost": a.String(),
		"opening_quantity": oq.String(), "opening_avg_cost": oa.String(), "opening_proven": fmt.Sprint(proven), "opening_seq": fieldSeq(oseq)}
	if bseq != nil {
		f["basis_seq"], f["basis_quantity"], f["basis_avg_cost"] = fieldSeq(bseq), bq.Decimal.String(), ba.Decimal.String()
	}
	return f, nil
}
