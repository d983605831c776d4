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
// verified (FR-APR05): when something was verified and the record lies in
// the verified window. positioned holds the seqs the record occupies before
// and after the write; a nil entry is a record positioned nowhere or on the
// whole history (a position row), which always lies in it. Without the
// withdrawal a rollback that puts back what the source contradicts would
// leave the scope CURRENT over a window that is no longer what was verified
// (docs/design/page-transaction.md, "Withdrawing a certificate").
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

// WithdrawTx runs inside a scope write (WithScopeWrite: the write lock and
// the fenced lease are held, so no page commits in between): when Withdraws
// holds for the scope's cursor, the cursor goes back to genesis in the
// caller's transaction, so the record and the withdrawal commit together or
// not at all, and the next cycle re-verifies every retained row (FR-APR07).
// Descriptor and protocol, the scope's identity, stay. A cursor at genesis
// keeps no bases, so they are dropped too. It returns the verified-through
// it withdrew (0: nothing withdrawn).
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
