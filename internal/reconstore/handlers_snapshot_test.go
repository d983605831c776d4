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
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

// The handler tests take their actions from the REAL planner (recon.Detect
// and recon.PlanRepairs over a snapshot of the test database and its
// ledger), never from hand-written Fields: a handler whose reading of a row
// spelled a field differently from the planner's Before would then refuse
// every real plan, and a test that built Before with the handler's own
// reader could not see it. readSnapshot is a test reader (the production
// provider lives in provider*.go, another change); it reads as the admin.

// readSnapshot reads scope's SQL side and takes the source side from src
// (complete: every event through its boundary).
func readSnapshot(t *testing.T, admin *pgxpool.Pool, scope string, src *storetest.Ledger, now time.Time) *recon.Snapshot {
	t.Helper()
	s := &recon.Snapshot{Scope: scope, Now: now, StaleAfter: time.Minute, Publisher: &recon.PublisherStatus{Connected: true}}
	q := func(sql string, scan func(pgx.Rows) error) {
		t.Helper()
		rows, err := admin.Query(ctxb, sql, scope)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	q(`SELECT trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts, booking_status, written_by
  FROM trades WHERE scope = $1 ORDER BY seq NULLS FIRST, trade_seq, trade_id`, func(r pgx.Rows) error {
		var x recon.TradeRow
		err := r.Scan(&x.TradeID, &x.TradeSeq, &x.Seq, &x.Instrument, &x.Price, &x.Quantity, &x.BuyOrderID, &x.SellOrderID,
			&x.BuyAccount, &x.SellAccount, &x.TS, &x.BookingStatus, &x.WrittenBy)
		s.SQL.Trades = append(s.SQL.Trades, x)
		return err
	})
	for _, tbl := range []string{"orders", "order_events"} {
		q(`SELECT order_id, version, seq, account, instrument, side, price, quantity, remaining, status, ts FROM `+tbl+
			` WHERE scope = $1 ORDER BY order_id, version`, func(r pgx.Rows) error {
			var x recon.OrderRow
			err := r.Scan(&x.OrderID, &x.Version, &x.Seq, &x.Account, &x.Instrument, &x.Side, &x.Price, &x.Quantity, &x.Remaining, &x.Status, &x.TS)
			if tbl == "orders" {
				s.SQL.Orders = append(s.SQL.Orders, x)
			} else {
				s.SQL.OrderEvents = append(s.SQL.OrderEvents, x)
			}
			return err
		})
	}
	q(`SELECT account, instrument, opening_quantity, opening_avg_cost, opening_proven, opening_seq, quantity, avg_cost, updated_at
  FROM positions WHERE scope = $1 ORDER BY account, instrument`, func(r pgx.Rows) error {
		var x recon.PositionRow
		err := r.Scan(&x.Account, &x.Instrument, &x.OpeningQuantity, &x.OpeningAvgCost, &x.OpeningProven, &x.OpeningSeq, &x.Quantity, &x.AvgCost, &x.UpdatedAt)
		s.SQL.Positions = append(s.SQL.Positions, x)
		return err
	})
	q(`SELECT account, instrument, basis_seq, quantity, avg_cost FROM projection_catchup_basis WHERE scope = $1 ORDER BY account, instrument`, func(r pgx.Rows) error {
		var x recon.BasisRow
		err := r.Scan(&x.Account, &x.Instrument, &x.BasisSeq, &x.Quantity, &x.AvgCost)
		s.SQL.Basis = append(s.SQL.Basis, x)
		return err
	})
	q(`SELECT coalesce(descriptor_hash, ''), coalesce(protocol_version, 0), verified_through_seq, chain_digest, event_count,
       last_observed_boundary_seq, state, coalesce(blocked_reason, ''), last_verified_at, updated_at
  FROM projection_catchup_cursor WHERE scope = $1`, func(r pgx.Rows) error {
		var x recon.CursorRow
		err := r.Scan(&x.DescriptorHash, &x.ProtocolVersion, &x.VerifiedThroughSeq, &x.ChainDigest, &x.EventCount,
			&x.LastObservedBoundarySeq, &x.State, &x.BlockedReason, &x.LastVerifiedAt, &x.UpdatedAt)
		s.SQL.Cursor = &x
		s.Scopes = append(s.Scopes, recon.ScopeCursor{Scope: scope, State: x.State, BlockedReason: x.BlockedReason,
			VerifiedThroughSeq: x.VerifiedThroughSeq, UpdatedAt: x.UpdatedAt})
		return err
	})
	q(`SELECT owner, fence, expires_at, acquired_at, renewed_at FROM projection_catchup_lease WHERE scope = $1`, func(r pgx.Rows) error {
		var x recon.LeaseRow
		err := r.Scan(&x.Owner, &x.Fence, &x.ExpiresAt, &x.AcquiredAt, &x.RenewedAt)
		s.SQL.Lease = &x
		return err
	})
	q(`SELECT run_id, epoch, managed, selected, phase, descriptor_hash, protocol_version, frozen_seq, checkpoint_seq,
       recovery_checkpoint_seq, coalesce(recovery_checkpoint_digest, ''), coalesce(recovery_checkpoint_descriptor_hash, ''),
       coalesce(recovery_checkpoint_protocol_version, 0)
  FROM projection_runs WHERE scope = $1 ORDER BY run_id`, func(r pgx.Rows) error {
		var x recon.ProjectionRun
		err := r.Scan(&x.RunID, &x.Epoch, &x.Managed, &x.Selected, &x.Phase, &x.DescriptorHash, &x.ProtocolVersion, &x.FrozenSeq,
			&x.CheckpointSeq, &x.RecoveryCheckpointSeq, &x.RecoveryCheckpointDigest, &x.RecoveryCheckpointDescriptorHash,
			&x.RecoveryCheckpointProtocolVersion)
		s.SQL.Runs = append(s.SQL.Runs, x)
		return err
	})
	q(`SELECT id, msg_id, account, instrument, quantity, avg_cost, cursor_seq, created_at, sent_at
  FROM projection_catchup_outbox WHERE scope = $1 ORDER BY id`, func(r pgx.Rows) error {
		var x recon.OutboxRow
		err := r.Scan(&x.ID, &x.MsgID, &x.Account, &x.Instrument, &x.Quantity, &x.AvgCost, &x.CursorSeq, &x.CreatedAt, &x.SentAt)
		s.SQL.Outbox = append(s.SQL.Outbox, x)
		return err
	})

	s.Source = recon.SourceSide{Complete: true, DescriptorHash: storetest.Descriptor, ProtocolVersion: 1,
		Boundary: src.Boundary, Digest: src.DigestThrough(src.Boundary)}
	for _, e := range src.Decoded {
		if e.Seq() > src.Boundary {
			continue
		}
		s.Source.EventCount++
		switch {
		case e.Trade != nil:
			s.Source.Trades = append(s.Source.Trades, *e.Trade)
		case e.Order != nil:
			s.Source.Orders = append(s.Source.Orders, *e.Order)
		case e.Opening != nil:
			s.Source.Openings = append(s.Source.Openings, *e.Opening)
		}
	}
	if c := s.SQL.Cursor; c != nil {
		var n int64
		for _, e := range src.Decoded {
			if e.Seq() <= c.VerifiedThroughSeq {
				n++
			}
		}
		s.Source.Chain = []recon.ChainPoint{{Seq: c.VerifiedThroughSeq, Digest: src.DigestThrough(c.VerifiedThroughSeq), EventCount: n}}
	}
	return s
}

// planOf detects and plans over the snapshot.
func planOf(t *testing.T, s *recon.Snapshot) *recon.Plan {
	t.Helper()
	rep, err := recon.Detect(s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := recon.PlanRepairs(rep, s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// actionOf is the plan's one action of kind whose id contains key.
func actionOf(t *testing.T, p *recon.Plan, kind recon.ActionKind, key string) recon.Action {
	t.Helper()
	var out []recon.Action
	for _, a := range p.Actions {
		if a.Kind == kind && strings.Contains(a.ID, key) {
			out = append(out, a)
		}
	}
	if len(out) != 1 {
		t.Fatalf("want one %s action on %q, got %d in:\n%s", kind, key, len(out), recon.FormatPlan(p))
	}
	return out[0]
}
