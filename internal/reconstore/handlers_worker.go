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
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/notify"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// releaseLease ends the claim of a lease held past expiry (irreversible):
// the claim is released once the row's fence has moved past Before's
// (FR-APR08: a write of the old fence can never commit). Inside an apply the
// session's AcquireLease already took the expired lease over and moved the
// fence, so the row held by this very session is the After. Without a
// session (a rehearsal) it clears the owner under the write lock, only while
// the row is still Before and expired by the database clock (an unexpired
// lease's page may still run); fence and expiry stay and the row is never
// deleted, which would reset the fence. Anything else is ErrRecordMoved.
// docs/design/repairs.md, "Releasing a dead holder's lease".
func (h *Handlers) releaseLease(ctx context.Context, a recon.Action) error {
	scope := a.Target["scope"]
	beforeFence, err := strconv.ParseInt(a.Before["fence"], 10, 64)
	if err != nil {
		return fmt.Errorf("reconstore: %s: fence %q in Before: %w", a.ID, a.Before["fence"], err)
	}
	// The session's lease, when this handler runs inside one.
	var own *store.Lease
	if h.Lease != nil {
		if l, err := h.Lease(ctx, scope); err == nil {
			own = &l
		}
	}
	fn := func(tx pgx.Tx) error {
		if err := store.WriteLock(ctx, tx, scope); err != nil {
			return err
		}
		row, expired, err := store.LeaseGetForUpdate(ctx, tx, scope)
		if err != nil {
			return fmt.Errorf("reconstore: read lease of %q: %w", scope, err)
		}
		if row == nil {
			return moved(a, "Before", nil)
		}
		owner, fence, exp, renewed := row.Owner, row.Fence, row.ExpiresAt, row.RenewedAt
		cur := recon.Fields{"owner": owner, "fence": strconv.FormatInt(fence, 10), "expires_at": fieldTS(exp), "renewed_at": fieldTS(renewed)}
		switch {
		case cur.Equal(a.After):
			return nil
		case own != nil && owner == own.Owner && fence == own.Fence && !expired && fence > beforeFence:
			return nil // this session's takeover released Before's claim
		case !cur.Equal(a.Before):
			return moved(a, "Before", cur)
		case !expired:
			return fmt.Errorf("%w: %s: the lease is unexpired until %s", ErrRecordMoved, a.ID, fieldTS(exp))
		}
		if err := store.LeaseClearOwner(ctx, tx, scope, owner, fence); err != nil {
			return fmt.Errorf("reconstore: release lease of %q: %w", scope, err)
		}
		return nil
	}
	tx, err := h.Store.Pool().Begin(ctx)
	if err != nil {
		return fmt.Errorf("reconstore: %s: begin: %w", a.ID, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := fn(tx); err != nil {
		return err
	}
	if h.DryRun {
		return nil
	}
	rec := h.stepRecords(ctx)
	if rec != nil {
		if err := h.recordTx(ctx, tx, rec); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("reconstore: %s: commit: %w", a.ID, err)
	}
	if rec != nil {
		rec.MarkWritten()
	}
	return nil
}

// triggerCycle asks the controller for one recovery cycle of the scope. It
// writes nothing to SQL (its revert is a no-op): the cycle itself writes,
// under its own lease, like any other.
func (h *Handlers) triggerCycle(ctx context.Context, a recon.Action) error {
	if h.TriggerCycle == nil {
		return errors.New("reconstore: trigger_cycle: no controller hook")
	}
	if h.DryRun {
		return nil
	}
	return h.TriggerCycle(ctx, a.Target["scope"])
}

// outboxEntry is one outbox row and the notification it publishes.
type outboxEntry struct {
	recon.OutboxRow
	// n carries the amounts as PostgreSQL prints them (numeric scale kept),
	// the body the outbox publisher sends for the row.
	n notify.Notification
}

// outboxRow reads one outbox row of the scope; nil when absent.
func outboxRow(ctx context.Context, tx pgx.Tx, scope, id string) (*outboxEntry, error) {
	row, err := store.OutboxGetForUpdate(ctx, tx, scope, id)
	if err != nil {
		return nil, fmt.Errorf("reconstore: read outbox row %s: %w", id, err)
	}
	if row == nil {
		return nil, nil
	}
	o := outboxEntry{OutboxRow: recon.OutboxRow{ID: row.ID, MsgID: row.MsgID, Account: row.Account, Instrument: row.Instrument,
		CursorSeq: row.CursorSeq, CreatedAt: row.CreatedAt, SentAt: row.SentAt}}
	o.n.Quantity, o.n.AvgCost = row.Quantity, row.AvgCost
	if o.Quantity, err = decimal.NewFromString(o.n.Quantity); err != nil {
		return nil, fmt.Errorf("reconstore: outbox row %s quantity: %w", id, err)
	}
	if o.AvgCost, err = decimal.NewFromString(o.n.AvgCost); err != nil {
		return nil, fmt.Errorf("reconstore: outbox row %s avg_cost: %w", id, err)
	}
	o.n.MsgID, o.n.Scope, o.n.Account, o.n.Instrument, o.n.CursorSeq = o.MsgID, scope, o.Account, o.Instrument, o.CursorSeq
	return &o, nil
}

// republish publishes an unsent row with its msg id and stamps sent_at
// (irreversible; consumers deduplicate by msg id). Published while the row
// is locked: if the stamp is then lost, the row is re-sent under the same
// msg id, never a different one.
func (h *Handlers) republish(ctx context.Context, a recon.Action) error {
	scope, id := a.Target["scope"], a.Target["id"]
	return h.write(ctx, a, func(ctx context.Context, tx pgx.Tx) error {
		o, err := outboxRow(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		switch {
		case o == nil || o.MsgID != a.Before["msg_id"]:
			return moved(a, "Before", nil)
		case o.SentAt != nil:
			return nil // published meanwhile
		case h.Publish == nil:
			return errors.New("reconstore: republish: no publisher: this manager has no NATS connection to send the row through")
		}
		// A dry run publishes nothing but runs the stamp (rolled back), so
		// everything the apply would meet in SQL is met here.
		if !h.DryRun {
			if err := h.Publish(ctx, o.n); err != nil {
				return fmt.Errorf("reconstore: publish %s: %w", o.MsgID, err)
			}
		}
		if err := store.OutboxMarkSent(ctx, tx, o.ID); err != nil {
			return fmt.Errorf("reconstore: stamp %s sent: %w", o.MsgID, err)
		}
		return nil
	})
}

// collapse deletes an unsent duplicate copy when the kept row still exists
// (irreversible). Already gone → no-op.
func (h *Handlers) collapse(ctx context.Context, a recon.Action) error {
	scope, id := a.Target["scope"], a.Target["id"]
	return h.write(ctx, a, func(ctx context.Context, tx pgx.Tx) error {
		o, err := outboxRow(ctx, tx, scope, id)
		if err != nil || o == nil {
			return err
		}
		if o.MsgID != a.Before["msg_id"] || o.SentAt != nil {
			return moved(a, "an unsent Before", nil)
		}
		keep, err := outboxRow(ctx, tx, scope, a.After["collapse_into_id"])
		if err != nil {
			return err
		}
		if keep == nil {
			return fmt.Errorf("%w: %s: the kept row %s is gone", ErrRecordMoved, a.ID, a.After["collapse_into_id"])
		}
		return store.OutboxDeleteUnsent(ctx, tx, o.ID)
	})
}
