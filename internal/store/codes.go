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
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/projection-recovery/projection-recovery/internal/source"
)

// Code is a stable refusal code. Every page that is not applied ends in exactly
// one Code (CodeOf); the controller mirrors it into .status.reason and decides
// RETRYING (Transient) or BLOCKED from it. The spellings are a contract: never
// rename one.
type Code string

// Transient codes: nothing is wrong with the data; retry with backoff (RETRYING).
const (
	// CodeSourceUnavailable: the member could not answer (transport, timeout,
	// 5xx, or AFTER_SEQ_BEYOND_BOUNDARY from a lagging replica).
	CodeSourceUnavailable Code = "SOURCE_UNAVAILABLE"
	// CodeLeaseHeld: another owner holds an unexpired lease on the scope (FR-APR08).
	CodeLeaseHeld Code = "LEASE_HELD"
	// CodeLeaseLost: our lease was taken over, released or expired before the
	// page could lock it; nothing was written (FR-APR08).
	CodeLeaseLost Code = "LEASE_LOST"
	// CodeSuperseded: the selected run (scope, phase, descriptor, frozen seq)
	// changed since the caller read it; nothing was written (FR-APR09).
	CodeSuperseded Code = "SUPERSEDED"
	// CodeCursorMoved: the cursor is no longer where the page starts (another
	// page committed first); the compare-and-set refused (FR-APR06).
	CodeCursorMoved Code = "CURSOR_MOVED"
	// CodeDatabaseUnavailable: PostgreSQL went away or timed out; the
	// transaction rolled back, nothing was written.
	CodeDatabaseUnavailable Code = "DATABASE_UNAVAILABLE"
)

// Blocking codes: the projection or the source cannot be proven safe; an
// operator must review (BLOCKED). Retrying would answer the same.
const (
	// CodeNotEligible: no managed epoch-v1 selected ACTIVE/DRAINING run for the scope.
	CodeNotEligible Code = "NOT_ELIGIBLE"
	// CodeDescriptorMismatch: page, run and cursor disagree on the descriptor hash (FR-APR07).
	CodeDescriptorMismatch Code = "DESCRIPTOR_MISMATCH"
	// CodeProtocolMismatch: page, run and cursor disagree on the protocol version (FR-APR07).
	CodeProtocolMismatch Code = "PROTOCOL_MISMATCH"
	// CodeExplicitCheckpointMismatch: the run's explicit-recovery checkpoint
	// (identity cross-check only) contradicts the verified chain (FR-APR07).
	CodeExplicitCheckpointMismatch Code = "EXPLICIT_CHECKPOINT_MISMATCH"
	// CodeChainMismatch: digestAfter is not the cursor's digest, or the events
	// do not hash to digestThrough (FR-APR03/06).
	CodeChainMismatch Code = "CHAIN_MISMATCH"
	// CodeOrderingViolation: page coordinates or event sequences out of order
	// or outside (afterSeq, throughSeq] / beyond the boundary.
	CodeOrderingViolation Code = "ORDERING_VIOLATION"
	// CodeMalformedEvent: wire bytes that do not decode as a protocol-v1 event.
	CodeMalformedEvent Code = "MALFORMED_EVENT"
	// CodeBeyondFrozen: the cursor of a DRAINING run is already past frozen_seq (FR-APR09).
	CodeBeyondFrozen Code = "BEYOND_FROZEN"
	// CodeOrphanTrade: a retained trade positioned in the window is absent from the source.
	CodeOrphanTrade Code = "ORPHAN_TRADE"
	// CodeOrphanOrder: a retained order row positioned in the window is absent from the source.
	CodeOrphanOrder Code = "ORPHAN_ORDER"
	// CodeImmutableTradeConflict: a retained trade differs from the source trade of the same id.
	CodeImmutableTradeConflict Code = "IMMUTABLE_TRADE_CONFLICT"
	// CodeRejectedBooking: a source trade is retained with a booking status other than BOOKED.
	CodeRejectedBooking Code = "REJECTED_BOOKING"
	// CodeTradeProvenanceConflict: a retained trade carries a different consensus seq than its source event.
	CodeTradeProvenanceConflict Code = "TRADE_PROVENANCE_CONFLICT"
	// CodeOrderProvenanceConflict: a retained order version carries a different consensus seq than its source event.
	CodeOrderProvenanceConflict Code = "ORDER_PROVENANCE_CONFLICT"
	// CodeOrderRowMismatch: a retained order row differs from the SQL
	// representation of its source event (timestamps compared at microseconds).
	CodeOrderRowMismatch Code = "ORDER_ROW_MISMATCH"
	// CodeOpeningConflict: a source opening contradicts the key's retained
	// opening or arrives after verified trades of the key.
	CodeOpeningConflict Code = "OPENING_CONFLICT"
	// CodeUnexplainedBalance: a touched key's stored quantity is not its opening
	// plus its retained trades (see checkBalances for the exact rule).
	CodeUnexplainedBalance Code = "UNEXPLAINED_BALANCE"
	// CodeUnknownLegacyHistory: rows of the scope carry no consensus provenance (seq NULL).
	CodeUnknownLegacyHistory Code = "UNKNOWN_LEGACY_HISTORY"
	// CodeUnprovenInitialBalance: a touched key's opening is not proven.
	CodeUnprovenInitialBalance Code = "UNPROVEN_INITIAL_BALANCE"
	// CodeSourceRefused: the member refused the page (409 MISSING_GENESIS,
	// DISCONTINUITY, ARCHIVE_BEHIND_BOUNDARY, EXCEEDS_PAGE; 4xx).
	CodeSourceRefused Code = "SOURCE_REFUSED"
	// CodeSourceVerification: the source client refused a page that failed verification.
	CodeSourceVerification Code = "SOURCE_VERIFICATION"
	// CodeInternal: any other error. Blocking, so a bug does not spin.
	CodeInternal Code = "INTERNAL"
)

