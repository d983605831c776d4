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
	"errors"
	"fmt"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// check is one pass over the snapshot. emits declares every invariant the
// pass may report: emitting another one is an error (checked but undeclared),
// and every declared invariant must be emitted by some check
// (TestGuard_InvariantsWired: declared but unchecked).
type check struct {
	name  string
	emits []InvariantID
	run   func(*detector)
}

// checks run in this order: trades first (they mark orphans and drifting keys
// that the position pass needs), then positions, orders, and the worker's
// records.
var checks = []check{
	{"trades", []InvariantID{TradeIdentityUnique, TradeProvenance, TradePresentInSource, TradeImmutableAgrees,
		TradeBookingAccepted, TradeSourceRetained}, checkTrades},
	{"positions", []InvariantID{OpeningProven, PositionBasisAgrees, PositionSourceBacked, PositionDerivationAgrees}, checkPositions},
	{"orders", []InvariantID{OrderVersionAgrees, OrderPresentInSource, OrderSourceRetained, OrderNeverRewound}, checkOrders},
	{"cursor", []InvariantID{CursorProgress, CursorWithinBoundary, CursorEventCountAgrees, CursorChainAgrees, CursorIdentityAgrees}, checkCursor},
	{"lease", []InvariantID{LeaseFresh}, checkLease},
	{"runs", []InvariantID{RunSingleSelected, RunEligible}, checkRuns},
	{"outbox", []InvariantID{OutboxDelivered, OutboxIdentityUnique}, checkOutbox},
}

// posKey is a position key.
type posKey struct{ account, instrument string }

func (k posKey) record() Record {
	return Record{Table: TablePositions, Identity: Fields{"account": k.account, "instrument": k.instrument}}
}

// orderKey identifies an order version.
type orderKey struct {
	id      string
	version int64
}

// detector is the state of one Detect call. It reads the snapshot and
// appends to findings; it never writes into the snapshot.
type detector struct {
	s    *Snapshot
	corr correlation
	cur  *check
	err  error

	v, b int64 // the cursor's verified-through seq (0 without a cursor) and the source boundary B

	srcTrades map[string]int            // first source trade per trade_id: its index in Source.Trades
	sqlTrades map[string]*TradeRow      // first row per trade_id
	orphan    map[string]bool           // SQL trade ids absent from the source at seq <= B
	legacy    map[string]bool           // SQL trade ids without a consensus seq
	keyDrift  map[posKey]*driftEvidence // evidence: trade findings touching the key
	accounts  map[string]bool           // accounts the source knows

	findings listed
}

func newDetector(s *Snapshot) *detector {
	d := &detector{s: s, corr: correlate(s), b: s.Source.Boundary,
		srcTrades: make(map[string]int, len(s.Source.Trades)),
		sqlTrades: make(map[string]*TradeRow, len(s.SQL.Trades)),
		orphan:    map[string]bool{}, legacy: map[string]bool{}, keyDrift: map[posKey]*driftEvidence{},
		accounts: map[string]bool{}}
	if s.SQL.Cursor != nil {
		d.v = s.SQL.Cursor.VerifiedThroughSeq
	}
	for i := range s.Source.Trades {
		t := &s.Source.Trades[i]
		if _, dup := d.srcTrades[t.TradeID]; !dup {
			d.srcTrades[t.TradeID] = i
		}
		d.accounts[t.BuyAccount] = true
		d.accounts[t.SellAccount] = true
	}
	for i := range s.Source.Openings {
		d.accounts[s.Source.Openings[i].Account] = true
	}
	return d
}

// DefaultMaxFindings is the report's finding cap when Snapshot.MaxFindings
// is 0: a finding costs about a kilobyte (its fields, cause and evidence),
// so 10,000 keep a report of a hostile scope in ~10 MB.
const DefaultMaxFindings = 10_000

// errUndeclared marks a programming error: a check emitted an invariant or a
// cause it does not declare. Detect fails rather than report it.
var errUndeclared = errors.New("recon: undeclared invariant or cause")

// emit records a finding. It copies the invariant's declaration onto it,
// applies the correlated source cause (absence: the conclusion rests on
// something the source lacks), and scrubs it. An invariant outside the running
// check's declaration, or a cause the invariant does not declare, fails the
// whole detection: a report built around a wiring bug would be trusted.
func (d *detector) emit(id InvariantID, rec Record, before, expected Fields, cause RootCause, absence bool, detail string, related ...string) {
	if d.err != nil {
		return
	}
	inv, ok := invariantByID[id]
	declared := false
	if d.cur != nil {
		for _, e := range d.cur.emits {
			declared = declared || e == id
		}
	}
	if !ok || !declared {
		name := ""
		if d.cur != nil {
			name = d.cur.name
		}
		d.err = fmt.Errorf("%w: check %q emitted invariant %q", errUndeclared, name, id)
		return
	}
	if inv.SourceDependent {
		if c, ok := d.corr.sourceCause(d.s, absence); ok {
			cause = c
		}
	}
	if !inv.allows(cause.Code) {
		d.err = fmt.Errorf("%w: invariant %q does not declare cause %q", errUndeclared, id, cause.Code)
		return
	}
	f := Finding{Invariant: id, Kind: inv.Kind, Statement: inv.Statement, Guidance: inv.Guidance, Strategy: inv.Strategy,
		Record: Record{Table: rec.Table, Identity: rec.Identity.clone()}, Before: before.clone(), Expected: expected.clone(),
		Detail: detail, RootCause: cause, Related: related}
	scrubFinding(&f)
	f.ID = string(id) + "@" + f.Record.Key()
	d.findings.add(f)
}

// srcTrade is the first source trade with the id and its index in
// Source.Trades, or nil and -1.
func (d *detector) srcTrade(id string) (*wire.Trade, int) {
	if i, ok := d.srcTrades[id]; ok {
		return &d.s.Source.Trades[i], i
	}
	return nil, -1
}

// markKey notes a trade drift on a key: the key's derivation inputs are not
// trustworthy until it is fixed (cause inputs_drift, repair refused).
func (d *detector) markKey(k posKey, why string) {
	e := d.keyDrift[k]
	if e == nil {
		e = &driftEvidence{}
		d.keyDrift[k] = e
	}
	if len(e.first) < driftShown {
		e.first = append(e.first, why)
	}
	e.n++
}

// driftShown is how many drifting trades of a key its evidence names.
const driftShown = 5

// driftEvidence is a key's drifting trades: the first driftShown reasons and
// how many there are. Only those are ever shown (driftCause), so a key with
// millions of drifting trades costs five strings, not millions.
type driftEvidence struct {
	first []string
	n     int
}

// Detect checks every invariant against the snapshot and returns a dry-run
// report listing EVERY finding. It is a pure function of s: it never writes
// into it, and the same snapshot always yields the same report. An error is
// a programming error (undeclared invariant or cause) or a nil snapshot.
func Detect(s *Snapshot) (*Report, error) {
	if s == nil {
		return nil, errors.New("recon: detect: nil snapshot")
	}
	d := newDetector(s)
	d.findings.max = s.MaxFindings
	if d.findings.max <= 0 {
		d.findings.max = DefaultMaxFindings
	}
	for i := range checks {
		d.cur = &checks[i]
		d.cur.run(d)
		if d.err != nil {
			return nil, d.err
		}
	}
	return newReport(s, d.corr, &d.findings), nil
}
