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
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/reference/enginetest"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

// TestWithdraws: only a record inside a verified window withdraws the
// certificate (FR-APR05: verified-through is the completeness claim).
func TestWithdraws(t *testing.T) {
	for _, tc := range []struct {
		name       string
		verified   int64
		positioned []*int64
		want       bool
	}{
		{"nothing verified yet", 0, []*int64{i64(5)}, false},
		{"nothing verified yet, a position row", 0, []*int64{nil}, false},
		{"inside the window", 100, []*int64{i64(40)}, true},
		{"at the cursor", 100, []*int64{i64(100)}, true},
		{"after the cursor: the page that covers it verifies it", 100, []*int64{i64(101)}, false},
		{"positioned nowhere, or a position row", 100, []*int64{nil}, true},
		{"either of two positions inside", 100, []*int64{i64(150), i64(90)}, true},
		{"both after", 100, []*int64{i64(150), i64(101)}, false},
		{"no position given: nothing reinstated", 100, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Withdraws(tc.verified, tc.positioned); got != tc.want {
				t.Fatalf("Withdraws(%d, %v) = %t, want %t", tc.verified, tc.positioned, got, tc.want)
			}
		})
	}
}

// TestWithdrawTx_ARecordPutBackIntoTheVerifiedWindow, on real PostgreSQL:
// a scope CURRENT through B. A write that reinstates a record after B
// leaves the cursor alone; one inside the window that is rolled back (a
// dry run, a failed revert) leaves it alone too; one inside that commits
// moves the cursor back to genesis in the same transaction (descriptor and
// protocol kept). The next catch-up then re-verifies every retained row:
// with the orphan trade the "revert" put back at a verified seq, it is
// refused (the orphan's keys, or its own page) before that seq: the
// certificate gave way to a refusal; without it, it reaches CURRENT again, equal to the
// independent replay. Without WithdrawTx the scope stays CURRENT through B
// with the orphan in its window, and nothing would ever read it again.
func TestWithdrawTx_ARecordPutBackIntoTheVerifiedWindow(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	run := addRun(t, s, "w1", PhaseActive, nil)
	src := enginetest.Ledger(t, 11, 400, 4)
	l := lease(t, s, "w1", "a")
	catchUp(t, s, l, run, src, 60)
	b := src.Boundary
	cursor := func() Cursor {
		t.Helper()
		c, err := s.ReadCursor(ctxb, "w1")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	before := cursor()
	withdraw := func(write func(*Store, context.Context, Lease, func(context.Context, pgx.Tx) error) error, seq *int64, fail bool) (int64, error) {
		var through int64
		err := write(s, ctxb, l, func(ctx context.Context, tx pgx.Tx) error {
			var err error
			through, err = WithdrawTx(ctx, tx, "w1", seq)
			if err == nil && fail {
				err = errors.New("the revert's next statement failed")
			}
			return err
		})
		return through, err
	}
	commit := (*Store).WithScopeWrite
	dry := (*Store).DryRunScopeWrite

	t.Run("after the cursor: untouched", func(t *testing.T) {
		if through, err := withdraw(commit, i64(b+1), false); err != nil || through != 0 {
			t.Fatalf("withdraw after B: %d %v", through, err)
		}
		if c := cursor(); c.VerifiedThroughSeq != b || c.State != StateCurrent {
			t.Fatalf("cursor %+v, want CURRENT through %d", c, b)
		}
	})
	t.Run("inside, rolled back: untouched", func(t *testing.T) {
		if through, err := withdraw(dry, i64(b/2), false); err != nil || through != b {
			t.Fatalf("dry withdraw: %d %v, want %d", through, err, b)
		}
		if _, err := withdraw(commit, i64(b/2), true); err == nil {
			t.Fatal("a failing write committed")
		}
		if c := cursor(); c.VerifiedThroughSeq != b || c.ChainDigest != before.ChainDigest || c.State != StateCurrent {
			t.Fatalf("cursor %+v after rolled-back withdrawals, want CURRENT through %d", c, b)
		}
	})

	// The "revert": the orphan trade goes back at a verified seq, and the
	// certificate is withdrawn in the same transaction.
	var orphanSeq int64
	if err := adminOf(t, s).QueryRow(ctxb, `SELECT seq FROM trades WHERE scope = 'w1' AND seq <= $1 ORDER BY seq DESC LIMIT 1`, b/2).Scan(&orphanSeq); err != nil {
		t.Fatal(err)
	}
	err := s.WithScopeWrite(ctxb, l, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id,
    buy_account, sell_account, ts, booking_status, written_by)
SELECT scope, 'orphan-w', 1000000, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts, 'BOOKED', 'live'
  FROM trades WHERE scope = 'w1' AND seq = $1 LIMIT 1`, orphanSeq); err != nil {
			return err
		}
		through, err := WithdrawTx(ctx, tx, "w1", &orphanSeq)
		if err == nil && through != b {
			t.Errorf("withdrew %d, want %d", through, b)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c := cursor()
	if c.VerifiedThroughSeq != 0 || c.ChainDigest != chain.Genesis || c.EventCount != 0 || c.State != StateCatchingUp ||
		c.BlockedReason != "" || c.DescriptorHash != before.DescriptorHash || c.ProtocolVersion != before.ProtocolVersion {
		t.Fatalf("cursor after the withdrawal %+v, want genesis, CATCHING_UP, descriptor and protocol kept", c)
	}

	// Re-verification from genesis refuses the orphan at its page.
	var refusal error
	for i := 0; i < 1000; i++ {
		c := cursor()
		res, err := s.ApplyPage(ctxb, l, run, src.Page(c.VerifiedThroughSeq, 60))
		if err != nil {
			refusal = err
			break
		}
		if res.Current() {
			t.Fatalf("re-verification certified the window of orphan trade seq %d again: %+v", orphanSeq, res)
		}
	}
	// The first page touching the orphan's keys refuses: their positions
	// do not hold it (UNEXPLAINED_BALANCE: R1 folds every retained trade),
	// else the orphan's own page (ORPHAN_TRADE).
	if c := codes.Of(refusal); c != codes.OrphanTrade && c != codes.UnexplainedBalance {
		t.Fatalf("re-verification: %v, want ORPHAN_TRADE or UNEXPLAINED_BALANCE", refusal)
	}
	if c := cursor(); c.VerifiedThroughSeq >= orphanSeq {
		t.Fatalf("verified through %d, past the orphan at %d", c.VerifiedThroughSeq, orphanSeq)
	}

	// The orphan quarantined again (by hand here): the re-verification
	// goes on to CURRENT, every key equal to the replay.
	mustExec(t, s, `DELETE FROM trades WHERE scope = 'w1' AND trade_id = 'orphan-w'`)
	res := catchUp(t, s, l, run, src, 60)
	if res.VerifiedThroughSeq != b || res.ChainDigest != before.ChainDigest || res.EventCount != before.EventCount {
		t.Fatalf("re-verified cursor %+v, want through %d digest %s count %d", res, b, before.ChainDigest, before.EventCount)
	}
	storetest.AssertPositions(t, s.pool, "w1", src.Decoded)
}
