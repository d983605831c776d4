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
// snapshot provider (provider*.go: one scope's SQL side in one read-only
// REPEATABLE READ transaction, the source side as verified pages from genesis
// through B) and the durable run store, journal and audit trail
// (persist*.go, migration 00002). The pure core is internal/recon.
package reconstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/source"
)

// Fetcher is the verifying source client (*source.Client): every page it
// returns has passed source.VerifyPage (chain from the caller's digest,
// ordering, descriptor, decodable wire).
type Fetcher interface {
	Fetch(ctx context.Context, afterSeq int64, afterDigest, expectDescriptor string, maxEvents int) (*source.Page, error)
}

// DefaultPageEvents is the page size of the source read: the contract's
// maximum, so a scope of N events costs N/10000 requests.
const DefaultPageEvents = source.MaxPageEvents

// Provider reads one scope for reconciliation (recon.SnapshotProvider). It
// never writes: the SQL side is read in one REPEATABLE READ, READ ONLY
// transaction (PostgreSQL refuses any write in it, and the read-only role
// with SELECT only suffices: TestProvider_ReadOnlyRoleWritesNothing), the
// source side through the verifying client.
//
// Order matters: the SQL side is read FIRST, then the source through its
// boundary B. The member's boundary only grows and the projection is written
// from events the member already applied, so every SQL row and the cursor's
// verified seq are <= B of the later read. Reading the source first would let
// the live feed write rows past B in between, which detection ignores (they
// are past the boundary) and, worse, a cursor advanced past B would look
// ahead of its source.
type Provider struct {
	// Pool reaches the projection database; SELECT on the base tables and
	// recovery's tables is all it needs (projection_recovery_readonly).
	Pool *pgxpool.Pool
	// Source fetches verified pages of the scope's member.
	Source Fetcher
	// PageEvents is maxEvents per page (1..source.MaxPageEvents); 0 means
	// DefaultPageEvents.
	PageEvents int
	// Clock stamps Snapshot.Now (the workflow restamps with its own clock).
	Clock func() time.Time
	// StaleAfter is copied into the snapshot.
	StaleAfter time.Duration
	// Publisher, when set, reports the outbox publisher's connection.
	Publisher func() *recon.PublisherStatus
	// MaxRecords caps each side of the read (0: DefaultMaxSnapshotRecords):
	// the projection's history rows (trades, orders and order_events
	// together, counted before any is read) and the source's events through
	// B (counted page by page). Past it the read stops with
	// recon.ErrSnapshotTooLarge (snapshot_too_large).
	MaxRecords int64
	// Deadline bounds the whole read (0: DefaultSnapshotDeadline); past it
	// the read stops with recon.ErrSnapshotTooLarge. A cancelled or expired
	// caller's context stays a cancellation.
	Deadline time.Duration
}

// DefaultMaxSnapshotRecords and DefaultSnapshotDeadline bound one read when
// the provider sets no limit. Streamed (Open), detection's memory does not
// grow with the history but for the order index (16 bytes an order, at
// most 160 MB at the cap were every record an order), so the cap bounds
// time: 10M records at the measured ~70-80k events/s take about two to
// three minutes, well inside the deadline, which stops a scope (or a
// member) too slow for it from holding a reconciliation worker. Read
// materialises everything: it is for tests and small scopes.
const (
	DefaultMaxSnapshotRecords int64 = 10_000_000
	DefaultSnapshotDeadline         = 10 * time.Minute
)

// errReadDeadline is the cause of the read's own deadline, told apart from
// the caller's.
var errReadDeadline = errors.New("snapshot deadline")

var _ recon.SnapshotProvider = (*Provider)(nil)

// readLimits are a read's page size, cap and deadline, defaults applied.
type readLimits struct {
	page     int
	records  int64
	deadline time.Duration
}

