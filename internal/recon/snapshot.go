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

package recon

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// SnapshotProvider reads one scope: both sides, in one call. A provider that
// cannot read everything returns an error, never a partial snapshot: the
// workflow then answers snapshot_unavailable and produces NO report, because a
// partial read that looks clean is worse than none. (A source read that is
// known to be partial but still useful is returned with Source.Complete false,
// which every source-dependent repair refuses.)
//
// A provider that can stream implements HistoryProvider too: the workflow
// then detects over the history without materialising it (Read is for
// tests and small scopes).
type SnapshotProvider interface {
	Read(ctx context.Context, scope string) (*Snapshot, error)
}

// ProviderFunc adapts a function to SnapshotProvider.
type ProviderFunc func(ctx context.Context, scope string) (*Snapshot, error)

// Read calls f.
func (f ProviderFunc) Read(ctx context.Context, scope string) (*Snapshot, error) {
	return f(ctx, scope)
}

// Snapshot is one read of a scope. Detection and planning are pure functions
// of it: they never assign into it (TestPurity_DetectAndPlanNeverMutate).
// Streamed (HistoryProvider), it carries the small tables only and its
// history slices stay empty: the History is the history.
// Now and StaleAfter are injected (the workflow stamps its clock): every age
// check uses them, so the same snapshot always yields the same report.
type Snapshot struct {
	Scope      string
	Now        time.Time
	StaleAfter time.Duration
	// MaxFindings bounds the findings a report lists (0: DefaultMaxFindings);
	// injected like Now (Workflow.MaxFindings). See Report.Unlisted.
	MaxFindings int

	SQL    SQLSide
	Source SourceSide

	// Scopes summarises every scope's cursor of the database (this one
	// included), so a cause can be correlated across scopes: every scope stale
	// at once is a worker outage (manager_not_running), not one stuck scope.
	Scopes []ScopeCursor

	// Publisher is what the manager knows of its outbox publisher (the NATS
	// connection), nil when unknown: publisher_not_draining is then inferred
	// from the outbox alone.
	Publisher *PublisherStatus
}

// SQLSide is the cache: the trade-processor's tables and recovery's own, for
// the scope only (Scopes carries the cross-scope summary).
type SQLSide struct {
	Trades      []TradeRow
	Orders      []OrderRow // orders: the current version per order id
	OrderEvents []OrderRow // order_events: every retained version
	Positions   []PositionRow
	Basis       []BasisRow
	Cursor      *CursorRow // nil: no cursor yet (genesis)
	Lease       *LeaseRow  // nil: never leased
	Runs        []ProjectionRun
	Outbox      []OutboxRow
}

// SourceSide is the ledger: the verified events of the scope from genesis
// through the boundary B, decoded. Complete says the read covered every event
// through B with the chain verified from genesis; false means some events may
// be missing, so nothing may be concluded from an absence.
type SourceSide struct {
	Complete         bool
	IncompleteReason string // why Complete is false (evidence for the report)

	DescriptorHash  string
	ProtocolVersion int
	Boundary        int64  // B: the applied consensus sequence the read stopped at
	Digest          string // the chain digest through B
	EventCount      int64  // events with seq <= B

	Trades   []wire.Trade
	Orders   []wire.Order
	Openings []wire.Opening

	// Chain holds the digest and event count at sequences the provider was
	// asked about while replaying (the cursor's verified-through seq, a run's
	// explicit-recovery checkpoint). A seq absent here is not checkable.
	Chain []ChainPoint
}

// ChainPoint is the source chain at one sequence.
type ChainPoint struct {
	Seq        int64
	Digest     string
	EventCount int64
}

// Empty reports whether the source side holds no event at all.
func (s *SourceSide) Empty() bool {
	return len(s.Trades) == 0 && len(s.Orders) == 0 && len(s.Openings) == 0
}

// TradeRow is a trades row. Seq NullSeq is unknown legacy history.
type TradeRow struct {
	TradeID       string
	TradeSeq      int64
	Seq           RowSeq
	Instrument    string
	Price         decimal.Decimal
	Quantity      decimal.Decimal
	BuyOrderID    string
	SellOrderID   string
	BuyAccount    string
	SellAccount   string
	TS            time.Time // microseconds
	BookingStatus string    // BOOKED / REJECTED / ...
	WrittenBy     string    // live / recovery
}

// OrderRow is an orders or order_events row. Seq NullSeq is unknown legacy
// history.
type OrderRow struct {
	OrderID    string
	Version    int64
	Seq        RowSeq
	Account    string
	Instrument string
	Side       string
	Price      decimal.Decimal
	Quantity   decimal.Decimal
	Remaining  decimal.Decimal
	Status     string
	TS         time.Time
}

// RowSeq is a trade or order row's consensus seq, NullSeq for SQL NULL
// (unknown legacy history). A value, not a *int64: the snapshot holds one
// per trade, order and order version (over a million rows at 1M events),
// and a pointer costs its 8 bytes plus an 8-byte allocation per row, alive
// for the whole read and detection. The type differs from int64 on
// purpose: a comparison with a seq does not compile without going through
// Get or Valid, so no check can mistake NULL for a very old seq.
type RowSeq int64

// NullSeq is SQL NULL. It is math.MinInt64, which no consensus seq can be:
// a stored seq with that value is refused when read (RowSeq.Scan,
// SeqFromSQL), never taken for NULL.
const NullSeq RowSeq = math.MinInt64

