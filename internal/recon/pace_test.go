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
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeClock is the pacer's injected clock: Sleep advances it by what was
// asked plus over (a timer that fires late), and records each sleep.
type fakeClock struct {
	now    time.Time
	over   time.Duration
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d + c.over)
	return nil
}

func (c *fakeClock) pace(share float64) Pace { return Pace{Share: share, Now: c.Now, Sleep: c.Sleep} }

// busyHistory is a snapshot's history whose every page costs busy on the
// fake clock (the detection's work between two yields).
type busyHistory struct {
	*snapshotHistory
	clock  *fakeClock
	busy   time.Duration
	serial bool
	pages  int
}

func (h *busyHistory) NextPage(ctx context.Context) (*SourcePage, error) {
	p, err := h.snapshotHistory.NextPage(ctx)
	if p != nil {
		h.clock.now = h.clock.now.Add(h.busy)
		h.pages++
	}
	return p, err
}

func (h *busyHistory) ReadSerially() { h.serial = true }

// pacedWorld is fixture(200) in pages of 10 seqs (about 20 pages).
func pacedWorld(clock *fakeClock, busy time.Duration) (*Snapshot, *busyHistory) {
	s := fixture(200)
	return s, &busyHistory{snapshotHistory: newSnapshotHistory(s, 10), clock: clock, busy: busy}
}

func TestPace_DutyCycle(t *testing.T) {
	for _, tc := range []struct {
		name  string
		share float64
		busy  time.Duration // per page
		over  time.Duration // each sleep overruns by this much
		// want: the first sleep (0: none) and whether every page sleeps
		first    time.Duration
		eachPage bool
	}{
		{name: "half a CPU sleeps what it worked", share: 0.5, busy: 100 * time.Millisecond, first: 100 * time.Millisecond, eachPage: true},
		{name: "a quarter sleeps three times what it worked", share: 0.25, busy: 100 * time.Millisecond, first: 300 * time.Millisecond, eachPage: true},
		{name: "a tenth sleeps nine times", share: 0.1, busy: 20 * time.Millisecond, first: 180 * time.Millisecond, eachPage: true},
		{name: "an oversleep is owed back by the next pages", share: 0.5, busy: 100 * time.Millisecond, over: 30 * time.Millisecond, first: 100 * time.Millisecond, eachPage: true},
		{name: "a debt under a millisecond is carried, not slept", share: 0.5, busy: 300 * time.Microsecond, first: 1200 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1_700_000_000, 0), over: tc.over}
			s, h := pacedWorld(clock, tc.busy)
			start := clock.now
			r, st, err := DetectHistoryPaced(context.Background(), s, h, clock.pace(tc.share))
			if err != nil {
				t.Fatal(err)
			}
			if !r.Clean {
				t.Fatalf("the clean fixture reported %d findings", len(r.Findings))
			}
			if !h.serial {
				t.Fatal("a paced detection did not ask its history to read serially")
			}
			if len(clock.sleeps) == 0 || clock.sleeps[0] != tc.first {
				t.Fatalf("sleeps %v, want the first %s", clock.sleeps, tc.first)
			}
			if tc.eachPage && len(clock.sleeps) != h.pages {
				t.Fatalf("%d sleeps over %d pages, want one after each", len(clock.sleeps), h.pages)
			}
			for _, d := range clock.sleeps {
				if d < minSleep {
					t.Fatalf("slept %s, under the %s carried instead", d, minSleep)
				}
			}
			busy := time.Duration(h.pages) * tc.busy
			elapsed := clock.now.Sub(start)
			if st.Busy != busy || st.Slept != elapsed-busy || st.Pages != h.pages || st.Share != tc.share {
				t.Fatalf("stats %+v, want busy %s, slept %s over %d pages", st, busy, elapsed-busy, h.pages)
			}
			// The duty cycle holds over the run: the busy time is at most the
			// share of the elapsed time, short of one page's debt not yet slept
			// (the last yield's carried remainder or an overrun).
			share := float64(busy) / float64(elapsed+minSleep)
			if share > tc.share {
				t.Fatalf("busy %s of %s elapsed: %.4f of a CPU, above the share %.3f", busy, elapsed, share, tc.share)
			}
			if owed := time.Duration(float64(busy)*(1-tc.share)/tc.share) - (elapsed - busy); owed > minSleep || owed < -tc.over {
				t.Fatalf("slept %s for %s busy at %.2f: %s off", elapsed-busy, busy, tc.share, owed)
			}
		})
	}
}

// tickingClock is a fake clock whose every reading is a step later: the
// detection's work between two looks at the clock.
type tickingClock struct {
	fakeClock
	step time.Duration
}

func (c *tickingClock) Now() time.Time { c.now = c.now.Add(c.step); return c.now }

// A page of many events is cut into bursts: detection yields every
// PaceEvery events inside it, not only between pages.
func TestPace_YieldsInsideAPage(t *testing.T) {
	c := &tickingClock{fakeClock: fakeClock{now: time.Unix(1_700_000_000, 0)}, step: 2 * time.Millisecond}
	s := fixture(3000)
	events := len(s.Source.Trades) + len(s.Source.Orders)
	_, st, err := DetectHistoryPaced(context.Background(), s, newSnapshotHistory(s, 0), Pace{Share: 0.5, Now: c.Now, Sleep: c.Sleep})
	if err != nil {
		t.Fatal(err)
	}
	// Every other yield sleeps at least minSleep: the tick read after each
	// sleep counts as slept, so the next yield owes less than minSleep.
	if st.Pages != 1 || len(c.sleeps) < events/PaceEvery/2 {
		t.Fatalf("%d sleeps over %d page(s) of %d events, want at least one every %d events", len(c.sleeps), st.Pages, events, 2*PaceEvery)
	}
}

