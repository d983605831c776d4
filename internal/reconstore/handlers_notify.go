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

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/position"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

type runKey struct{}

// withRun marks ctx as the handler calls of one repair run (the session's
// correlation id; a rehearsal's run id): the msg id of every notification a
// position repair writes names it (store.RepairNotice.Run).
func withRun(ctx context.Context, run string) context.Context {
	return context.WithValue(ctx, runKey{}, run)
}

func runOf(ctx context.Context) string {
	r, _ := ctx.Value(runKey{}).(string)
	return r
}

// announce is the notification of one position repair (FR-APR06 R2: a
// changed position reaches consumers): pre captures the key's position as
// the transition's read found it, write then writes the outbox row in the
// same transaction, and kick publishes after the commit. Consumers hold the
// pre-repair balance until told; the next page changes nothing of the key
// (it already holds what the source derives), so without this they would
// keep it for good, and a rollback's restored balance likewise.
type announce struct {
	h    *Handlers
	a    recon.Action
	step string // apply or revert
	pre  *position.State
	sent bool // an outbox row was written (rolled back with the write on error)
}

func (h *Handlers) announcer(a recon.Action, step string) *announce {
	return &announce{h: h, a: a, step: step}
}

// read wraps a transition's read: it records the key's position found.
func (n *announce) read(r func(context.Context, pgx.Tx) (recon.Fields, error)) func(context.Context, pgx.Tx) (recon.Fields, error) {
	return func(ctx context.Context, tx pgx.Tx) (recon.Fields, error) {
		cur, err := r(ctx, tx)
		if err != nil {
			return nil, err
		}
		n.pre = nil
		if cur != nil && cur["row"] != "absent" {
			s, err := stateOf(cur["quantity"], cur["avg_cost"])
			if err != nil {
				return nil, err
			}
			n.pre = &s
		}
		return cur, nil
	}
}

// write wraps a transition's write: after it, the key's notification when
// the position changed (store.NotifyRepairTx). A handler outside a run has
// no msg id to give it and writes nothing (Handlers.write names the action
// in every error).
func (n *announce) write(w func(context.Context, pgx.Tx) error) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		run := runOf(ctx)
		if run == "" {
			return errors.New("no repair run: a position repair is announced under its run's id")
		}
		if err := w(ctx, tx); err != nil {
			return err
		}
		scope, acct, instr := keyOf(n.a)
		sent, err := store.NotifyRepairTx(ctx, tx, store.RepairNotice{Scope: scope, Account: acct, Instrument: instr,
			Run: run, Step: string(n.a.Kind) + "." + n.step, Before: n.pre})
		if err != nil {
			return err
		}
		n.sent = sent
		return nil
	}
}

// kick publishes the committed notification now: err is the transition's,
// and nil means its transaction committed (a dry run's never does).
func (n *announce) kick(err error) error {
	if err == nil && n.sent && !n.h.DryRun {
		n.h.Store.AfterCommit(n.a.Target["scope"])
	}
	return err
}