// Seq is the RowSeq of a known seq.
func Seq(v int64) RowSeq { return RowSeq(v) }

// Valid: the row carries a consensus seq.
func (s RowSeq) Valid() bool { return s != NullSeq }

// Get returns the seq and whether the row carries one.
func (s RowSeq) Get() (int64, bool) { return int64(s), s != NullSeq }

// String is the seq in decimal, "" for NULL (as Fields render it).
func (s RowSeq) String() string {
	if !s.Valid() {
		return ""
	}
	return itoa(int64(s))
}

// SeqFromSQL converts a scanned bigint (valid false: NULL). The one value
// that collides with NullSeq is refused: reading it as NULL would turn a
// corrupt row into legacy history.
func SeqFromSQL(v int64, valid bool) (RowSeq, error) {
	switch {
	case !valid:
		return NullSeq, nil
	case RowSeq(v) == NullSeq:
		return NullSeq, fmt.Errorf("recon: seq %d is not a consensus seq", v)
	}
	return RowSeq(v), nil
}

// Scan implements database/sql.Scanner (NULL or an int64), so a RowSeq can
// be scanned directly; the provider scans a value type instead to allocate
// nothing per row.
func (s *RowSeq) Scan(src any) error {
	var err error
	switch v := src.(type) {
	case nil:
		*s = NullSeq
	case int64:
		*s, err = SeqFromSQL(v, true)
	default:
		err = fmt.Errorf("recon: cannot scan %T into a seq", src)
	}
	return err
}

// PositionRow is a positions row with its stored opening.
type PositionRow struct {
	Account         string
	Instrument      string
	OpeningQuantity decimal.Decimal
	OpeningAvgCost  decimal.Decimal
	OpeningProven   bool
	OpeningSeq      *int64
	Quantity        decimal.Decimal
	AvgCost         decimal.Decimal
	UpdatedAt       time.Time
}

// BasisRow is a projection_catchup_basis row: the key's fold through BasisSeq.
type BasisRow struct {
	Account    string
	Instrument string
	BasisSeq   int64
	Quantity   decimal.Decimal
	AvgCost    decimal.Decimal
}

// Cursor states (FR-APR05/11), as stored.
const (
	StateCatchingUp = "CATCHING_UP"
	StateCurrent    = "CURRENT"
	StateRetrying   = "RETRYING"
	StateBlocked    = "BLOCKED"
)

// CursorRow is the scope's projection_catchup_cursor row.
type CursorRow struct {
	DescriptorHash          string
	ProtocolVersion         int
	VerifiedThroughSeq      int64
	ChainDigest             string
	EventCount              int64
	LastObservedBoundarySeq int64
	State                   string
	BlockedReason           string
	LastVerifiedAt          *time.Time
	UpdatedAt               time.Time
}

// ScopeCursor is one scope's cursor in the cross-scope summary.
type ScopeCursor struct {
	Scope              string
	State              string
	BlockedReason      string
	VerifiedThroughSeq int64
	UpdatedAt          time.Time
}

// LeaseRow is the scope's projection_catchup_lease row.
type LeaseRow struct {
	Owner      string
	Fence      int64
	ExpiresAt  time.Time
	AcquiredAt time.Time
	RenewedAt  time.Time
}

// Run phases of projection_runs.
const (
	PhasePending   = "PENDING"
	PhaseActive    = "ACTIVE"
	PhaseDraining  = "DRAINING"
	PhaseSealed    = "SEALED"
	PhaseAbandoned = "ABANDONED"
)

// ProjectionRun is a projection_runs row of the scope (the trade-processor's:
// read, never written, by recovery and reconciliation alike).
type ProjectionRun struct {
	RunID           int64
	Epoch           int
	Managed         bool
	Selected        bool
	Phase           string
	DescriptorHash  string
	ProtocolVersion int
	FrozenSeq       *int64
	CheckpointSeq   int64

	RecoveryCheckpointSeq             *int64
	RecoveryCheckpointDigest          string
	RecoveryCheckpointDescriptorHash  string
	RecoveryCheckpointProtocolVersion int
}

// Eligible mirrors the store's rule: managed, epoch-v1, selected, ACTIVE, or
// DRAINING with a frozen seq.
func (r *ProjectionRun) Eligible() bool {
	if !r.Managed || r.Epoch != 1 || !r.Selected {
		return false
	}
	return r.Phase == PhaseActive || (r.Phase == PhaseDraining && r.FrozenSeq != nil)
}

// OutboxRow is a projection_catchup_outbox row. SentAt nil is unsent.
type OutboxRow struct {
	ID         int64
	MsgID      string
	Account    string
	Instrument string
	Quantity   decimal.Decimal
	AvgCost    decimal.Decimal
	CursorSeq  int64
	CreatedAt  time.Time
	SentAt     *time.Time
}

// PublisherStatus is the outbox publisher as the manager sees it.
type PublisherStatus struct {
	Connected bool // the NATS connection is up
	// Missing, when set, says why this manager has no NATS connection at
	// all. republish is then refused at planning with it (nothing here could
	// send the row, and a plan whose rehearsal must fail would never be
	// approvable), and whether the outbox drains is inferred from its rows
	// as without a status: another manager may be draining it.
	Missing string
}
