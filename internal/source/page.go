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

// Package source is the operator's side of the pinned v1 catch-up contract
// (FR-APR01..04, docs/source-contract.md): the page and refusal
// types, and the client that fetches pages and verifies them (identity,
// ordering, chain digests) before anything reaches the store. The reference
// member that serves the contract lives in internal/reference/member; this
// package never depends on it, so the manager does not link a matching engine.
package source

import (
	"errors"
	"fmt"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/codes"
)

// Path of the catch-up endpoint and of the descriptor endpoint.
const (
	CatchupPath    = "/recon/catchup-events"
	DescriptorPath = "/recon/descriptor"
)

// MaxPageEvents is the documented upper bound of maxEvents. Larger values are
// a 400: a page is one Postgres transaction on the consumer, and it must stay
// bounded (FR-APR10 "pages are bounded").
const MaxPageEvents = 10000

// Refusal codes (409) of the pinned v1 contract. The last three come from the
// strict replay (FR-APR03); a member's replay reports them with these spellings.
const (
	CodeCommandExceedsPage     = "RECOVERY_COMMAND_EXCEEDS_PAGE" // FR-APR02
	CodeAfterSeqBeyondBoundary = "AFTER_SEQ_BEYOND_BOUNDARY"     // FR-APR04
	// CodeMissingGenesis: the member's oldest retained command is not seq 1,
	// so the chain cannot be recomputed from d0 (FR-APR03).
	CodeMissingGenesis = "MISSING_GENESIS"
	// CodeDiscontinuity: a gap or overlap between or inside recording terms (FR-APR03).
	CodeDiscontinuity = "DISCONTINUITY"
	// CodeArchiveBehindBoundary: the retained commands end before B (FR-APR03).
	CodeArchiveBehindBoundary = "ARCHIVE_BEHIND_BOUNDARY"
)

// Codes of non-409 error bodies (not part of the pinned refusal set).
const (
	CodeBadRequest   = "BAD_REQUEST"
	CodeUnauthorized = "UNAUTHORIZED"
	CodeReplayFailed = "REPLAY_FAILED" // 500: the log could not be read or decoded
)

// Page is one catch-up answer. The field order is the pinned JSON order.
//
// On the wire an idle page (afterSeq == boundarySeq, FR-APR04) carries empty
// digests, because the member answers it without replaying; a Page returned
// by Client.Fetch always has DigestAfter == DigestThrough == the caller's
// afterDigest when Idle, so callers can continue from (ThroughSeq,
// DigestThrough) uniformly.
type Page struct {
	ProtocolVersion int     `json:"protocolVersion"`
	DescriptorHash  string  `json:"descriptorHash"`
	BoundarySeq     int64   `json:"boundarySeq"`
	AfterSeq        int64   `json:"afterSeq"`
	ThroughSeq      int64   `json:"throughSeq"`
	DigestAfter     string  `json:"digestAfter"`
	DigestThrough   string  `json:"digestThrough"`
	Idle            bool    `json:"idle"`
	Events          []Event `json:"events"`
}

// Event is one projection event of a page: its consensus sequence and the
// exact production wire bytes (base64 in JSON).
type Event struct {
	Seq  int64  `json:"seq"`
	Wire []byte `json:"wire"`
}

// RefusalBody is the JSON body of a 409 (and of 400/401/500 with their own codes).
type RefusalBody struct {
	Code        string `json:"code"`
	Message     string `json:"message"`
	BoundarySeq int64  `json:"boundarySeq"`
}

// RefusalError is a definite answer from the member that it will not serve
// the page: a 409 with one of the Code* refusal codes, or another 4xx
// (400 BAD_REQUEST, 401 UNAUTHORIZED, 404 ...), with Code from the body or
// "HTTP_<status>" when the body carries none; or a 3xx, which the client
// never follows (CodeRedirectRefused).
type RefusalError struct {
	Status      int
	Code        string
	Message     string
	BoundarySeq int64
}

