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
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/position"
)

// RepairMsgIDPrefix starts the msg id of every notification a
// reconciliation repair writes; a page's start with "position/" (msgIDSQL).
// Detection tells the two apart by it (recon.RepairMsgIDPrefix, the same
// string): a repair's notification shares its key and cursor seq with the
// page notification it corrects, and is not a copy of it.
const RepairMsgIDPrefix = "repair/"

// RepairNotice is one key a reconciliation repair may have moved.
type RepairNotice struct {
	Scope, Account, Instrument string
	// Run is the repair run's correlation id and Step what moved the key in
	// it (the action kind, then apply or revert). Within one run each step
	// moves a key at most once, so with the key and the new value they make
	// the msg id unique and deterministic.
	Run, Step string
	// Before is the key's position before the repair's write (nil: no row).
	Before *position.State
}

// AfterCommit runs the hook of SetAfterCommit for scope (nothing without
// one): a writer outside the page path that committed notifications (a
// reconciliation repair) calls it, so they are published now rather than at
// the publisher's next poll. Never call it for a transaction that did not
// commit.
func (s *Store) AfterCommit(scope string) {
	if s.afterCommit != nil {
		s.afterCommit(scope)
	}
}

// NotifyRepairTx writes, in the repair's own transaction, the notification
// of a key whose position the repair changed (R2 of FR-APR06 for repairs):
// when the key's row, read back as written, differs from n.Before, one
// outbox row carries its quantity and average cost (0 and 0 without a row),
// at the cursor's verified seq. It reports whether it wrote one; the caller
// kicks the publisher after the commit (AfterCommit). Committing with the
// write means a changed balance is never left unannounced by a crash. The
// msg id (RepairMsgIDPrefix, key, n.Run, n.Step, value) is never a page's or
// another repair's; one already present (a key moved twice in one step)
// refuses. docs/design/page-transaction.md, "Repairs write like a page".
func NotifyRepairTx(ctx context.Context, tx pgx.Tx, n RepairNotice) (bool, error) {
	var q, avg *string
	var cursor int64
	err := tx.QueryRow(ctx, repairedPositionSQL, n.Scope, n.Account, n.Instrument).Scan(&q, &avg, &cursor)
	if err != nil {
		return false, dbErr(fmt.Sprintf("store: read repaired position %s/%s", n.Account, n.Instrument), err)
	}
	// qty and cost keep the row's numeric text (its scale) for the outbox
	// row, as a page's does; the msg id spells canonical decimals.
	qty, cost, value := "0", "0", "0@0"
	var now *position.State
	if q != nil && avg != nil {
		qty, cost = *q, *avg
		s, err := stateOfText(qty, cost)
		if err != nil {
			return false, err
		}
		now, value = &s, s.Quantity.String()+"@"+s.AvgCost.String()
	}
	if sameState(n.Before, now) {
		return false, nil
	}
	msgID := RepairMsgIDPrefix + lengthPrefixed(n.Scope) + "/" + lengthPrefixed(n.Account) + "/" + lengthPrefixed(n.Instrument) + "/" +
		lengthPrefixed(n.Run) + "/" + lengthPrefixed(n.Step) + "/" + value
	inserted, err := outboxInsertRepair(ctx, tx, msgID, n.Scope, n.Account, n.Instrument, qty, cost, cursor)
	if err != nil {
		return false, dbErr(fmt.Sprintf("store: outbox of repaired position %s/%s", n.Account, n.Instrument), err)
	}
	if !inserted {
		return false, fmt.Errorf("store: the notification %s exists already: run %q moved %s/%s twice in step %s", msgID, n.Run, n.Account, n.Instrument, n.Step)
	}
	return true, nil
}

// lengthPrefixed is s as msgIDSQL spells a name: its length in characters,
// a colon, then s, so that a '/' inside one name cannot collide.
func lengthPrefixed(s string) string { return strconv.Itoa(utf8.RuneCountInString(s)) + ":" + s }

func stateOfText(q, a string) (position.State, error) {
	dq, err := decimal.NewFromString(q)
	if err != nil {
		return position.State{}, fmt.Errorf("store: quantity %q: %w", q, err)
	}
	da, err := decimal.NewFromString(a)
	if err != nil {
		return position.State{}, fmt.Errorf("store: avg_cost %q: %w", a, err)
	}
	return position.State{Quantity: dq, AvgCost: da}, nil
}

// sameState: both absent, or both present with equal values (numeric
// equality: a scale alone is no change).
func sameState(a, b *position.State) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}
