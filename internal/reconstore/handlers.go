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

// Package reconstore is the PostgreSQL-backed half of reconciliation: the
// repair handlers (handlers*.go) that internal/recon's Workflow calls.
package reconstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/notify"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// ErrRecordMoved: the record is neither Before (Apply) / After (Revert) nor
// already at the target state: another writer moved it after the dry run.
// Nothing was written; re-run the dry run.
var ErrRecordMoved = errors.New("reconstore: record moved since the dry run")

// Handlers writes repairs of one database. Every write runs inside
// store.WithScopeWrite (the projection write lock, then the scope's fenced
// lease FOR UPDATE), so a repair never races the recovery worker's pages or
// the live projector, and a manager that lost the scope can never commit one.
type Handlers struct {
	// Store connects as projection_reconciliation (docs/database-role.md):
	// quarantine_trade, drop_position and several reverts delete projection
	// rows, which the recovery worker's role projection_recovery may not.
	Store *store.Store
	// Lease returns the lease of scope the repair writes under (the caller
	// acquires it; a lost lease refuses with LEASE_LOST, nothing written).
	Lease func(ctx context.Context, scope string) (store.Lease, error)
	// TriggerCycle asks the controller to run one recovery cycle of scope
	// (trigger_cycle). nil: trigger_cycle fails.
	TriggerCycle func(ctx context.Context, scope string) error
	// Publish sends one outbox row as the outbox publisher would (the same
	// notify.Message: its msg id as Nats-Msg-Id) and returns once NATS has
	// it (republish). nil: republish fails.
	Publish func(ctx context.Context, n notify.Notification) error
	// DryRun runs every handler in a transaction that is rolled back
	// (store.DryRunScopeWrite): a plan that would fail is known before
	// approval, and nothing is written. Hooks (TriggerCycle, Publish,
	// Withdrawn, the store's after-commit kick) are not called in a dry run.
	DryRun bool
	// Withdrawn is told, after the commit, that a revert withdrew the
	// scope's completeness certificate (store.WithdrawTx): the cursor was
	// verified through `through` and is back at genesis. nil: not told.
	Withdrawn func(scope string, through int64)
	// Journal and Audit write a step's records (recon.StepRecords) in the
	// step's own transaction (recordTx). nil: the workflow writes them
	// after the handler returns.
	Journal *Journal
	Audit   *Auditor
}

// Registry returns one handler per action kind with a real write.
func (h *Handlers) Registry() recon.Handlers {
	return recon.Handlers{
		recon.ActionQuarantineTrade:     recon.HandlerFuncs{ApplyFunc: h.quarantineTrade, RevertFunc: h.unquarantineTrade},
		recon.ActionRestoreTrade:        recon.HandlerFuncs{ApplyFunc: h.restoreTrade, RevertFunc: h.unrestoreTrade},
		recon.ActionRewriteOrderVersion: recon.HandlerFuncs{ApplyFunc: h.rewriteOrder, RevertFunc: h.unrewriteOrder},
		recon.ActionAdoptSourceOpening:  recon.HandlerFuncs{ApplyFunc: h.writePosition, RevertFunc: h.revertPosition},
		recon.ActionRederivePosition:    recon.HandlerFuncs{ApplyFunc: h.writePosition, RevertFunc: h.revertPosition},
		recon.ActionDropPosition:        recon.HandlerFuncs{ApplyFunc: h.dropPosition, RevertFunc: h.undropPosition},
		recon.ActionReleaseLease:        recon.HandlerFuncs{ApplyFunc: h.releaseLease},
		recon.ActionTriggerCycle:        recon.HandlerFuncs{ApplyFunc: h.triggerCycle, RevertFunc: func(context.Context, recon.Action) error { return nil }},
		recon.ActionRepublish:           recon.HandlerFuncs{ApplyFunc: h.republish},
		recon.ActionCollapse:            recon.HandlerFuncs{ApplyFunc: h.collapse},
	}
}

// write runs fn as one fenced repair transaction of the action's scope,
// followed, in the same transaction, by the step's records (recordTx).
func (h *Handlers) write(ctx context.Context, a recon.Action, fn func(ctx context.Context, tx pgx.Tx) error) error {
	scope := a.Target["scope"]
	if scope == "" {
		return fmt.Errorf("reconstore: action %s has no scope in its target", a.ID)
	}
	if h.Lease == nil {
		return errors.New("reconstore: no lease source")
	}
	l, err := h.Lease(ctx, scope)
	if err != nil {
		return fmt.Errorf("reconstore: lease of %q for %s: %w", scope, a.ID, err)
	}
	rec := h.stepRecords(ctx)
	body := fn
	if rec != nil {
		body = func(ctx context.Context, tx pgx.Tx) error {
			if err := fn(ctx, tx); err != nil {
				return err
			}
			return h.recordTx(ctx, tx, rec)
		}
	}
	if h.DryRun {
		err = h.Store.DryRunScopeWrite(ctx, l, body)
	} else {
		err = h.Store.WithScopeWrite(ctx, l, body)
	}
	if err != nil {
		return fmt.Errorf("reconstore: %s: %w", a.ID, err)
	}
	if rec != nil {
		rec.MarkWritten()
	}
	return nil
}

// stepRecords are the records this handler call must commit with its write
// (nil: none to write here: outside a step, in a dry run, without a journal
// and auditor, or written by an earlier transaction of the same call).
func (h *Handlers) stepRecords(ctx context.Context) *recon.StepRecords {
	rec := recon.StepRecordsFrom(ctx)
	if rec == nil || rec.Written() || h.DryRun || h.Journal == nil || h.Audit == nil {
		return nil
	}
	return rec
}

