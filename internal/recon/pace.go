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
	"time"
)

// Pace bounds a streamed detection's busy time (wall clock between sleeps)
// to Share of its elapsed time, as PostgreSQL's cost-based vacuum delay: it
// sleeps at each yield what its busy time owes. The history is read
// serially, so busy time bounds the CPU the run costs anywhere (docs:
// performance.md, "Paced dry runs"). The zero Pace is unpaced; only dry
// runs are paced, never an apply, which holds the scope's lease.
type Pace struct {
	// Share of one CPU, in (0, 1); 0 or 1 and above: unpaced.
	Share float64
	// Now and Sleep are injected (nil: time.Now and a timer that ends with
	// ctx). Sleep returns ctx's error when ctx ends first.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// DefaultDetectCPU is the share of one CPU a scheduled dry run's
// detection takes by default (the manager's --reconciliation-detect-cpu;
// performance.md, "Paced dry runs", says why this figure).
const DefaultDetectCPU = 0.1

// Paced reports whether p slows a detection at all.
func (p Pace) Paced() bool { return p.Share > 0 && p.Share < 1 }

// PaceStats is what pacing did to one detection: its busy time, the time it
// slept and the pages it was paced over.
type PaceStats struct {
	Share        float64
	Busy, Slept  time.Duration
	Pages        int
	EstimatedEnd time.Time // the last estimate of the paced end (zero: none made)
}

// ErrPacedPastDeadline: the detection's estimate of its end is past the
// run's deadline even unpaced, so it stops now, with the figures, rather
// than time out later with nothing said (a paced run that merely would not
// fit at its share raises the share instead). It is a snapshot_too_large refusal (a read
// this manager's bounds do not allow), which the controller reports as
// its own Stalled reason.
var ErrPacedPastDeadline = fmt.Errorf("%w: paced detection would not finish within the run's deadline", ErrSnapshotTooLarge)

// SerialHistory is a History that reads ahead (the next page, the next SQL
// batches) while detection checks the current page, and can stop: a paced
// detection calls ReadSerially before its first page, so the work its busy
// time measures is all the work it causes.
type SerialHistory interface {
	History
	ReadSerially()
}

// PaceEvery is how many source events detection checks between two yields
// of a paced run (about a millisecond of its work).
const PaceEvery = 256

// deadlineMargin is the part of the time left to its deadline a paced run
// that raised its share aims to end within (estimates are noisy).
const deadlineMargin = 0.8

// judgeAfter is how many paced pages after the first an estimate of the
// end needs: the first carries the read's fixed costs (counts, legacy rows,
// current orders), and one interval is too noisy to stop a run on.
const judgeAfter = 3

// pacer is one detection's Pace.
type pacer struct {
	p     Pace
	start time.Time
	slept time.Duration
	pages int
	// the estimate's reference: busy time and progress at the first page
	busy0, prog0 float64
	est          time.Time
}

func newPacer(p Pace, h History) *pacer {
	if !p.Paced() {
		return nil
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.Sleep == nil {
		p.Sleep = sleepCtx
	}
	if s, ok := h.(SerialHistory); ok {
		s.ReadSerially()
	}
	return &pacer{p: p, start: p.Now()}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// minSleep: a debt shorter than this is carried to the next yield, not
// slept (a timer's own cost and granularity).
const minSleep = time.Millisecond

// yield sleeps the debt the busy time owes, when it is at least minSleep.
// Detection yields often (PaceEvery events, and between a page's fetch,
// its rows and its checks), so no busy stretch is long: a live writer
// behind one burst waits for that burst, not for a page's worth of work,
// and a queue of its writes cannot build up. A nil pacer does nothing.
func (pc *pacer) yield(ctx context.Context) error {
	if pc == nil {
		return nil
	}
	now := pc.p.Now()
	busy := now.Sub(pc.start) - pc.slept
	share := pc.p.Share
	owe := time.Duration(float64(busy)*(1-share)/share) - pc.slept
	if owe < minSleep {
		return nil
	}
	err := pc.p.Sleep(ctx, owe)
	// What was really slept, cut short or not: an oversleep is owed back by
	// the next yields, and a run cancelled asleep was asleep.
	pc.slept += pc.p.Now().Sub(now)
	return err
}

// page is called after each page, through (of boundary) read: it judges
// the estimate of the end against ctx's deadline, then yields.
func (pc *pacer) page(ctx context.Context, through, boundary int64) error {
	if pc == nil {
		return nil
	}
	pc.pages++
	if boundary > 0 {
		now := pc.p.Now()
		busy := float64(now.Sub(pc.start) - pc.slept)
		share := pc.p.Share
		owe := max(time.Duration(busy*(1-share)/share)-pc.slept, 0)
		prog := min(float64(through)/float64(boundary), 1)
		if pc.pages == 1 {
			pc.busy0, pc.prog0 = busy, prog
		} else if done := prog - pc.prog0; done > 0 && pc.pages > judgeAfter {
			// The busy time the rest needs at the rate since the first page,
			// stretched by the share; the debt is slept before any of it.
			rest := (busy - pc.busy0) / done * (1 - prog)
			pc.est = now.Add(owe + time.Duration(rest/share))
			if dl, ok := ctx.Deadline(); ok && pc.est.After(dl) {
				// The deadline wins over the pace: the run takes the share it
				// needs to end within deadlineMargin of the time left, up to a
				// whole CPU. Only a run that would not end in time even
				// unpaced stops, now, with the figures.
				left := float64(dl.Sub(now)) * deadlineMargin
				if need := rest / max(left, 1); need < 1 {
					pc.p.Share = max(share, need)
					pc.est = now.Add(time.Duration(rest / pc.p.Share))
				} else {
					return fmt.Errorf("%w: even unpaced it would end in about %s (%.0f%% of the source read in %s at %s of one CPU); its deadline is in %s: raise the deadline (--reconciliation-timeout)",
						ErrPacedPastDeadline, round(time.Duration(rest)), prog*100, round(now.Sub(pc.start)), shareString(share),
						round(dl.Sub(now)))
				}
			}
		}
	}
	return pc.yield(ctx)
}

// stats is what the pacer did (zero when unpaced).
func (pc *pacer) stats() PaceStats {
	if pc == nil {
		return PaceStats{}
	}
	elapsed := pc.p.Now().Sub(pc.start)
	return PaceStats{Share: pc.p.Share, Busy: elapsed - pc.slept, Slept: pc.slept, Pages: pc.pages, EstimatedEnd: pc.est}
}

func shareString(s float64) string { return fmt.Sprintf("%.3g", s) }

func round(d time.Duration) time.Duration {
	if d > time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(10 * time.Millisecond)
}

// IsPacedPastDeadline reports whether err is a paced detection's refusal
// to run past its deadline.
func IsPacedPastDeadline(err error) bool { return errors.Is(err, ErrPacedPastDeadline) }
