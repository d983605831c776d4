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
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/source"

	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
)

func rawGet(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// Beyond NFR-APR02: the cached, resumed replay answers every page with the
// same bytes as a replay from genesis, while B grows across terms between
// requests, and it replays from genesis once instead of once per page.
func TestCache_EveryPageByteIdenticalToFreshReplay(t *testing.T) {
	l := buildLog(t, 150, 60)
	cached := serve(t, l, HandlerOptions{})
	fresh := serve(t, l, HandlerOptions{DisableCache: true})
	w, _ := engine.NewWorkload(77, engine.WorkloadConfig{Instruments: desc.Instruments})
	m := maxCommandEvents(fullReplay(t, l)) + 8
	pages := 0
	for round := 0; round < 4; round++ {
		for a := int64(0); a <= l.Committed(); a += 7 {
			q := fmt.Sprintf("%s?afterSeq=%d&maxEvents=%d", source.CatchupPath, a, m)
			s1, b1 := rawGet(t, cached.srv.URL+q)
			s2, b2 := rawGet(t, fresh.srv.URL+q)
			if s1 != s2 || !bytes.Equal(b1, b2) {
				t.Fatalf("round %d afterSeq %d: cached %d %s\nfresh %d %s", round, a, s1, b1, s2, b2)
			}
			if s1 == 200 {
				pages++
			}
		}
		// trading continues, sometimes in a new recording term
		if round%2 == 1 {
			l.NewTerm()
		}
		for i := 0; i < 40; i++ {
			c, err := l.Append(w.Next())
			if err != nil {
				t.Fatal(err)
			}
			l.Commit(c.Seq)
		}
	}
	cs, fs := cached.h.Stats(), fresh.h.Stats()
	if cs.GenesisReplays != 1 || fs.GenesisReplays < int64(pages)/2 {
		t.Fatalf("cached %+v fresh %+v over %d pages", cs, fs, pages)
	}
	if lastB := l.Committed() - 40; cs.CommandsReplayed != lastB { // the last 40 were never asked for
		t.Fatalf("cache replayed %d commands for B=%d", cs.CommandsReplayed, lastB)
	}
}