// AllCodes lists every code (tests assert each has a test and a Transient answer).
var AllCodes = []Code{
	CodeSourceUnavailable, CodeLeaseHeld, CodeLeaseLost, CodeSuperseded, CodeCursorMoved, CodeDatabaseUnavailable,
	CodeNotEligible, CodeDescriptorMismatch, CodeProtocolMismatch, CodeExplicitCheckpointMismatch, CodeChainMismatch,
	CodeOrderingViolation, CodeMalformedEvent, CodeBeyondFrozen, CodeOrphanTrade, CodeOrphanOrder,
	CodeImmutableTradeConflict, CodeRejectedBooking, CodeTradeProvenanceConflict, CodeOrderProvenanceConflict,
	CodeOrderRowMismatch, CodeOpeningConflict, CodeUnexplainedBalance, CodeUnknownLegacyHistory,
	CodeUnprovenInitialBalance, CodeSourceRefused, CodeSourceVerification, CodeInternal,
}

// Transient reports whether the code means RETRYING (true) or BLOCKED (false).
func (c Code) Transient() bool {
	switch c {
	case CodeSourceUnavailable, CodeLeaseHeld, CodeLeaseLost, CodeSuperseded, CodeCursorMoved, CodeDatabaseUnavailable:
		return true
	}
	return false
}

// Refusal is a page (or lease operation) that was not applied. Nothing was
// written when a Refusal is returned.
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

func refuse(c Code, format string, args ...any) *Refusal {
	return &Refusal{Code: c, Detail: fmt.Sprintf(format, args...)}
}

// CodeOf maps any error, once, to its stable code: a *Refusal keeps its own;
// source client errors map to SOURCE_*; connection-class PostgreSQL failures,
// closed connections, network errors and a cancelled or expired context (a
// shutdown mid-transaction rolls back: nothing written) to
// DATABASE_UNAVAILABLE; anything else to INTERNAL; nil to "".
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var r *Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	var ue *source.UnavailableError
	if errors.As(err, &ue) || source.IsTransient(err) {
		return CodeSourceUnavailable
	}
	var re *source.RefusalError
	if errors.As(err, &re) {
		return CodeSourceRefused
	}
	var ve *source.VerificationError
	if errors.As(err, &ve) {
		return CodeSourceVerification
	}
	if dbUnavailable(err) {
		return CodeDatabaseUnavailable
	}
	return CodeInternal
}

// dbUnavailable: the server or the connection failed, not the statement.
// SQLSTATE classes 08 (connection), 53 (insufficient resources), 57 (operator
// intervention: admin shutdown, terminated backend, cancel), 40 (serialization
// / deadlock: retry) and 58 (system error).
func dbUnavailable(err error) bool {
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

// dbErr wraps a database failure: connection-class errors become a
// DATABASE_UNAVAILABLE refusal (transient), others keep their cause under a
// context message.
func dbErr(what string, err error) error {
	if err == nil {
		return nil
	}
	var r *Refusal
	if errors.As(err, &r) {
		return err
	}
	if dbUnavailable(err) {
		return &Refusal{Code: CodeDatabaseUnavailable, Detail: what, Err: err}
	}
	return fmt.Errorf("%s: %w", what, err)
}
