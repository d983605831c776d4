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

package member

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/source"

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// racingLog commits more commands right after the handler reads B, as if
// trading continued while the replay runs.
type racingLog struct {
	*engine.Log
	w     *engine.Workload
	extra int
}

func (r *racingLog) Committed() int64 {
	b := r.Log.Committed()
	for i := 0; i < r.extra; i++ {
		c, err := r.Log.Append(r.w.Next())
		if err != nil {
			panic(err)
		}
		if err := r.Log.Commit(c.Seq); err != nil {
			panic(err)
		}
	}
	return b
}

func TestFRAPR01_BoundaryCapturedBeforeReplayLaterOutputsIgnored(t *testing.T) {
	l := buildLog(t, 100, 0)
	w, _ := engine.NewWorkload(9, engine.WorkloadConfig{Instruments: desc.Instruments})
	f := serve(t, &racingLog{Log: l, w: w, extra: 7}, HandlerOptions{})
	p, err := f.client.Fetch(context.Background(), 0, genesis, desc.Hash(), source.MaxPageEvents)
	if err != nil {
		t.Fatal(err)
	}
	if p.BoundarySeq != 100 || p.ThroughSeq != 100 || l.Committed() != 107 {
		t.Fatalf("boundary %d through %d (committed now %d), want 100/100/107", p.BoundarySeq, p.ThroughSeq, l.Committed())
	}
	for _, e := range p.Events {
		if e.Seq > 100 {
			t.Fatalf("event of seq %d after B served", e.Seq)
		}
	}
	if f.h.Stats().CommandsReplayed != 100 {
		t.Fatalf("replayed %d commands, want exactly B=100", f.h.Stats().CommandsReplayed)
	}
	// Appended but not committed (not applied): never served.
	for i := 0; i < 5; i++ {
		l.Append(w.Next())
	}
	f2 := serve(t, l, HandlerOptions{})
	p2, err := f2.client.Fetch(context.Background(), p.ThroughSeq, p.DigestThrough, desc.Hash(), source.MaxPageEvents)
	if err != nil {
		t.Fatal(err)
	}
	if p2.BoundarySeq != 107 || p2.ThroughSeq != 107 || l.LastSeq() != 112 {
		t.Fatalf("second page boundary %d through %d", p2.BoundarySeq, p2.ThroughSeq)
	}
}

