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

// Package enginetest serves the reference matching engine's output as a
// source for the store's tests and benchmarks: a seeded workload, run in
// process, as a storetest.Ledger or as consecutive verified pages. It lives
// with the engine, not under internal/store: the store must not import the
// reference member (internal/arch).
package enginetest

import (
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

// streamSource serves consecutive pages of a seeded engine workload without
// keeping the whole history in memory (1M+ events).
type streamSource struct {
	eng    *engine.Engine
	w      *engine.Workload
	seq    int64
	digest string
	carry  []source.Event // a command that did not fit the previous page
	total  int
}

// next returns the next page of whole commands, at most max events, stopping
// once limit events have been served (the boundary is the last command).
func (s *streamSource) next(tb testing.TB, max, limit int) *source.Page {
	p := &source.Page{ProtocolVersion: 1, DescriptorHash: storetest.Descriptor, AfterSeq: s.seq, DigestAfter: s.digest}
	evs := s.carry
	s.carry = nil
	for s.total+len(evs) < limit {
		c := s.w.Next()
		c.Seq = s.eng.LastSeq() + 1
		out, err := s.eng.Apply(c)
		if err != nil {
			tb.Fatal(err)
		}
		if len(evs)+len(out) > max {
			for _, o := range out {
				s.carry = append(s.carry, source.Event{Seq: c.Seq, Wire: o.Wire})
			}
			p.ThroughSeq = c.Seq - 1
			break
		}
		for _, o := range out {
			evs = append(evs, source.Event{Seq: c.Seq, Wire: o.Wire})
		}
		p.ThroughSeq = c.Seq
	}
	if len(s.carry) == 0 && p.ThroughSeq == 0 {
		p.ThroughSeq = s.eng.LastSeq()
	}
	for _, e := range evs {
		s.digest = chain.Next(s.digest, e.Wire)
	}
	p.Events, p.DigestThrough, s.seq = evs, s.digest, p.ThroughSeq
	s.total += len(evs)
	p.BoundarySeq = p.ThroughSeq
	if len(s.carry) > 0 {
		p.BoundarySeq = s.eng.LastSeq()
	}
	return p
}

// StreamPages generates n events of a seeded engine workload (50 accounts,
// four instruments, with openings) as consecutive verified pages of the
// contract's maximum size, for benchmarks: a catch-up from genesis applies
// them in order.
func StreamPages(tb testing.TB, seed uint64, n int) []*source.Page {
	instr := []string{"ACME", "BOLT", "CRUX", "DUNE"}
	w, err := engine.NewWorkload(seed, engine.WorkloadConfig{Accounts: 50, Instruments: instr, Openings: true})
	if err != nil {
		tb.Fatal(err)
	}
	src := &streamSource{eng: engine.New(engine.Descriptor{EngineID: "bench", Scope: "b", Instruments: instr}), w: w, digest: chain.Genesis}
	var pages []*source.Page
	for total := 0; total < n; {
		p := src.next(tb, source.MaxPageEvents, n)
		if len(p.Events) == 0 {
			break
		}
		pages = append(pages, p)
		total += len(p.Events)
	}
	return pages
}

// Ledger runs the reference matching engine in process over a seeded
// workload (openings first) of n commands.
func Ledger(t testing.TB, seed uint64, n, accounts int) *storetest.Ledger {
	t.Helper()
	instr := []string{"ACME", "BOLT", "CRUX"}
	eng := engine.New(engine.Descriptor{EngineID: "e", Scope: "s", Instruments: instr})
	w, err := engine.NewWorkload(seed, engine.WorkloadConfig{Accounts: accounts, Instruments: instr, Openings: true})
	if err != nil {
		t.Fatal(err)
	}
	l := &storetest.Ledger{}
	for i := 1; i <= n; i++ {
		c := w.Next()
		c.Seq = int64(i)
		out, err := eng.Apply(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			l.Events = append(l.Events, source.Event{Seq: int64(i), Wire: o.Wire})
			l.Decoded = append(l.Decoded, o.Event)
		}
	}
	l.Boundary = int64(n)
	return l
}
