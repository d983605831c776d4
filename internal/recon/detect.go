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
	"errors"
	"fmt"
)

// check is one group of invariants. emits declares every invariant the
// group may report: emitting another one is an error (checked but
// undeclared), and every declared invariant must be emitted by some check
// (TestGuard_InvariantsWired: declared but unchecked). The history's checks
// (trades, positions, orders) run while the history streams by (stream*.go);
// the others run once it has, over the Snapshot's small tables.
type check struct {
	name  string
	emits []InvariantID
	run   func(*detector) // nil: a check of the streamed history
}

var checks = []check{
	{"trades", []InvariantID{TradeIdentityUnique, TradeProvenance, TradePresentInSource, TradeImmutableAgrees,
		TradeBookingAccepted, TradeSourceRetained}, nil},
	{"positions", []InvariantID{OpeningProven, PositionBasisAgrees, PositionSourceBacked, PositionDerivationAgrees}, nil},
	{"orders", []InvariantID{OrderVersionAgrees, OrderPresentInSource, OrderSourceRetained, OrderNeverRewound}, nil},
	{"cursor", []InvariantID{CursorProgress, CursorWithinBoundary, CursorEventCountAgrees, CursorChainAgrees, CursorIdentityAgrees}, checkCursor},
	{"lease", []InvariantID{LeaseFresh}, checkLease},
	{"runs", []InvariantID{RunSingleSelected, RunEligible}, checkRuns},
	{"outbox", []InvariantID{OutboxDelivered, OutboxIdentityUnique}, checkOutbox},
}

// checkNamed is the declaration of the check called name.
func checkNamed(name string) *check {
	for i := range checks {
		if checks[i].name == name {
			return &checks[i]
		}
	}
	panic("recon: no check " + name)
}

var (
	checkTradesDecl    = checkNamed("trades")
	checkPositionsDecl = checkNamed("positions")
	checkOrdersDecl    = checkNamed("orders")
)

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

// detector is the state every check shares: the head snapshot (small
// tables, and the source's outcome once the history has streamed by), what
// the history showed of itself (counts), the drift evidence per key and the
// findings. It never writes into the snapshot.
type detector struct {
	s    *Snapshot
	corr correlation
	cur  *check
	err  error

	v, b int64 // the cursor's verified-through seq (0 without a cursor) and the source boundary B

	counts      HistoryCounts // the SQL history's rows
	srcEvents   int64         // source events decoded
	srcThroughV int64         // of them, those with seq <= V
	keyDrift    map[posKey]*driftEvidence
	accounts    map[string]bool // accounts the source knows
	emitted     int

	findings listed
}

