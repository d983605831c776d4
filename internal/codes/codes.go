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

// Package codes holds the stable refusal codes of automatic projection
// recovery and the one place that maps an error to its code (Of). A code is
// what .status.reason, the SQL cursor's blocked_reason, events and metrics
// carry; each is either transient (RETRYING) or needs review (BLOCKED).
// Database failures are classified here; an error of another layer carries
// its own code (Coded: the source client's errors do), so the mapping
// happens once, wherever the error came from. codes imports nothing of the
// module (internal/arch): any package may map its errors to it.
package codes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Code is a stable refusal code. Every page that is not applied ends in exactly
// one Code (Of); the controller mirrors it into .status.reason and decides
// RETRYING (Transient) or BLOCKED from it. The spellings are a contract: never
// rename one.
type Code string

// Transient codes: nothing is wrong with the data; retry with backoff (RETRYING).
const (
	// SourceUnavailable: the member could not answer (transport, timeout,
	// 5xx, or AFTER_SEQ_BEYOND_BOUNDARY from a lagging replica).
	SourceUnavailable Code = "SOURCE_UNAVAILABLE"
	// LeaseHeld: another owner holds an unexpired lease on the scope (FR-APR08).
	LeaseHeld Code = "LEASE_HELD"
	// LeaseLost: our lease was taken over, released or expired before the
	// page could lock it; nothing was written (FR-APR08).
	LeaseLost Code = "LEASE_LOST"
	// Superseded: the selected run (scope, phase, descriptor, frozen seq)
	// changed since the caller read it; nothing was written (FR-APR09).
	Superseded Code = "SUPERSEDED"
	// CursorMoved: the cursor is no longer where the page starts (another
	// page committed first); the compare-and-set refused (FR-APR06).
	CursorMoved Code = "CURSOR_MOVED"
	// DatabaseUnavailable: PostgreSQL went away or timed out; the
	// transaction rolled back, nothing was written.
	DatabaseUnavailable Code = "DATABASE_UNAVAILABLE"
)

// Blocking codes: the projection or the source cannot be proven safe; an
// operator must review (BLOCKED). Retrying would answer the same.
const (
	// NotEligible: no managed epoch-v1 selected ACTIVE/DRAINING run for the scope.
	NotEligible Code = "NOT_ELIGIBLE"
	// DescriptorMismatch: page, run and cursor disagree on the descriptor hash (FR-APR07).
	DescriptorMismatch Code = "DESCRIPTOR_MISMATCH"
	// ProtocolMismatch: page, run and cursor disagree on the protocol version (FR-APR07).
	ProtocolMismatch Code = "PROTOCOL_MISMATCH"
	// ExplicitCheckpointMismatch: the run's explicit-recovery checkpoint
	// (identity cross-check only) contradicts the verified chain (FR-APR07).
	ExplicitCheckpointMismatch Code = "EXPLICIT_CHECKPOINT_MISMATCH"
	// ChainMismatch: digestAfter is not the cursor's digest, or the events
	// do not hash to digestThrough (FR-APR03/06).
	ChainMismatch Code = "CHAIN_MISMATCH"
	// HistoryRewritten: the member answered idle at the verified cursor, and
	// its chain through that sequence, proven again before the idle answer
	// certifies anything, is not the verified one: it serves another history
	// there (a log lost and re-traded, another member) (FR-APR03/04).
	HistoryRewritten Code = "HISTORY_REWRITTEN"
	// OrderingViolation: page coordinates or event sequences out of order
	// or outside (afterSeq, throughSeq] / beyond the boundary.
	OrderingViolation Code = "ORDERING_VIOLATION"
	// MalformedEvent: wire bytes that do not decode as a protocol-v1 event.
	MalformedEvent Code = "MALFORMED_EVENT"
	// BeyondFrozen: the cursor of a DRAINING run is already past frozen_seq (FR-APR09).
	BeyondFrozen Code = "BEYOND_FROZEN"
	// OrphanTrade: a retained trade positioned in the window is absent from the source.
	OrphanTrade Code = "ORPHAN_TRADE"
	// OrphanOrder: a retained order row positioned in the window is absent from the source.
	OrphanOrder Code = "ORPHAN_ORDER"
	// ImmutableTradeConflict: a retained trade differs from the source trade of the same id.
	ImmutableTradeConflict Code = "IMMUTABLE_TRADE_CONFLICT"
	// RejectedBooking: a source trade is retained with a booking status other than BOOKED.
	RejectedBooking Code = "REJECTED_BOOKING"
	// TradeProvenanceConflict: a retained trade carries a different consensus seq than its source event.
	TradeProvenanceConflict Code = "TRADE_PROVENANCE_CONFLICT"
	// OrderProvenanceConflict: a retained order version carries a different consensus seq than its source event.
	OrderProvenanceConflict Code = "ORDER_PROVENANCE_CONFLICT"
	// OrderRowMismatch: a retained order row differs from the SQL
	// representation of its source event (timestamps compared at microseconds).
	OrderRowMismatch Code = "ORDER_ROW_MISMATCH"
	// OpeningConflict: a source opening contradicts the key's retained
	// opening or arrives after verified trades of the key.
	OpeningConflict Code = "OPENING_CONFLICT"
	// UnexplainedBalance: a touched key's stored quantity is not its opening
	// plus its retained trades (see checkBalances for the exact rule).
	UnexplainedBalance Code = "UNEXPLAINED_BALANCE"
	// UnknownLegacyHistory: rows of the scope carry no consensus provenance (seq NULL).
	UnknownLegacyHistory Code = "UNKNOWN_LEGACY_HISTORY"
	// UnprovenInitialBalance: a touched key's opening is not proven.
	UnprovenInitialBalance Code = "UNPROVEN_INITIAL_BALANCE"
	// SourceRefused: the member refused the page (409 MISSING_GENESIS,
	// DISCONTINUITY, ARCHIVE_BEHIND_BOUNDARY, EXCEEDS_PAGE; 4xx), or
	// answered a redirect, which the client never follows (REDIRECT_REFUSED).
	SourceRefused Code = "SOURCE_REFUSED"
	// SourceVerification: the source client refused a page that failed verification.
	SourceVerification Code = "SOURCE_VERIFICATION"
	// Internal: any other error. Blocking, so a bug does not spin.
	Internal Code = "INTERNAL"
)

