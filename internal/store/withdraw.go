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

	"github.com/jackc/pgx/v5"
)

// Withdraws decides whether writing a record back into the projection
// withdraws the completeness certificate of a cursor verified through
// `verified` (FR-APR05: verified-through is the only completeness claim).
// positioned holds the consensus sequences the record occupies (a trade's
// or an order version's seq, before and after the write); a nil entry is a
// record positioned nowhere, or one whose correctness depends on the
// whole history (a position row, the fold of every retained trade of its
// key).
//
// The certificate is withdrawn when something was verified (verified > 0)
// and the record lies inside the verified window: a nil position, or any
// seq <= verified. A record wholly after the cursor is left to the page
// that will cover it, which verifies it like any other row (FR-APR06). The
// writes this is asked about are a reconciliation rollback's: it puts back,
// on purpose, what the source contradicts (an orphan trade, a trade the
// source has removed again, an order row or a position the source does not
// derive). Without the withdrawal the scope stays CURRENT over a window
// that is no longer what was verified: the recovery worker never re-reads
// a window behind its cursor, so the certificate would outlive the undo.
func Withdraws(verified int64, positioned []*int64) bool {
	if verified <= 0 {
		return false
	}
	for _, seq := range positioned {
		if seq == nil || *seq <= verified {
			return true
		}
	}
	return false
}

// WithdrawTx runs inside a scope write (WithScopeWrite: the projection
// write lock and the fenced lease row are held, so no page can commit
// between the caller's write and this): when Withdraws holds for the
// scope's cursor, the cursor goes back to genesis (verified-through 0, the
// genesis digest, no events, CATCHING_UP) in the caller's transaction, so
// the record and the withdrawal commit together or not at all. The next
// cycle then bootstraps (FR-APR07: a cursor at genesis re-verifies every
// retained row), and refuses the record again if the source still
// contradicts it. Descriptor and protocol stay: they are the scope's
// identity, not a completeness claim.
//
// A cursor at genesis (withdrawn now, or never advanced) keeps no bases:
// they are folds through a verified seq, the bootstrap page drops them
// anyway, and reconciliation reports a basis past its cursor as drift. So
// they are dropped here too, also when a later revert of the same rollback
// wrote one back.
//
// It returns the verified-through it withdrew (0: nothing withdrawn).
func WithdrawTx(ctx context.Context, tx pgx.Tx, scope string, positioned ...*int64) (int64, error) {
	verified, err := cursorVerifiedForUpdate(ctx, tx, scope)
	if err != nil {
		return 0, dbErr("store: read the cursor to withdraw", err)
	}
	withdraw := Withdraws(verified, positioned) // no cursor: verified is 0
	if withdraw {
		if err := cursorWithdraw(ctx, tx, scope); err != nil {
			return 0, dbErr("store: withdraw the cursor", err)
		}
	}
	if withdraw || verified == 0 {
		if err := basisDeleteScope(ctx, tx, scope); err != nil {
			return 0, dbErr("store: drop the bases of a cursor at genesis", err)
		}
	}
	if !withdraw {
		return 0, nil
	}
	return verified, nil
}