// limits validates the provider for a read of scope.
func (p *Provider) limits(scope string) (readLimits, error) {
	switch {
	case p.Pool == nil:
		return readLimits{}, errors.New("reconstore: provider has no database pool")
	case p.Source == nil:
		return readLimits{}, errors.New("reconstore: provider has no source client")
	case p.Clock == nil:
		return readLimits{}, errors.New("reconstore: provider has no clock")
	case scope == "":
		return readLimits{}, errors.New("reconstore: empty scope")
	}
	l := readLimits{page: p.PageEvents, records: p.MaxRecords, deadline: p.Deadline}
	if l.page == 0 {
		l.page = DefaultPageEvents
	}
	if l.page < 1 || l.page > source.MaxPageEvents {
		return readLimits{}, fmt.Errorf("reconstore: page size %d outside 1..%d", l.page, source.MaxPageEvents)
	}
	if l.records == 0 {
		l.records = DefaultMaxSnapshotRecords
	}
	if l.deadline == 0 {
		l.deadline = DefaultSnapshotDeadline
	}
	if l.records < 0 || l.deadline < 0 {
		return readLimits{}, fmt.Errorf("reconstore: negative snapshot cap %d or deadline %s", l.records, l.deadline)
	}
	return l, nil
}

// overdue turns an error caused by the read's own deadline (ctx, derived
// from parent) into the refusal the caller can act on; the caller's own
// end stays its own.
func (l readLimits) overdue(parent, ctx context.Context, err error) error {
	if err != nil && parent.Err() == nil && errors.Is(context.Cause(ctx), errReadDeadline) && !errors.Is(err, recon.ErrSnapshotTooLarge) {
		return fmt.Errorf("%w: the read did not finish within the snapshot deadline of %s (%v)", recon.ErrSnapshotTooLarge, l.deadline, err)
	}
	return err
}

// Read returns the scope's snapshot, or an error and no snapshot when any
// part of either side could not be read (the workflow answers
// snapshot_unavailable and produces no report: a partial read that looks
// clean is worse than none).
func (p *Provider) Read(ctx context.Context, scope string) (*recon.Snapshot, error) {
	lim, err := p.limits(scope)
	if err != nil {
		return nil, err
	}
	max, limit := lim.page, lim.records
	parent := ctx
	ctx, cancel := context.WithTimeoutCause(ctx, lim.deadline, errReadDeadline)
	defer cancel()
	overdue := func(err error) error { return lim.overdue(parent, ctx, err) }
	start := time.Now()
	snap := &recon.Snapshot{Scope: scope, Now: p.Clock(), StaleAfter: p.StaleAfter}
	in := newInterner()
	if err := readSQL(ctx, p.Pool, scope, snap, in, limit); err != nil {
		return nil, fmt.Errorf("reconstore: read scope %s from the projection: %w", scope, overdue(err))
	}
	hint := sourceHint{trades: len(snap.SQL.Trades), orders: len(snap.SQL.OrderEvents)}
	src, pages, err := readSource(ctx, p.Source, max, chainSeqs(snap), hint, in, limit)
	if err != nil {
		return nil, fmt.Errorf("reconstore: read scope %s from the source: %w", scope, overdue(err))
	}
	snap.Source = src
	if p.Publisher != nil {
		snap.Publisher = p.Publisher()
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("reconciliation snapshot", "scope", scope,
		"boundary", src.Boundary, "sourceEvents", src.EventCount, "pages", pages,
		"trades", len(snap.SQL.Trades), "orderEvents", len(snap.SQL.OrderEvents), "positions", len(snap.SQL.Positions),
		"took", time.Since(start).String())
	return snap, nil
}

// chainSeqs are the sequences whose source chain detection compares: the
// cursor's verified-through seq and the selected run's explicit-recovery
// checkpoint. 0 is genesis, known without a read.
func chainSeqs(s *recon.Snapshot) []int64 {
	var out []int64
	if c := s.SQL.Cursor; c != nil && c.VerifiedThroughSeq > 0 {
		out = append(out, c.VerifiedThroughSeq)
	}
	for i := range s.SQL.Runs {
		r := &s.SQL.Runs[i]
		if r.Selected && r.RecoveryCheckpointSeq != nil && *r.RecoveryCheckpointSeq > 0 {
			out = append(out, *r.RecoveryCheckpointSeq)
		}
	}
	return out
}
