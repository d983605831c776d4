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

package reconstore

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// aheadSpy is the provider's history, noting whether it ever read ahead:
// a page in flight after NextPage, a FETCH running after RowsThrough.
type aheadSpy struct {
	*history
	pageAhead, fillAhead bool
}

func (s *aheadSpy) NextPage(ctx context.Context) (*recon.SourcePage, error) {
	p, err := s.history.NextPage(ctx)
	s.pageAhead = s.pageAhead || s.ahead != nil
	return p, err
}

func (s *aheadSpy) RowsThrough(ctx context.Context, through int64) (recon.HistoryRows, error) {
	r, err := s.history.RowsThrough(ctx, through)
	s.fillAhead = s.fillAhead || s.filling != nil
	return r, err
}

// A paced detection on real parts (the provider's history over PostgreSQL,
// the member over HTTP, real sleeps at half a CPU) reports and plans
// exactly what the unpaced one does while drift accumulates on one world,
// in pages small enough to put a row and its event on different pages. It
// reads serially (no page, no FETCH ahead: its busy time is all its work)
// and sleeps; the unpaced one reads ahead.
func TestProviderHistory_PacedMatchesUnpaced(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "paced", 300, worldOpts{catchUp: true})
	now := time.Now()
	p := w.provider(16)
	p.Clock = func() time.Time { return now }
	detect := func(name string, pace recon.Pace) ([]byte, *aheadSpy, recon.PaceStats) {
		s, h, release, err := p.Open(ctxb, w.scope)
		if err != nil {
			t.Fatalf("%s: open: %v", name, err)
		}
		defer release()
		spy := &aheadSpy{history: h.(*history)}
		var st recon.PaceStats
		out := reportAndPlan(t, s, func() (*recon.Report, error) {
			r, ps, err := recon.DetectHistoryPaced(ctxb, s, spy, pace)
			st = ps
			return r, err
		})
		return out, spy, st
	}
	for _, b := range historyBreaks() {
		if b.sql != "" {
			w.exec(b.sql, w.scope)
		}
		want, unpaced, _ := detect(b.name, recon.Pace{})
		got, paced, st := detect(b.name, recon.Pace{Share: 0.5})
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: the paced detection differs from the unpaced one:\ngot  %s\nwant %s", b.name, got, want)
		}
		if !unpaced.pageAhead {
			t.Fatalf("%s: the unpaced detection never read a page ahead: the spy sees nothing", b.name)
		}
		if paced.pageAhead || paced.fillAhead {
			t.Fatalf("%s: the paced detection read ahead (page %v, rows %v): its busy time misses that work", b.name, paced.pageAhead, paced.fillAhead)
		}
		if st.Pages < 10 || st.Slept <= 0 || st.Busy <= 0 || st.Share != 0.5 {
			t.Fatalf("%s: pacing %+v, want sleeps over every page", b.name, st)
		}
		if b.sql != "" && bytes.Contains(want, []byte(`"findings": []`)) {
			t.Fatalf("%s: no finding: the break did not break", b.name)
		}
	}
	// A paced read of the default page size asks for smaller pages.
	_, h, release, err := w.provider(0).Open(ctxb, w.scope)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	hh := h.(*history)
	if hh.ReadSerially(); hh.lim.page != pacedPageEvents {
		t.Fatalf("a paced read asks for pages of %d events, want %d", hh.lim.page, pacedPageEvents)
	}
}
