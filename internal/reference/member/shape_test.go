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
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sync"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/source"

	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
)

// The 200 body has the pinned key order and types; 409 bodies are exactly
// {"code","message","boundarySeq"}.
func TestContract_PinnedJSONShapes(t *testing.T) {
	l := buildLog(t, 20, 0)
	f := serve(t, l, HandlerOptions{})
	m := maxCommandEvents(fullReplay(t, l))
	s, b := rawGet(t, f.srv.URL+fmt.Sprintf("%s?afterSeq=0&maxEvents=%d", source.CatchupPath, m))
	page := regexp.MustCompile(`^\{"protocolVersion":1,"descriptorHash":"[0-9a-f]{64}","boundarySeq":20,"afterSeq":0,"throughSeq":[0-9]+,` +
		`"digestAfter":"0{64}","digestThrough":"[0-9a-f]{64}","idle":false,"events":\[\{"seq":1,"wire":"[A-Za-z0-9+/=]+"\}`)
	if s != 200 || !page.Match(b) {
		t.Fatalf("page shape: %d %.300s", s, b)
	}
	s, b = rawGet(t, f.srv.URL+source.CatchupPath+"?afterSeq=20&maxEvents=5")
	idle := regexp.MustCompile(`^\{"protocolVersion":1,"descriptorHash":"[0-9a-f]{64}","boundarySeq":20,"afterSeq":20,"throughSeq":20,"digestAfter":"","digestThrough":"","idle":true,"events":\[\]\}$`)
	if s != 200 || !idle.Match(b) {
		t.Fatalf("idle shape: %d %s", s, b)
	}
	s, b = rawGet(t, f.srv.URL+source.CatchupPath+"?afterSeq=21&maxEvents=5")
	var keys map[string]json.RawMessage
	json.Unmarshal(b, &keys)
	if s != 409 || len(keys) != 3 || string(keys["code"]) != `"AFTER_SEQ_BEYOND_BOUNDARY"` || string(keys["boundarySeq"]) != "20" || len(keys["message"]) < 3 {
		t.Fatalf("409 shape: %d %s", s, b)
	}
}

// FR-APR01 "applied means committed": appended but uncommitted commands are
// neither counted in B nor replayed.
func TestFRAPR01_AppliedMeansCommitted(t *testing.T) {
	l := buildLog(t, 50, 0)
	w, _ := engine.NewWorkload(4, engine.WorkloadConfig{Instruments: desc.Instruments})
	for i := 0; i < 9; i++ {
		l.Append(w.Next())
	}
	f := serve(t, l, HandlerOptions{})
	pages := catchUp(t, f.client, 0, genesis, source.MaxPageEvents)
	last := pages[len(pages)-1]
	if last.BoundarySeq != 50 || last.ThroughSeq != 50 || f.h.Stats().CommandsReplayed != 50 {
		t.Fatalf("boundary %d through %d replayed %d with 59 appended, 50 committed", last.BoundarySeq, last.ThroughSeq, f.h.Stats().CommandsReplayed)
	}
}

// FR-APR03 coordinates: the descriptor hash is the log's, and a consumer
// holding a cursor of another source (different scope) is refused.
func TestFRAPR03_DescriptorHashIdentifiesSource(t *testing.T) {
	l := buildLog(t, 10, 0)
	f := serve(t, l, HandlerOptions{})
	p, err := f.client.Fetch(context.Background(), 0, genesis, "", 100)
	if err != nil || p.DescriptorHash != desc.Hash() || f.h.DescriptorHash() != desc.Hash() {
		t.Fatalf("descriptor %s want %s (%v)", p.DescriptorHash, desc.Hash(), err)
	}
	other := engine.TestDescriptor("scope-b").Hash()
	if _, err := f.client.Fetch(context.Background(), 0, genesis, other, 100); verificationCode(err) != source.VerifyDescriptorMismatch {
		t.Fatalf("other descriptor: %v", err)
	}
}

// Concurrent consumers while trading continues (run with -race): every one
// converges on the same chain as a fresh replay.
func TestFRAPR01_ConcurrentCatchUpsWhileTrading(t *testing.T) {
	l := buildLog(t, 100, 0)
	w, _ := engine.NewWorkload(12, engine.WorkloadConfig{Instruments: desc.Instruments})
	mem, err := NewMember(MemberConfig{Log: l, Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	f := serve(t, l, HandlerOptions{})
	m := maxCommandEvents(fullReplay(t, l)) + 20
	stop := make(chan struct{})
	var trading sync.WaitGroup
	trading.Add(1)
	go func() {
		defer trading.Done()
		for i := 0; i < 150; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, err := mem.Step(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	type end struct {
		seq    int64
		digest string
	}
	ends := make([]end, 4)
	var wg sync.WaitGroup
	for i := range ends {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			a, d := int64(0), genesis
			for k := 0; k < 100; k++ {
				p, err := f.client.Fetch(context.Background(), a, d, desc.Hash(), m)
				if err != nil {
					t.Error(err)
					return
				}
				a, d = p.ThroughSeq, p.DigestThrough
			}
			ends[i] = end{a, d}
		}(i)
	}
	wg.Wait()
	close(stop)
	trading.Wait()
	for i, e := range ends {
		r, err := engine.ReplayAll(l.Dir(), e.seq)
		if err != nil {
			t.Fatal(err)
		}
		if e.seq == 0 || r.Digest(e.seq) != e.digest {
			t.Fatalf("consumer %d ended at %d with a digest a fresh replay does not give", i, e.seq)
		}
	}
}