// recordTx writes the step's journal entry and audit record in the write's
// transaction, after its statements and before COMMIT (FR-APR08's fenced
// write): the write and the records of it commit together or not at all.
// Without it a crash between a committed write and its separate INSERTs
// left a repair that neither the journal nor the audit trail holds, which
// no rollback could find, and an audit INSERT that failed was only logged.
// Also written when the handler found its After in place and wrote nothing:
// the step happened in this run, and its records are this run's only ones.
func (h *Handlers) recordTx(ctx context.Context, tx pgx.Tx, rec *recon.StepRecords) error {
	if err := h.Journal.insert(ctx, tx, rec.Entry); err != nil {
		return err
	}
	return h.Audit.insert(ctx, tx, rec.Audit)
}

// moved is the refusal of a compare: what was found instead.
func moved(a recon.Action, want string, got recon.Fields) error {
	return fmt.Errorf("%w: %s: want %s, found %v", ErrRecordMoved, a.ID, want, got)
}

// transition is the one shape of every reversible repair, apply and revert
// alike: a compare-and-write of one record inside the fenced write (see
// compareAndWrite). Each handler keeps its own read and write statements;
// only the decision is shared.
type transition struct {
	// read re-reads the record in the write's transaction (nil: absent).
	read func(ctx context.Context, tx pgx.Tx) (recon.Fields, error)
	// done: the record is at the goal already, so nothing is written. Tested
	// first: without it a repeated apply or revert (a crash between the
	// write and the journal) would refuse its own earlier write as moved.
	done func(cur recon.Fields) bool
	// from: the record is in the state the write starts from (Before for an
	// apply, After for a revert). Anything else is refused with moved(want,
	// cur) and nothing is written: another writer moved the record after the
	// dry run, and writing over it would destroy that writer's row.
	from func(cur recon.Fields) bool
	want string
	// write moves the record from `from` to the goal.
	write func(ctx context.Context, tx pgx.Tx) error
	// revert: the write puts back what an apply had repaired, and
	// reinstated holds the consensus sequences of what it puts back (a nil
	// entry: positioned nowhere, or a position row, whose correctness is
	// the fold of its key's whole history). When they lie in the verified
	// window, a rollback's revert (recon.IsRollback) withdraws the scope's
	// certificate in its own transaction (store.WithdrawTx): what it puts
	// back is what the source contradicts, and the worker never re-reads a
	// window behind its cursor, so without this a rollback would leave the
	// scope CURRENT over a window that is no longer what was verified. An
	// apply never withdraws (it only moves a record towards the source), nor
	// does a failed apply's automatic rollback: that run ends where it
	// began, under one session, before any page could verify the repaired
	// state.
	revert     bool
	reinstated []*int64
}

// anywhere is the reinstated of a record whose correctness does not sit at
// one consensus sequence (a position row).
var anywhere = []*int64{nil}

// compareAndWrite runs t as one fenced repair transaction of the action's
// scope: read, then at the goal → nil, not at from → ErrRecordMoved, else
// write. The read runs under the projection write lock, so the record
// cannot move between the compare and the write.
func (h *Handlers) compareAndWrite(ctx context.Context, a recon.Action, t transition) error {
	var withdrew int64
	err := h.write(ctx, a, func(ctx context.Context, tx pgx.Tx) error {
		cur, err := t.read(ctx, tx)
		if err != nil {
			return err
		}
		if write, err := t.next(a, cur); !write || err != nil {
			return err
		}
		if err := t.write(ctx, tx); err != nil || !t.revert || !recon.IsRollback(ctx) {
			return err
		}
		withdrew, err = store.WithdrawTx(ctx, tx, a.Target["scope"], t.reinstated...)
		return err
	})
	if err == nil && withdrew > 0 && !h.DryRun && h.Withdrawn != nil {
		h.Withdrawn(a.Target["scope"], withdrew)
	}
	return err
}

// next decides the transition from the record found: at the goal → no
// write; not at from → the ErrRecordMoved refusal; else write.
func (t transition) next(a recon.Action, cur recon.Fields) (write bool, err error) {
	switch {
	case t.done(cur):
		return false, nil
	case !t.from(cur):
		return false, moved(a, t.want, cur)
	}
	return true, nil
}

// is matches a record equal to f (nil: an absent record).
func is(f recon.Fields) func(recon.Fields) bool {
	return func(cur recon.Fields) bool { return cur.Equal(f) }
}

// The Fields spellings of recon (finding.go): decimals canonical, timestamps
// RFC 3339 with nanoseconds in UTC, absent optional values "".

func fieldTS(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func fieldSeq(p *int64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatInt(*p, 10)
}

// seqArg is a Fields seq as a nullable bigint argument.
func seqArg(s string) (*int64, error) {
	if s == "" {
		return nil, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("reconstore: seq %q: %w", s, err)
	}
	return &v, nil
}

// seqTSArgs are the seq and ts of a Fields record as statement arguments.
func seqTSArgs(f recon.Fields) (*int64, time.Time, error) {
	seq, err := seqArg(f["seq"])
	if err != nil {
		return nil, time.Time{}, err
	}
	ts, err := tsArg(f["ts"])
	return seq, ts, err
}

func tsArg(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("reconstore: ts %q: %w", s, err)
	}
	return t, nil
}
