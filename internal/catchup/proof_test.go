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

package catchup

import (
	"context"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// TestProofDue: an idle answer certifies a cursor without a proof only when
// the cursor is CURRENT and this manager saw this member prove this very
// cursor less than the period ago, with nothing seen since (FR-APR04).
func TestProofDue(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	d := chain.Next(chain.Genesis, []byte("x"))
	cl, other := &source.Client{}, &source.Client{}
	cur := store.Cursor{Exists: true, VerifiedThroughSeq: 40, ChainDigest: d, State: store.StateCurrent}
	proven := proofEntry{client: cl, seq: 40, digest: d, at: now.Add(-time.Minute)}
	for _, tc := range []struct {
		name  string
		cur   func(*store.Cursor)
		entry func(*proofEntry)
		known bool
		cl    *source.Client
		due   string // a substring of the reason; "" = not due
	}{
		{"proven a minute ago", nil, nil, true, cl, ""},
		{"genesis needs no proof", func(c *store.Cursor) { *c = store.Genesis("s") }, nil, false, cl, ""},
		{"a RETRYING cursor (a member seen behind, by any manager)", func(c *store.Cursor) {
			c.State, c.BlockedReason = store.StateRetrying, string(codes.SourceUnavailable)
		}, nil, true, cl, "RETRYING SOURCE_UNAVAILABLE, not CURRENT"},
		{"a BLOCKED cursor", func(c *store.Cursor) { c.State, c.BlockedReason = store.StateBlocked, string(codes.HistoryRewritten) }, nil, true, cl, "BLOCKED HISTORY_REWRITTEN"},
		{"a CATCHING_UP cursor", func(c *store.Cursor) { c.State = store.StateCatchingUp }, nil, true, cl, "CATCHING_UP"},
		{"this manager saw the member behind since", nil, func(e *proofEntry) { e.owed = "its boundary 20 was seen behind" }, true, cl, "seen behind"},
		{"never proven by this manager (a restart, a second manager)", nil, nil, false, cl, "has not seen"},
		{"proven by another member (the source changed)", nil, nil, true, other, "has not seen"},
		{"proven at another sequence", nil, func(e *proofEntry) { e.seq = 30 }, true, cl, "sequence 30, not 40"},
		{"proven at another digest (a cursor reset)", nil, func(e *proofEntry) { e.digest = chain.Genesis }, true, cl, "sequence 40, not 40"},
		{"proven just under the period ago", nil, func(e *proofEntry) { e.at = now.Add(-DefaultProofPeriod + time.Nanosecond) }, true, cl, ""},
		{"proven the period ago", nil, func(e *proofEntry) { e.at = now.Add(-DefaultProofPeriod) }, true, cl, "older than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, e := cur, proven
			if tc.cur != nil {
				tc.cur(&c)
			}
			if tc.entry != nil {
				tc.entry(&e)
			}
			got := proofDue(c, e, tc.known, tc.cl, now, DefaultProofPeriod)
			if (tc.due == "") != (got == "") || !strings.Contains(got, tc.due) {
				t.Fatalf("proofDue = %q, want %q", got, tc.due)
			}
		})
	}
}

// proofWorld runs a fixture's cycles as one manager (its own lease owner
// and proof ledger) on a fake clock.
type proofWorld struct {
	f     *fixture
	cl    *source.Client
	clock *clocktesting.FakeClock
}