// Trading continues while a consumer catches up; the chain it ends with
// equals a fresh replay's.
func TestFRAPR01_TradingContinuesDuringCatchUp(t *testing.T) {
	l := buildLog(t, 200, 0)
	w, _ := engine.NewWorkload(10, engine.WorkloadConfig{Instruments: desc.Instruments})
	m, err := NewMember(MemberConfig{Log: l, Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	f := serve(t, l, HandlerOptions{})
	a, d := int64(0), genesis
	for i := 0; i < 400; i++ {
		p, err := f.client.Fetch(context.Background(), a, d, desc.Hash(), 25)
		if err != nil {
			t.Fatal(err)
		}
		a, d = p.ThroughSeq, p.DigestThrough
		if i < 100 {
			if _, _, err := m.Step(); err != nil {
				t.Fatal(err)
			}
		} else if p.Idle {
			break
		}
	}
	if a != l.Committed() || d != fullReplay(t, l).Digest(a) {
		t.Fatalf("ended at %d (committed %d) with a different digest", a, l.Committed())
	}
}

func TestFRAPR02_WholeCommandsOnly(t *testing.T) {
	l := buildLog(t, 300, 100)
	full := fullReplay(t, l)
	f := serve(t, l, HandlerOptions{})
	for _, tc := range []struct {
		name string
		m    int
	}{
		{"maxEvents equals the largest command", maxCommandEvents(full)},
		{"maxEvents one above the largest command", maxCommandEvents(full) + 1},
		{"maxEvents fits two largest commands and a bit", 2*maxCommandEvents(full) + 3},
		{"maxEvents 100", 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			for _, p := range catchUp(t, f.client, 0, genesis, m) {
				if p.Idle {
					continue
				}
				want := full.Events(p.AfterSeq, p.ThroughSeq)
				if len(p.Events) != len(want) || len(p.Events) > m {
					t.Fatalf("m=%d page (%d,%d]: %d events, the commands hold %d", m, p.AfterSeq, p.ThroughSeq, len(p.Events), len(want))
				}
				// maximal: the next command would not have fitted
				if p.ThroughSeq < p.BoundarySeq && len(full.Events(p.AfterSeq, p.ThroughSeq+1)) <= m {
					t.Fatalf("m=%d page (%d,%d] stops early", m, p.AfterSeq, p.ThroughSeq)
				}
			}
		})
	}
}

// The page carries the exact bytes the live feed published.
func TestFRAPR02_ExactProductionWireBytes(t *testing.T) {
	l, err := engine.Create(t.TempDir(), desc, engine.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := engine.NewWorkload(3, engine.WorkloadConfig{Instruments: desc.Instruments, Openings: true})
	pub := &capture{}
	m, err := NewMember(MemberConfig{Log: l, Workload: w, Publisher: pub})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 150; i++ {
		if _, _, err := m.Step(); err != nil {
			t.Fatal(err)
		}
	}
	f := serve(t, l, HandlerOptions{})
	var served [][]byte
	for _, p := range catchUp(t, f.client, 0, genesis, 40) {
		for _, e := range p.Events {
			served = append(served, e.Wire)
		}
	}
	if len(served) != len(pub.msgs) || len(served) == 0 {
		t.Fatalf("served %d events, published %d", len(served), len(pub.msgs))
	}
	for i := range served {
		if !bytes.Equal(served[i], pub.msgs[i]) {
			t.Fatalf("event %d:\nfeed %s\npage %s", i, pub.msgs[i], served[i])
		}
	}
	if pub.subject != "projection.events.scope-a" {
		t.Fatalf("subject %q", pub.subject)
	}
}

type capture struct {
	subject string
	msgs    [][]byte
}

func (c *capture) Publish(s string, b []byte) error {
	c.subject = s
	c.msgs = append(c.msgs, append([]byte(nil), b...))
	return nil
}

func TestFRAPR02_ThroughSeqCoversZeroOutputCommands(t *testing.T) {
	l := buildLog(t, 50, 0)
	ts := time.Date(2026, 5, 1, 0, 0, 0, 1, time.UTC)
	for i := 0; i < 6; i++ { // heartbeats and a cancel of an unknown order: zero outputs
		k := engine.Command{Kind: engine.KindHeartbeat, TS: ts}
		if i%2 == 1 {
			k = engine.Command{Kind: engine.KindCancel, OrderID: "nope", TS: ts}
		}
		if _, err := l.Append(k); err != nil {
			t.Fatal(err)
		}
	}
	l.Commit(56)
	f := serve(t, l, HandlerOptions{})
	p, err := f.client.Fetch(context.Background(), 50, fullReplay(t, l).Digest(50), desc.Hash(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if p.Idle || p.ThroughSeq != 56 || len(p.Events) != 0 || p.DigestThrough != p.DigestAfter {
		t.Fatalf("zero-output page: idle=%v through=%d events=%d", p.Idle, p.ThroughSeq, len(p.Events))
	}
}

// One command sweeping many resting orders emits 1 + 3k events.
func sweepLog(t *testing.T, k int) *engine.Log {
	l, err := engine.Create(t.TempDir(), desc, engine.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < k; i++ {
		_, err := l.Append(engine.Command{Kind: engine.KindPlace, TS: ts, Account: "maker", Instrument: "BTC-USD",
			OrderID: "ask-" + string(rune('a'+i)), Side: wire.SideSell, Price: decimal.NewFromInt(100), Quantity: decimal.NewFromInt(1)})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Append(engine.Command{Kind: engine.KindPlace, TS: ts, Account: "taker", Instrument: "BTC-USD",
		OrderID: "sweep", Side: wire.SideBuy, Price: decimal.NewFromInt(100), Quantity: decimal.NewFromInt(int64(k))}); err != nil {
		t.Fatal(err)
	}
	l.Commit(l.LastSeq())
	return l
}

func TestRefusal_RECOVERY_COMMAND_EXCEEDS_PAGE(t *testing.T) {
	l := sweepLog(t, 5) // seq 6 emits 16 events
	f := serve(t, l, HandlerOptions{})
	p, err := f.client.Fetch(context.Background(), 0, genesis, desc.Hash(), 15)
	if err != nil || p.ThroughSeq != 5 {
		t.Fatalf("first page: %v through %d", err, p.ThroughSeq)
	}
	_, err = f.client.Fetch(context.Background(), 5, p.DigestThrough, desc.Hash(), 15)
	if code := refusalCode(t, err); code != source.CodeCommandExceedsPage {
		t.Fatalf("code %s", code)
	}
	if source.IsTransient(err) {
		t.Fatal("EXCEEDS_PAGE must not be transient")
	}
	p, err = f.client.Fetch(context.Background(), 5, p.DigestThrough, desc.Hash(), 16)
	if err != nil || p.ThroughSeq != 6 || len(p.Events) != 16 {
		t.Fatalf("exact fit: %v", err)
	}
}

func TestFRAPR03_PageDigestsMatchIndependentChain(t *testing.T) {
	l := buildLog(t, 120, 40)
	full := fullReplay(t, l)
	// Independent chain over every event from genesis.
	d := chain.Genesis
	digestAt := map[int64]string{0: d}
	evs := full.Events(0, 120)
	for i, e := range evs {
		d = chain.Next(d, e.Wire)
		if i == len(evs)-1 || evs[i+1].Seq != e.Seq {
			digestAt[e.Seq] = d
		}
	}
	f := serve(t, l, HandlerOptions{})
	for _, p := range catchUp(t, f.client, 0, genesis, maxCommandEvents(full)) {
		if p.Idle {
			continue
		}
		if want, ok := digestAt[p.ThroughSeq]; ok && p.DigestThrough != want {
			t.Fatalf("digestThrough at %d differs from the independent chain", p.ThroughSeq)
		}
	}
	if full.Digest(120) != d {
		t.Fatal("final digest differs")
	}
}

func trimFirstSegment(t *testing.T, l *engine.Log) {
	m, _ := filepath.Glob(filepath.Join(l.Dir(), "segment-*"))
	sort.Strings(m)
	if err := os.Remove(m[0]); err != nil {
		t.Fatal(err)
	}
}

func TestRefusal_MISSING_GENESIS(t *testing.T) {
	l := buildLog(t, 90, 30)
	f := serve(t, l, HandlerOptions{})
	p, err := f.client.Fetch(context.Background(), 0, genesis, desc.Hash(), 10) // warms the cache
	if err != nil {
		t.Fatal(err)
	}
	trimFirstSegment(t, l)
	_, err = f.client.Fetch(context.Background(), p.ThroughSeq, p.DigestThrough, desc.Hash(), 10)
	if code := refusalCode(t, err); code != source.CodeMissingGenesis {
		t.Fatalf("code %s: the cache must not mask a trimmed archive", code)
	}
}

func TestRefusal_DISCONTINUITY(t *testing.T) {
	l := buildLog(t, 90, 30)
	m, _ := filepath.Glob(filepath.Join(l.Dir(), "segment-*"))
	sort.Strings(m)
	os.Remove(m[1])
	f := serve(t, l, HandlerOptions{})
	_, err := f.client.Fetch(context.Background(), 0, genesis, desc.Hash(), 10)
	if code := refusalCode(t, err); code != source.CodeDiscontinuity {
		t.Fatalf("code %s", code)
	}
}

func TestRefusal_ARCHIVE_BEHIND_BOUNDARY(t *testing.T) {
	l := buildLog(t, 60, 0)
	m, _ := filepath.Glob(filepath.Join(l.Dir(), "segment-*"))
	b, _ := os.ReadFile(m[0])
	lines := bytes.SplitAfter(b, []byte("\n"))
	os.WriteFile(m[0], bytes.Join(lines[:41], nil), 0o644) // seq 1..40 retained, B = 60
	f := serve(t, l, HandlerOptions{})
	_, err := f.client.Fetch(context.Background(), 0, genesis, desc.Hash(), 10)
	var re *source.RefusalError
	if code := refusalCode(t, err); code != source.CodeArchiveBehindBoundary {
		t.Fatalf("code %s", code)
	}
	if errorsAs(err, &re); re.BoundarySeq != 60 || re.Status != 409 {
		t.Fatalf("refusal %+v", re)
	}
}

func TestFRAPR04_IdleWithoutReplay(t *testing.T) {
	l := buildLog(t, 40, 0)
	f := serve(t, l, HandlerOptions{DisableCache: true})
	pages := catchUp(t, f.client, 0, genesis, source.MaxPageEvents)
	last := pages[len(pages)-2]
	before := f.h.Stats()
	for i := 0; i < 3; i++ {
		p, err := f.client.Fetch(context.Background(), 40, last.DigestThrough, desc.Hash(), 5)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Idle || p.ThroughSeq != 40 || p.AfterSeq != 40 || p.BoundarySeq != 40 || len(p.Events) != 0 {
			t.Fatalf("idle page %+v", p)
		}
	}
	if after := f.h.Stats(); after != before {
		t.Fatalf("idle answers replayed: %+v → %+v", before, after)
	}
	// Genesis of an empty log is idle too.
	empty, _ := engine.Create(t.TempDir(), desc, engine.LogOptions{})
	f2 := serve(t, empty, HandlerOptions{})
	p, err := f2.client.Fetch(context.Background(), 0, genesis, desc.Hash(), 5)
	if err != nil || !p.Idle || f2.h.Stats().GenesisReplays != 0 {
		t.Fatalf("empty log: %v %+v", err, p)
	}
}

func TestRefusal_AFTER_SEQ_BEYOND_BOUNDARY(t *testing.T) {
	l := buildLog(t, 40, 0)
	f := serve(t, l, HandlerOptions{})
	_, err := f.client.Fetch(context.Background(), 41, fullReplay(t, l).Digest(40), desc.Hash(), 5)
	if code := refusalCode(t, err); code != source.CodeAfterSeqBeyondBoundary {
		t.Fatalf("code %s", code)
	}
	if !source.IsTransient(err) || f.h.Stats().GenesisReplays != 0 {
		t.Fatal("AFTER_SEQ_BEYOND_BOUNDARY: want transient, no replay")
	}
}

func TestMember_BadRequestParameters(t *testing.T) {
	l := buildLog(t, 10, 0)
	f := serve(t, l, HandlerOptions{})
	for _, q := range []string{
		"", "afterSeq=0", "maxEvents=5", "afterSeq=-1&maxEvents=5", "afterSeq=0&maxEvents=-5",
		"afterSeq=x&maxEvents=5", "afterSeq=0&maxEvents=0", "afterSeq=0&maxEvents=10001",
		"afterSeq=1.5&maxEvents=5", "afterSeq=0&afterSeq=1&maxEvents=5", "afterSeq=%zz&maxEvents=5",
		"afterSeq=+1&maxEvents=5", "afterSeq=99999999999999999999&maxEvents=5", "afterSeq=&maxEvents=5",
	} {
		t.Run("query ?"+q, func(t *testing.T) {
			resp, err := http.Get(f.srv.URL + source.CatchupPath + "?" + q)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var rb source.RefusalBody
			if resp.StatusCode != 400 || json.Unmarshal(body, &rb) != nil || rb.Code != source.CodeBadRequest || rb.Message == "" {
				t.Errorf("%q: %d %s", q, resp.StatusCode, body)
			}
		})
	}
	if f.h.Stats().GenesisReplays != 0 {
		t.Fatal("a bad request replayed")
	}
	resp, err := http.Post(f.srv.URL+source.CatchupPath+"?afterSeq=0&maxEvents=5", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	// An unread, unclosed body keeps the client's connection goroutines
	// waiting for it forever (goleak in TestMain reports them).
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
}

func TestMember_BearerToken(t *testing.T) {
	l := buildLog(t, 10, 0)
	f := serve(t, l, HandlerOptions{Token: "s3cret"})
	if _, err := f.client.Fetch(context.Background(), 0, genesis, desc.Hash(), 5); err != nil {
		t.Fatal(err)
	}
	anon, _ := source.NewClient(source.ClientConfig{BaseURL: f.srv.URL, Token: "wrong"})
	_, err := anon.Fetch(context.Background(), 0, genesis, desc.Hash(), 5)
	var re *source.RefusalError
	if !errorsAs(err, &re) || re.Status != 401 || re.Code != source.CodeUnauthorized || source.IsTransient(err) {
		t.Fatalf("wrong token: %v", err)
	}
}

func TestMember_DescriptorEndpoint(t *testing.T) {
	l := buildLog(t, 10, 0)
	f := serve(t, l, HandlerOptions{})
	resp, err := http.Get(f.srv.URL + source.DescriptorPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	want := `{"descriptorHash":"` + desc.Hash() + `","protocolVersion":1,"boundarySeq":10}`
	if strings.TrimSpace(string(b)) != want {
		t.Fatalf("got %s want %s", b, want)
	}
}