// Codes that are neither a page refusal nor transient in the usual sense.
const (
	// CommitOutcomeUnknown: the connection failed while COMMIT was in flight,
	// so the page may or may not have been written. The store re-reads the
	// cursor to decide; this code remains only when even that read failed.
	// Transient: the next cycle reads the cursor and continues from there.
	CommitOutcomeUnknown Code = "COMMIT_OUTCOME_UNKNOWN"
	// SchemaMissing: the database lacks recovery's tables (or an older
	// version of them) and this manager may not create them (auto-recovery
	// off, or a runtime role without CREATE, as recommended). Not BLOCKED:
	// nothing is wrong with the projection; the migrate step (`manager
	// migrate` as the schema owner) applies them.
	SchemaMissing Code = "SCHEMA_MISSING"
)

// All lists every code (tests assert each has a test and a Transient answer).
var All = []Code{
	SourceUnavailable, LeaseHeld, LeaseLost, Superseded, CursorMoved, DatabaseUnavailable,
	NotEligible, DescriptorMismatch, ProtocolMismatch, ExplicitCheckpointMismatch, ChainMismatch,
	HistoryRewritten, OrderingViolation, MalformedEvent, BeyondFrozen, OrphanTrade, OrphanOrder,
	ImmutableTradeConflict, RejectedBooking, TradeProvenanceConflict, OrderProvenanceConflict,
	OrderRowMismatch, OpeningConflict, UnexplainedBalance, UnknownLegacyHistory,
	UnprovenInitialBalance, SourceRefused, SourceVerification, Internal, CommitOutcomeUnknown, SchemaMissing,
}

// Transient reports whether the code means RETRYING (true) or BLOCKED (false).
func (c Code) Transient() bool {
	switch c {
	case SourceUnavailable, LeaseHeld, LeaseLost, Superseded, CursorMoved, DatabaseUnavailable, CommitOutcomeUnknown:
		return true
	}
	return false
}

// Refusal is a page (or lease operation) that was not applied: nothing was
// written, with one exception spelled out by its code. COMMIT_OUTCOME_UNKNOWN
// means the commit may have happened; only a later read of the cursor tells.
type Refusal struct {
	Code   Code
	Detail string
	Err    error // underlying cause, if any
}

func (r *Refusal) Error() string {
	if r.Err != nil {
		return fmt.Sprintf("%s: %s: %v", r.Code, r.Detail, r.Err)
	}
	return fmt.Sprintf("%s: %s", r.Code, r.Detail)
}

func (r *Refusal) Unwrap() error { return r.Err }

// Newf returns a refusal with a formatted detail.
func Newf(c Code, format string, args ...any) *Refusal {
	return &Refusal{Code: c, Detail: fmt.Sprintf(format, args...)}
}

// Coded is an error that knows its stable code. The layer that defines the
// error maps it (the source client's errors say SOURCE_*), not codes: codes
// importing that layer would make it depend on what depends on it.
type Coded interface {
	error
	StableCode() Code
}

// Of maps any error, once, to its stable code: a *Refusal keeps its own;
// the first Coded error in the chain gives its code (the source client's
// errors: SOURCE_*); connection-class PostgreSQL failures,
// closed connections, network errors and a cancelled or expired context (a
// shutdown mid-transaction rolls back: nothing written) to
// DATABASE_UNAVAILABLE; anything else to INTERNAL; nil to "".
func Of(err error) Code {
	if err == nil {
		return ""
	}
	var r *Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	var c Coded
	if errors.As(err, &c) {
		return c.StableCode()
	}
	if DatabaseUnavailableError(err) {
		return DatabaseUnavailable
	}
	return Internal
}

// DatabaseUnavailableError: the server or the connection failed, not the statement.
// SQLSTATE classes 08 (connection), 53 (insufficient resources), 57 (operator
// intervention: admin shutdown, terminated backend, cancel), 40 (serialization
// / deadlock: retry) and 58 (system error).
func DatabaseUnavailableError(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", "53", "57", "40", "58":
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), errors.Is(err, net.ErrClosed), pgconn.SafeToRetry(err), pgconn.Timeout(err):
		return true
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return true
	}
	// pgx reports a connection closed underneath it with these texts.
	msg := err.Error()
	for _, s := range []string{"conn closed", "connection reset", "broken pipe", "unexpected EOF", "conn busy"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// Database wraps a database failure: connection-class errors become a
// DATABASE_UNAVAILABLE refusal (transient), others keep their cause under a
// context message.
func Database(what string, err error) error {
	if err == nil {
		return nil
	}
	var r *Refusal
	if errors.As(err, &r) {
		return err
	}
	if DatabaseUnavailableError(err) {
		return &Refusal{Code: DatabaseUnavailable, Detail: what, Err: err}
	}
	return fmt.Errorf("%s: %w", what, err)
}