func (e *RefusalError) Error() string {
	return fmt.Sprintf("source refused (HTTP %d %s, boundarySeq %d): %s", e.Status, e.Code, e.BoundarySeq, e.Message)
}

// StableCode is SOURCE_UNAVAILABLE for the refusal IsTransient retries
// (a member behind the verified cursor), SOURCE_REFUSED (BLOCKED) for any
// other.
func (e *RefusalError) StableCode() codes.Code {
	if e.Status == 409 && e.Code == CodeAfterSeqBeyondBoundary {
		return codes.SourceUnavailable
	}
	return codes.SourceRefused
}

// Verification codes of *VerificationError.
const (
	VerifyProtocolMismatch   = "PROTOCOL_MISMATCH"
	VerifyDescriptorMismatch = "DESCRIPTOR_MISMATCH"
	VerifyDigestMismatch     = "DIGEST_MISMATCH"
	VerifyOrdering           = "ORDERING"
	VerifyAfterSeqMismatch   = "AFTER_SEQ_MISMATCH"
	VerifyMalformedPage      = "MALFORMED_PAGE"
	VerifyBodyTooLarge       = "BODY_TOO_LARGE"
)

// VerificationError is a page the client refuses to hand out because it
// fails a check (see Client.Fetch). Never transient: the same member will
// answer the same way; it needs operator review.
type VerificationError struct {
	Code   string
	Detail string
}

func (e *VerificationError) Error() string {
	return "source page failed verification: " + e.Code + ": " + e.Detail
}

// StableCode is SOURCE_VERIFICATION: never transient.
func (e *VerificationError) StableCode() codes.Code { return codes.SourceVerification }

// UnavailableError wraps a transport failure, a timeout, a 5xx, a 408 or a
// 429: the member could not answer now; retrying later may succeed.
type UnavailableError struct {
	Status int // 0 when no HTTP response was received
	// Timeout is the client's own per-request deadline when that deadline
	// expired before the page was read whole (the member did not answer in
	// time), and zero otherwise: a caller's cancelled or expired context is
	// not the member's slowness, and raising the request timeout would not
	// help it.
	Timeout time.Duration
	Err     error
}

func (e *UnavailableError) Error() string {
	switch {
	case e.Timeout > 0:
		return fmt.Sprintf("source unavailable: no whole answer within the request timeout (%s): %v", e.Timeout, e.Err)
	case e.Status != 0:
		return fmt.Sprintf("source unavailable (HTTP %d): %v", e.Status, e.Err)
	}
	return fmt.Sprintf("source unavailable: %v", e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// StableCode is SOURCE_UNAVAILABLE (RETRYING) whatever it wraps: the member
// did not answer now, and a retry may get the page.
func (e *UnavailableError) StableCode() codes.Code { return codes.SourceUnavailable }

// The client's errors carry their code (codes.Of reads it).
var (
	_ codes.Coded = (*RefusalError)(nil)
	_ codes.Coded = (*VerificationError)(nil)
	_ codes.Coded = (*UnavailableError)(nil)
)

// IsTransient reports whether err is worth retrying with backoff unchanged
// (RETRYING rather than BLOCKED):
//   - *UnavailableError: always (member down, timeout, 5xx).
//   - *RefusalError AFTER_SEQ_BEYOND_BOUNDARY: yes. The member's committed
//     sequence is behind the consumer's verified cursor, e.g. a lagging or
//     restarted replica; nothing is written and it resolves when the member
//     catches up. An operator who wants to alarm on it can check the code.
//   - every other refusal (EXCEEDS_PAGE needs a bigger page, MISSING_GENESIS,
//     DISCONTINUITY, ARCHIVE_BEHIND_BOUNDARY need the archive repaired; 400,
//     401 need configuration; a refused redirect needs the source URL
//     fixed) and every *VerificationError: no.
func IsTransient(err error) bool {
	var ue *UnavailableError
	if errors.As(err, &ue) {
		return true
	}
	var re *RefusalError
	if errors.As(err, &re) {
		return re.Status == 409 && re.Code == CodeAfterSeqBeyondBoundary
	}
	return false
}