func newDetector(s *Snapshot) *detector {
	d := &detector{s: s, b: s.Source.Boundary, keyDrift: map[posKey]*driftEvidence{}, accounts: map[string]bool{}}
	if s.SQL.Cursor != nil {
		d.v = s.SQL.Cursor.VerifiedThroughSeq
	}
	d.findings.max = s.MaxFindings
	if d.findings.max <= 0 {
		d.findings.max = DefaultMaxFindings
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

// ErrHistory marks a failed read of the history during detection (the
// source or the database failed mid-stream): the workflow answers it like
// a failed snapshot read, never as a detection bug.
var ErrHistory = errors.New("recon: history read failed")

// emit records a finding. It copies the invariant's declaration onto it and
// scrubs it. The correlated source cause (absence: the conclusion rests on
// something the source lacks) is applied when the report is built, once
// the whole source has been read (finalCause). An invariant outside the
// running check's declaration, or a cause the invariant does not declare,
// fails the whole detection: a report built around a wiring bug would be
// trusted.
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
	if !inv.allows(cause.Code) {
		d.err = fmt.Errorf("%w: invariant %q does not declare cause %q", errUndeclared, id, cause.Code)
		return
	}
	f := Finding{Invariant: id, Kind: inv.Kind, Statement: inv.Statement, Guidance: inv.Guidance, Strategy: inv.Strategy,
		Record: Record{Table: rec.Table, Identity: rec.Identity.clone()}, Before: before.clone(), Expected: expected.clone(),
		Detail: detail, RootCause: cause, Related: related}
	scrubFinding(&f)
	f.ID = string(id) + "@" + f.Record.Key()
	d.findings.add(f, absence)
}

// finalCause applies the correlated source cause to a listed finding.
func (d *detector) finalCause(f *Finding, absence bool) {
	inv := invariantByID[f.Invariant]
	if !inv.SourceDependent {
		return
	}
	if c, ok := d.corr.sourceCause(d.s, absence); ok {
		f.RootCause = c
		scrubCause(&f.RootCause)
	}
}

// driftOrder orders a key's drift evidence as the trades are reported: rows
// by trade_id (phase 1), then trade_seq groups (phase 2), then source
// trades the projection lost, by seq (phase 3).
type driftOrder struct {
	phase uint8
	n     int64 // phase 2: the group's position; phase 3: the seq
	id    string
	emit  int // emission order: the last tie-break
}

func (a driftOrder) before(b driftOrder) bool {
	switch {
	case a.phase != b.phase:
		return a.phase < b.phase
	case a.n != b.n:
		return a.n < b.n
	case a.id != b.id:
		return a.id < b.id
	}
	return a.emit < b.emit
}

// markKey notes a trade drift on a key: the key's derivation inputs are not
// trustworthy until it is fixed (cause inputs_drift, repair refused).
func (d *detector) markKey(k posKey, o driftOrder, why string) {
	e := d.keyDrift[k]
	if e == nil {
		e = &driftEvidence{}
		d.keyDrift[k] = e
	}
	d.emitted++
	o.emit = d.emitted
	e.n++
	i := len(e.first)
	for i > 0 && o.before(e.order[i-1]) {
		i--
	}
	if i >= driftShown {
		return
	}
	e.first = append(e.first[:i], append([]string{why}, e.first[i:]...)...)
	e.order = append(e.order[:i], append([]driftOrder{o}, e.order[i:]...)...)
	if len(e.first) > driftShown {
		e.first, e.order = e.first[:driftShown], e.order[:driftShown]
	}
}

// driftShown is how many drifting trades of a key its evidence names.
const driftShown = 5

// driftEvidence is a key's drifting trades: the first driftShown reasons in
// report order and how many there are. Only those are ever shown
// (driftCause), so a key with millions of drifting trades costs five
// strings, not millions.
type driftEvidence struct {
	first []string
	order []driftOrder
	n     int
}

// Detect checks every invariant against a materialised snapshot: the
// streaming detection (DetectHistory) over the snapshot's own history. It is
// a pure function of s: it never writes into it, and the same snapshot
// always yields the same report. An error is a programming error
// (undeclared invariant or cause) or a nil snapshot.
func Detect(s *Snapshot) (*Report, error) {
	if s == nil {
		return nil, errors.New("recon: detect: nil snapshot")
	}
	return DetectHistory(context.Background(), s, newSnapshotHistory(s, 0))
}

// DetectHistory checks every invariant: the history's while it streams by
// (one pass in seq order; state per position key and per order id, plus
// the rows that drift), then the small tables of s. The report lists every
// finding up to s.MaxFindings. s's own history slices are not read: h is
// the history. A failure of h is wrapped in ErrHistory.
func DetectHistory(ctx context.Context, s *Snapshot, h History) (*Report, error) {
	r, _, err := DetectHistoryPaced(ctx, s, h, Pace{})
	return r, err
}

// DetectHistoryPaced is DetectHistory at pace (Pace: a share of one CPU;
// the zero Pace is unpaced), and what the pacing did. Pacing changes when
// the work is done, never what it finds: the same history gives the same
// report at any pace. Past ctx's deadline by its own estimate it stops with
// ErrPacedPastDeadline.
func DetectHistoryPaced(ctx context.Context, s *Snapshot, h History, pace Pace) (*Report, PaceStats, error) {
	if s == nil || h == nil {
		return nil, PaceStats{}, errors.New("recon: detect: nil snapshot or history")
	}
	e, err := newEngine(ctx, s, h)
	if err != nil {
		return nil, PaceStats{}, err
	}
	e.pace = newPacer(pace, h)
	r, err := e.detect()
	return r, e.pace.stats(), err
}

// detect runs the engine, then the checks of the small tables.
func (e *engine) detect() (*Report, error) {
	if err := e.run(); err != nil {
		return nil, err
	}
	d := e.d
	d.corr = correlate(d.s, d.counts, d.srcEvents)
	for i := range checks {
		if checks[i].run == nil {
			continue
		}
		d.cur = &checks[i]
		d.cur.run(d)
		if d.err != nil {
			return nil, d.err
		}
	}
	for i := range d.findings.es {
		d.finalCause(&d.findings.es[i].f, d.findings.es[i].absence)
		if f := &d.findings.es[i].f; !invariantByID[f.Invariant].allows(f.RootCause.Code) {
			return nil, fmt.Errorf("%w: invariant %q does not declare cause %q", errUndeclared, f.Invariant, f.RootCause.Code)
		}
	}
	return newReport(d.s, d.corr, &d.findings), nil
}
