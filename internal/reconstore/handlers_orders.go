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
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// orderRef names the row an order action targets: orders by order_id (the
// current version), order_events by (order_id, version).
type orderRef struct {
	table, scope, id, version string
}

func orderRefOf(a recon.Action) (orderRef, error) {
	r := orderRef{table: a.Target["table"], scope: a.Target["scope"], id: a.Target["order_id"], version: a.Target["version"]}
	switch {
	case r.table == recon.TableOrders:
	case r.table == recon.TableOrderEvents && r.version != "":
	default:
		return r, fmt.Errorf("reconstore: %s: target table %q is not orders or order_events with a version", a.ID, r.table)
	}
	return r, nil
}

func (r orderRef) ref() store.OrderRef {
	return store.OrderRef{Table: r.table, Scope: r.scope, OrderID: r.id, Version: r.version}
}

// orderFields reads the row in recon's orderRowFields spelling; nil: absent.
func orderFields(ctx context.Context, tx pgx.Tx, r orderRef) (recon.Fields, error) {
	o, err := store.OrderGet(ctx, tx, r.ref())
	if err != nil {
		return nil, fmt.Errorf("reconstore: read %s %s: %w", r.table, r.id, err)
	}
	if o == nil {
		return nil, nil
	}
	return recon.Fields{"order_id": r.id, "version": fmt.Sprint(o.Version), "seq": fieldSeq(o.Seq), "account": o.Account, "instrument": o.Instrument,
		"side": o.Side, "price": o.Price.String(), "quantity": o.Quantity.String(), "remaining": o.Remaining.String(), "status": o.Status, "ts": fieldTS(o.TS)}, nil
}

// writeOrder makes the row f (nil: deleted). For orders the row is keyed by
// order_id alone, so f may carry another version (a rewound current row).
func writeOrder(ctx context.Context, tx pgx.Tx, r orderRef, f recon.Fields) error {
	if f == nil {
		if err := store.OrderDelete(ctx, tx, r.ref()); err != nil {
			return fmt.Errorf("reconstore: delete %s %s: %w", r.table, r.id, err)
		}
		return nil
	}
	if r.table == recon.TableOrderEvents && f["version"] != r.version {
		return fmt.Errorf("reconstore: order_events %s version %s cannot become version %s", r.id, r.version, f["version"])
	}
	seq, ts, err := seqTSArgs(f)
	if err != nil {
		return err
	}
	err = store.OrderUpsert(ctx, tx, r.ref(), store.OrderValues{Version: f["version"], Seq: seq, Account: f["account"], Instrument: f["instrument"],
		Side: f["side"], Price: f["price"], Quantity: f["quantity"], Remaining: f["remaining"], Status: f["status"], TS: ts})
	if err != nil {
		return fmt.Errorf("reconstore: write %s %s: %w", r.table, r.id, err)
	}
	return nil
}

// ErrRewind: an apply would replace an order's current row with an older
// version. The current row only ever moves forward (the live projector's
// version guard, the page's upsert); nothing was written.
var ErrRewind = errors.New("reconstore: an order's current row is never rewound to an older version")

// rewriteOrder writes After (the source event's SQL representation) over the
// row equal to Before. Orders touch no position key: no basis changes. The
// current row (orders) never moves to an older version: Before is compared
// first (a newer version written since the plan refuses as moved), and an
// action whose After is older than its Before refuses as a rewind.
func (h *Handlers) rewriteOrder(ctx context.Context, a recon.Action) error {
	if a.Target["table"] == recon.TableOrders && a.Before != nil && a.After != nil {
		from, err1 := strconv.ParseInt(a.Before["version"], 10, 64)
		to, err2 := strconv.ParseInt(a.After["version"], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("reconstore: %s: version: %w", a.ID, err)
		}
		if to < from {
			return fmt.Errorf("%w: %s: version %d over version %d", ErrRewind, a.ID, to, from)
		}
	}
	return h.moveOrder(ctx, a, a.Before, a.After, false)
}

// unrewriteOrder writes Before back exactly (deletes the row when Before is
// absent). This is the one move of a current row to an older version: the
// rollback of a rewound row's repair restores the row as the approver found
// it, deliberately; the next dry run reports it again (order_never_rewound).
func (h *Handlers) unrewriteOrder(ctx context.Context, a recon.Action) error {
	return h.moveOrder(ctx, a, a.After, a.Before, true)
}

// moveOrder writes to over from. A revert reinstates the record at both
// rows' sequences (an absent one is no position), so the certificate is
// withdrawn when either lies in the verified window.
func (h *Handlers) moveOrder(ctx context.Context, a recon.Action, from, to recon.Fields, revert bool) error {
	r, err := orderRefOf(a)
	if err != nil {
		return err
	}
	t := transition{
		read: func(ctx context.Context, tx pgx.Tx) (recon.Fields, error) { return orderFields(ctx, tx, r) },
		done: is(to), from: is(from), want: "the state before the move",
		write: func(ctx context.Context, tx pgx.Tx) error { return writeOrder(ctx, tx, r, to) },
	}
	if revert {
		t.revert = true
		for _, f := range []recon.Fields{from, to} {
			if f == nil {
				continue
			}
			seq, err := seqArg(f["seq"])
			if err != nil {
				return err
			}
			t.reinstated = append(t.reinstated, seq)
		}
	}
	return h.compareAndWrite(ctx, a, t)
}