func TestPace_UnpacedNeverSleeps(t *testing.T) {
	for _, share := range []float64{0, 1, 2, -0.5} {
		t.Run(shareString(share), func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
			s, h := pacedWorld(clock, 50*time.Millisecond)
			_, st, err := DetectHistoryPaced(context.Background(), s, h, clock.pace(share))
			if err != nil {
				t.Fatal(err)
			}
			if len(clock.sleeps) > 0 || h.serial || st != (PaceStats{}) {
				t.Fatalf("unpaced at %v: sleeps %v, serial %v, stats %+v", share, clock.sleeps, h.serial, st)
			}
		})
	}
}

// A paced detection whose estimate runs past the run's deadline takes the
// share it needs to end in time (up to a whole CPU) once the estimate is
// judged (after judgeAfter pages); only one that would not end in time even
// unpaced stops, with the figures and the flag to raise. One that fits, or
// runs without a deadline, keeps its share. 20 pages of 100 ms at a tenth
// of a CPU take about 20 s, unpaced about 2 s.
func TestPace_EstimatePastTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline time.Duration // 0: none
		raised   bool
		refused  bool
	}{
		{name: "no deadline", deadline: 0},
		{name: "a deadline it fits in", deadline: 30 * time.Second},
		{name: "a deadline half the paced time", deadline: 10 * time.Second, raised: true},
		{name: "a deadline just short of it", deadline: 19 * time.Second, raised: true},
		{name: "a deadline even unpaced misses", deadline: 5 * time.Second, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The fake clock starts at the real time: ctx's deadline is a
			// real instant the test never reaches, compared with fake time.
			clock := &fakeClock{now: time.Now()}
			start := clock.now
			s, h := pacedWorld(clock, 100*time.Millisecond)
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, clock.now.Add(tc.deadline))
				defer cancel()
			}
			r, st, err := DetectHistoryPaced(ctx, s, h, clock.pace(0.1))
			if tc.refused {
				if !errors.Is(err, ErrPacedPastDeadline) || !errors.Is(err, ErrSnapshotTooLarge) || !IsPacedPastDeadline(err) {
					t.Fatalf("err %v, want ErrPacedPastDeadline (a snapshot_too_large refusal)", err)
				}
				if got := detectCode(err); got != ResultSnapshotTooLarge {
					t.Fatalf("code %s, want %s", got, ResultSnapshotTooLarge)
				}
				for _, want := range []string{"even unpaced it would end in about", "--reconciliation-timeout"} {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("%q does not say %q", err, want)
					}
				}
				if h.pages != judgeAfter+1 {
					t.Fatalf("stopped after %d pages, want at the first judged page (%d)", h.pages, judgeAfter+1)
				}
				return
			}
			if err != nil || r == nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.deadline > 0 && st.EstimatedEnd.IsZero() {
				t.Fatal("no estimate of the end was made")
			}
			if raised := st.Share > 0.1; raised != tc.raised {
				t.Fatalf("share %.3g at the end, raised %v, want raised %v", st.Share, raised, tc.raised)
			}
			if tc.deadline > 0 {
				if took := clock.now.Sub(start); took > tc.deadline {
					t.Fatalf("took %s, past its deadline of %s", took, tc.deadline)
				}
			}
		})
	}
}

// A cancelled run ends its sleep at once (the real sleeper), as a history
// failure the workflow reports cancelled, and the sleep it was cut from
// counts as slept.
func TestPace_CancelEndsTheSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer time.AfterFunc(100*time.Millisecond, cancel).Stop()
	s := fixture(200)
	start := time.Now()
	// Busy is real time here: a share of a millionth owes a sleep of
	// minutes after any work.
	_, st, err := DetectHistoryPaced(ctx, s, newSnapshotHistory(s, 10), Pace{Share: 1e-6})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrHistory) {
		t.Fatalf("err %v, want the cancellation as a history failure", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the cancelled sleep took %s", took)
	}
	if st.Slept < 50*time.Millisecond || st.Busy > st.Slept {
		t.Fatalf("stats %+v: the sleep cut by the cancellation is not counted as slept", st)
	}
}

// Pacing changes when detection works, never what it finds: every
// differential world, paced at several page sizes, gives the golden report
// and plan of the materialised detection.
func TestDifferential_PacedMatchesUnpaced(t *testing.T) {
	for _, w := range differentialWorlds() {
		file := filepath.Join("testdata", "differential", unsafeName.ReplaceAllString(w.name, "_")+".json")
		t.Run(w.name, func(t *testing.T) {
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, pages := range []int{1, 3, 7} {
				clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
				s := w.snap()
				h := &busyHistory{snapshotHistory: newSnapshotHistory(s, pages), clock: clock, busy: 10 * time.Millisecond}
				r, st, err := DetectHistoryPaced(context.Background(), s, h, clock.pace(0.2))
				if err != nil {
					t.Fatal(err)
				}
				if h.pages > 0 && (len(clock.sleeps) == 0 || st.Slept == 0) {
					t.Fatalf("page size %d: never slept", pages)
				}
				if got := goldenJSON(t, r, mustPlan(t, r, s)); !bytes.Equal(got, want) {
					t.Fatalf("page size %d: the paced report and plan differ from the golden (%s):\n%s", pages, file, firstDiff(got, want))
				}
			}
		})
	}
}
