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
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/source"
)

// A read past the size cap stops with snapshot_too_large, naming the side
// and the cap: the projection's history rows are counted before any row is
// read, the source's events page by page. Through the workflow: no report.
func TestProvider_SizeCapRefusesSnapshotTooLarge(t *testing.T) {
	t.Parallel()
	caught := newWorld(t, "cap", 60, worldOpts{catchUp: true})
	behind := newWorld(t, "capsrc", 60, worldOpts{}) // nothing projected: only the source is large
	cases := []struct {
		name  string
		w     *world
		cap   int64
		pages int
		side  string
	}{
		{"projection rows past the cap", caught, 20, 0, "the projection holds"},
		{"source events past the cap, one page", behind, 20, 0, "the source holds more than the snapshot cap of 20 events"},
		{"source events past the cap, many pages", behind, 40, 16, "the source holds more than the snapshot cap of 40 events"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.w.provider(c.pages)
			p.MaxRecords = c.cap
			snap, err := p.Read(ctxb, c.w.scope)
			if snap != nil || !errors.Is(err, recon.ErrSnapshotTooLarge) || !strings.Contains(err.Error(), c.side) {
				t.Fatalf("Read = snapshot %t, %v; want snapshot too large: %q", snap != nil, err, c.side)
			}
			res, err := (&recon.Workflow{Provider: p, Clock: time.Now, StaleAfter: time.Minute}).DryRun(ctxb, c.w.scope)
			if recon.CodeOf(err) != recon.ResultSnapshotTooLarge || res == nil || res.Report != nil || res.Run.Code != recon.ResultSnapshotTooLarge {
				t.Fatalf("DryRun = %+v, %v", res, err)
			}
			p.MaxRecords = 1 << 20
			if _, err := p.Read(ctxb, c.w.scope); err != nil {
				t.Fatalf("under the cap: %v", err)
			}
		})
	}
}

// stalling serves the first page, then blocks every fetch until its
// context ends (a member too slow for the deadline).
type stalling struct {
	Fetcher
	served int
}

func (s *stalling) Fetch(ctx context.Context, afterSeq int64, afterDigest, expect string, max int) (*source.Page, error) {
	if s.served > 0 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	s.served++
	return s.Fetcher.Fetch(ctx, afterSeq, afterDigest, expect, max)
}

// A read past its deadline stops with snapshot_too_large naming the
// deadline; the caller's own cancellation stays a cancellation.
func TestProvider_DeadlineRefusesSnapshotTooLarge(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "deadline", 60, worldOpts{catchUp: true})
	p := w.provider(16)
	p.Deadline = 300 * time.Millisecond
	p.Source = &stalling{Fetcher: w.client}
	start := time.Now()
	snap, err := p.Read(ctxb, w.scope)
	if snap != nil || !errors.Is(err, recon.ErrSnapshotTooLarge) || !strings.Contains(err.Error(), "snapshot deadline of 300ms") {
		t.Fatalf("Read = snapshot %t, %v; want the deadline refusal", snap != nil, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the deadline of 300ms stopped the read after %s", took)
	}

	// The streamed read (the workflow's) stops at its deadline mid-stream.
	p.Source = &stalling{Fetcher: w.client}
	res, err := (&recon.Workflow{Provider: p, Clock: time.Now, StaleAfter: time.Minute}).DryRun(ctxb, w.scope)
	if recon.CodeOf(err) != recon.ResultSnapshotTooLarge || res == nil || res.Report != nil || !strings.Contains(err.Error(), "snapshot deadline of 300ms") {
		t.Fatalf("DryRun past the deadline = report %t, %v", res != nil && res.Report != nil, err)
	}

	p.Deadline = time.Hour
	p.Source = &stalling{Fetcher: w.client}
	ctx, cancel := context.WithTimeout(ctxb, 300*time.Millisecond)
	defer cancel()
	snap, err = p.Read(ctx, w.scope)
	if snap != nil || err == nil || errors.Is(err, recon.ErrSnapshotTooLarge) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Read under the caller deadline = snapshot %t, %v; want the caller deadline, not a refusal", snap != nil, err)
	}
}
