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

// Package catchup is the catch-up engine: one bounded cycle of one scope,
// from the SQL cursor to the member's boundary, page by page under the fenced
// lease (FR-APR05/06/08/10). It knows the store, the source client and the
// clock; it knows nothing of Kubernetes. The controller resolves what a cycle
// needs (spec values, Secrets, connections), calls Engine.Run once per
// reconcile and folds the Result into the resource's status.
package catchup

import (
	"context"
	"time"

	"k8s.io/utils/clock"

	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// State is a scope's state after a cycle, as status.state reports it. The
// empty State means the cycle ended before it could say (the Reason says why).
type State string

// The states of a scope (the CRD's status.state enum).
const (
	StateCatchingUp State = "CATCHING_UP"
	StateCurrent    State = "CURRENT"
	StateRetrying   State = "RETRYING"
	StateBlocked    State = "BLOCKED"
)

// ReasonInvalidSpec is a Result's Reason when the Connector's Client refused
// the spec (InvalidSpecError): nothing was fetched nor written.
const ReasonInvalidSpec = "InvalidSpec"

// InvalidSpecError is a spec the API server accepted but that cannot be used.
type InvalidSpecError struct{ Msg string }

func (e *InvalidSpecError) Error() string { return e.Msg }

// Engine is what the cycles of one manager share. Its zero Carry carries
// nothing; everything else is set by the caller.
type Engine struct {
	Clock clock.PassiveClock
	// AutoRecovery enables writes to SQL. Off, a cycle reports completeness
	// read-only (NFR-APR01).
	AutoRecovery bool
	// Owner identifies this manager (OnPageCommitted's first argument).
	Owner string
	// Carry keeps each scope's carried unit between its cycles (nil: none).
	Carry *CarryOver
	// Proofs is what this manager knows of each scope's member chain, for
	// the idle proof (proof.go); nil knows nothing, so every idle answer
	// at a sequence past genesis is proven first.
	Proofs *ProofLedger
	// ProofPeriod bounds how long one proof lets idle answers certify a
	// scope (0: DefaultProofPeriod).
	ProofPeriod time.Duration
	// Counters counts what a Result does not carry.
	Counters Counters
	// OnPageCommitted, when set, is called after every committed page (tests).
	OnPageCommitted func(owner string, res store.PageResult)
}

// Counters receives the engine's counts that no single Result carries: the
// carried units by outcome (CarriedUsed, CarriedDropped, CarriedEvicted).
type Counters interface {
	CarriedUnits(outcome string, n int)
}

// Connector opens a cycle's connections, shared between cycles by the
// caller: the source client (an *InvalidSpecError when the spec cannot be
// used) and the store (errors classify through codes.Of). SchemaLost tells
// it that the store answered SCHEMA_MISSING after its schema step had passed.
type Connector interface {
	Client() (*source.Client, error)
	Store(ctx context.Context) (*store.Store, error)
	SchemaLost()
}

// Limits bound one cycle (FR-APR10), the spec's effective values.
type Limits struct {
	PageSize, PagesPerCycle int
	// CycleTimeout: no page starts after it.
	CycleTimeout time.Duration
	// RequestTimeout bounds one request to the member (the client's).
	RequestTimeout time.Duration
	// LeaseDuration is the fenced lease's duration (FR-APR08).
	LeaseDuration time.Duration
}

// Cycle is one cycle's input.
type Cycle struct {
	// Resource names the scope's resource (namespace/name): the key of its
	// carried unit.
	Resource string
	Scope    string
	// LeaseOwner is the lease identity this cycle takes and renews.
	LeaseOwner string
	Limits     Limits
	Connector  Connector
	// Redact removes every referenced secret from a message (driver errors
	// can echo parts of a connection string). nil: messages are kept as is.
	Redact func(string) string
	// Carried is the unit the previous cycle fetched for this one
	// (CarryOver.Take), or nil.
	Carried *CarriedUnit
}

// Result is what one bounded cycle proved, observed and failed on.
type Result struct {
	State   State
	Reason  string // stable code when RETRYING or BLOCKED (a codes.Code), or ReasonInvalidSpec
	Message string

	Cursor store.Cursor // latest known cursor (after the last committed page)
	// CursorRead: this cycle read the cursor and the selected run from SQL.
	// When false (database unreachable, schema missing, spec unusable) Cursor
	// is the zero value and must not be reported: status keeps the last
	// values it knew, or it would claim VERIFIED 0 / LAG B during an outage.
	CursorRead bool
	// Frozen is the frozen sequence of a DRAINING run: the scope is caught up
	// only to min(boundary, frozen) (FR-APR09).
	Frozen   *int64
	Boundary int64        // latest observed source boundary (0: none observed)
	Lease    *store.Lease // lease held or observed, when known
	Pages    int          // pages committed by this cycle
	Events   int          // events applied by this cycle
	// LockHolds: how long each committed write slice held the scope's
	// projection write lock (the time live writes may have waited).
	LockHolds []time.Duration
	ReadOnly  bool // auto-recovery off: nothing was written
	// Observer: another manager holds the lease (in Lease); this one only reported.
	Observer bool
}

// Deadline is the hard stop of one cycle. No page starts after
// CycleTimeout; the fetch in flight then is bounded by the source client's
// request timeout (spec.source.requestTimeout), and every write by the lease
// duration (one to take or renew the lease, one for the page transaction).
// The lease duration alone would be wrong: it would include the fetch, and a
// member whose replay takes longer than the lease could never make progress;
// so would a fixed request timeout, for a member whose replay from genesis
// (NFR-APR02) takes longer than it.
func Deadline(l Limits) time.Duration {
	return l.CycleTimeout + l.RequestTimeout + 2*l.LeaseDuration
}

// Run runs one bounded cycle (FR-APR10): at most PagesPerCycle pages, no new
// page started after CycleTimeout, and a hard deadline (Deadline) so that a
// stuck source or database can never hold the worker. When ctx is cancelled
// meanwhile the Result is an artefact of the cancellation: the caller checks
// ctx and discards it.
func (e *Engine) Run(ctx context.Context, c Cycle) Result {
	cctx, cancel := context.WithTimeout(ctx, Deadline(c.Limits))
	defer cancel()
	if c.Redact == nil {
		c.Redact = func(s string) string { return s }
	}
	return e.run(cctx, &c)
}