func newProofWorld(t *testing.T, scope string, commands int) *proofWorld {
	t.Helper()
	f := newFixture(t, scope, commands)
	cl, err := source.NewClient(source.ClientConfig{BaseURL: f.url, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &proofWorld{f: f, cl: cl, clock: clocktesting.NewFakeClock(time.Now())}
}

// manager is one manager of the scope: a lease owner and its proof ledger.
type manager struct {
	w        *proofWorld
	owner    string
	proofs   *ProofLedger
	readOnly bool // auto-recovery off: reports, writes nothing
}

func (w *proofWorld) manager(owner string) *manager {
	return &manager{w: w, owner: owner, proofs: NewProofLedger()}
}

type proofConnector struct {
	cl *source.Client
	st *store.Store
}

func (c proofConnector) Client() (*source.Client, error)             { return c.cl, nil }
func (c proofConnector) Store(context.Context) (*store.Store, error) { return c.st, nil }
func (proofConnector) SchemaLost()                                   {}

// cycle runs one cycle and returns its result and the SQL cursor after it.
func (m *manager) cycle(t *testing.T) (Result, store.Cursor) {
	t.Helper()
	w := m.w
	e := &Engine{Clock: w.clock, AutoRecovery: !m.readOnly, Owner: m.owner, Proofs: m.proofs, Counters: counters{}}
	res := e.Run(context.Background(), Cycle{Resource: "ns/" + w.f.scope, Scope: w.f.scope, LeaseOwner: m.owner,
		Limits:    Limits{PageSize: 16, PagesPerCycle: 100, CycleTimeout: 30 * time.Second, RequestTimeout: 10 * time.Second, LeaseDuration: 10 * time.Second},
		Connector: proofConnector{cl: w.cl, st: w.f.store}})
	cur, err := w.f.store.ReadCursor(context.Background(), w.f.scope)
	if err != nil {
		t.Fatal(err)
	}
	return res, cur
}

// current runs cycles until the scope is CURRENT through boundary.
func (m *manager) current(t *testing.T, boundary int64) store.Cursor {
	t.Helper()
	for i := 0; i < 10; i++ {
		res, cur := m.cycle(t)
		if res.State == StateCurrent && cur.VerifiedThroughSeq == boundary {
			return cur
		}
		if res.State != StateCatchingUp {
			t.Fatalf("cycle %d: %s %s: %s", i, res.State, res.Reason, res.Message)
		}
	}
	t.Fatal("not CURRENT after 10 cycles")
	return store.Cursor{}
}

// want asserts a cycle's state and reason, and the SQL cursor's.
func want(t *testing.T, what string, res Result, cur store.Cursor, state State, reason codes.Code) {
	t.Helper()
	if res.State != state || res.Reason != string(reason) {
		t.Fatalf("%s: %s %s (%s), want %s %s", what, res.State, res.Reason, res.Message, state, reason)
	}
	if cur.State != string(state) || cur.BlockedReason != string(reason) {
		t.Fatalf("%s: the SQL cursor says %s %q, want %s %q", what, cur.State, cur.BlockedReason, state, reason)
	}
}

// rewritten is the clock of a member that re-trades its seeded commands
// stamped with another time: the same sequences, another history.
var rewritten = time.Date(2026, 12, 5, 17, 0, 0, 0, time.UTC)

// TestFRAPR04_IdleAnswerOverARewrittenHistoryIsNeverCurrent: a member
// restarted over an empty log that trades another history back to exactly
// the verified sequence answers idle there; the scope is never CURRENT on
// that answer, whichever manager probes (the one that saw the member behind,
// or another whose own proof of the cursor is fresh: the cursor records
// what was seen), and it refuses HISTORY_REWRITTEN, not a transient code.
// With its own history restored, the member proves the chain and the scope
// is CURRENT again.
func TestFRAPR04_IdleAnswerOverARewrittenHistoryIsNeverCurrent(t *testing.T) {
	w := newProofWorld(t, "rewritten", 40)
	a, b := w.manager("manager-a"), w.manager("manager-b")
	verified := a.current(t, w.f.boundary())
	if res, _ := b.cycle(t); res.State != StateCurrent {
		t.Fatalf("the second manager: %s %s: %s", res.State, res.Reason, res.Message)
	}

	h := newHistory(t, w.f.scope, rewritten)
	h.trade(t, 20)
	w.f.restart(h.log)
	res, cur := a.cycle(t)
	want(t, "a member behind the cursor", res, cur, StateRetrying, codes.SourceUnavailable)
	if !strings.Contains(res.Message, "proven before the scope is CURRENT again") {
		t.Fatalf("the message does not say a proof is pending: %s", res.Message)
	}

	h.trade(t, verified.VerifiedThroughSeq)
	// b proved this cursor a moment ago, but the cursor says RETRYING.
	res, cur = b.cycle(t)
	want(t, "back at the verified sequence with another history", res, cur, StateBlocked, codes.HistoryRewritten)
	for _, m := range []*manager{a, b, w.manager("manager-c")} {
		res, cur = m.cycle(t)
		want(t, m.owner+" again", res, cur, StateBlocked, codes.HistoryRewritten)
	}
	if cur.VerifiedThroughSeq != verified.VerifiedThroughSeq || cur.ChainDigest != verified.ChainDigest {
		t.Fatalf("the cursor moved: %d %s", cur.VerifiedThroughSeq, cur.ChainDigest)
	}

	w.f.restart(w.f.log) // the member's own log is back
	res, cur = a.cycle(t)
	want(t, "the member's own history restored", res, cur, StateCurrent, "")
}

// TestFRAPR04_MemberBehindThenBackWithItsHistoryIsCurrent: a member that
// restarted and trades its own history again (a lagging or restored
// replica) is RETRYING while behind, and CURRENT once back at the verified
// sequence, after proving its chain there (one replay from genesis on the
// restarted member), never refused.
func TestFRAPR04_MemberBehindThenBackWithItsHistoryIsCurrent(t *testing.T) {
	w := newProofWorld(t, "behind-same", 40)
	a := w.manager("manager-a")
	verified := a.current(t, w.f.boundary())

	h := newHistory(t, w.f.scope, time.Time{})
	h.trade(t, 25)
	member := w.f.restart(h.log)
	res, cur := a.cycle(t)
	want(t, "behind", res, cur, StateRetrying, codes.SourceUnavailable)

	h.trade(t, verified.VerifiedThroughSeq)
	res, cur = a.cycle(t)
	want(t, "back with the same history", res, cur, StateCurrent, "")
	if st := member.Stats(); st.GenesisReplays != 1 {
		t.Fatalf("the member replayed from genesis %d times, want 1 (the proof page)", st.GenesisReplays)
	}
	// Proven: the next idle answers certify on their own.
	res, cur = a.cycle(t)
	want(t, "idle after the proof", res, cur, StateCurrent, "")
	if st := member.Stats(); st.GenesisReplays != 1 || st.Resumes != 0 {
		t.Fatalf("an idle cycle after the proof asked for a page: %+v", st)
	}

	// And it goes on from there: pages past the cursor prove it as before.
	h.trade(t, verified.VerifiedThroughSeq+10)
	a.current(t, verified.VerifiedThroughSeq+10)
}

// TestFRAPR04_RewriteBetweenTwoProbesIsCaught: a member that came back
// over another history exactly at the verified sequence between two probes
// (never seen behind) is caught by the first probe of a manager that has
// not seen it prove the cursor (a restart, a second manager, a read-only
// one), and by the manager that has once its proof is older than the proof
// period.
func TestFRAPR04_RewriteBetweenTwoProbesIsCaught(t *testing.T) {
	w := newProofWorld(t, "between", 40)
	a := w.manager("manager-a")
	verified := a.current(t, w.f.boundary())

	h := newHistory(t, w.f.scope, rewritten)
	h.trade(t, verified.VerifiedThroughSeq)
	w.f.restart(h.log)

	// A read-only manager (auto-recovery off) refuses too, and writes nothing.
	ro := w.manager("manager-read-only")
	ro.readOnly = true
	res, cur := ro.cycle(t)
	if res.State != StateBlocked || res.Reason != string(codes.HistoryRewritten) || cur.State != store.StateCurrent {
		t.Fatalf("read-only: %s %s (%s), the SQL cursor %s: want BLOCKED HISTORY_REWRITTEN, the cursor untouched", res.State, res.Reason, res.Message, cur.State)
	}
	// The same lease identity, a new process: its ledger is empty.
	res, cur = w.manager("manager-a").cycle(t)
	want(t, "a restarted manager's first probe", res, cur, StateBlocked, codes.HistoryRewritten)

	w.f.restart(w.f.log)
	if res, cur = a.cycle(t); res.State != StateCurrent || cur.State != store.StateCurrent {
		t.Fatalf("the own history restored: %s %s: %s", res.State, res.Reason, res.Message)
	}
	w.f.restart(h.log)
	w.clock.Step(DefaultProofPeriod)
	res, cur = a.cycle(t)
	want(t, "the proof period past", res, cur, StateBlocked, codes.HistoryRewritten)
}
