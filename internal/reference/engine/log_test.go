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

package engine

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

func buildTerms(t *testing.T, n, termEvery int) (string, *Log) {
	t.Helper()
	dir := t.TempDir()
	desc := TestDescriptor("s")
	l, err := BuildLog(dir, desc, 11, WorkloadConfig{Openings: true}, n, termEvery)
	if err != nil {
		t.Fatal(err)
	}
	return dir, l
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, segmentPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var re *ReplayError
	if !errors.As(err, &re) || re.Code != code {
		t.Fatalf("want ReplayError %s, got %v", code, err)
	}
}

// FR-APR03: replay is strict from genesis across all recording terms.
func TestFRAPR03_ReplayAcrossTerms(t *testing.T) {
	dir, l := buildTerms(t, 90, 30)
	if got := len(segmentFiles(t, dir)); got != 3 {
		t.Fatalf("%d segments", got)
	}
	r, err := ReplayAll(dir, l.Committed())
	if err != nil {
		t.Fatal(err)
	}
	if r.Through() != 90 {
		t.Fatalf("through %d", r.Through())
	}
}

func TestRefusal_MISSING_GENESIS(t *testing.T) {
	dir, l := buildTerms(t, 90, 30)
	if err := os.Remove(segmentFiles(t, dir)[0]); err != nil { // archive trimmed from the front
		t.Fatal(err)
	}
	_, err := ReplayAll(dir, l.Committed())
	wantCode(t, err, CodeMissingGenesis)
}

func TestRefusal_DISCONTINUITY_GapBetweenTerms(t *testing.T) {
	dir, l := buildTerms(t, 90, 30)
	if err := os.Remove(segmentFiles(t, dir)[1]); err != nil { // term 2 (seq 31..60) lost
		t.Fatal(err)
	}
	_, err := ReplayAll(dir, l.Committed())
	wantCode(t, err, CodeDiscontinuity)
}

func TestRefusal_DISCONTINUITY_OverlapBetweenTerms(t *testing.T) {
	dir, l := buildTerms(t, 60, 30)
	// A third term that claims to start at seq 45, inside term 2.
	segs := segmentFiles(t, dir)
	b, err := os.ReadFile(segs[1])
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	over := []byte("{\"term\":3,\"firstSeq\":45}\n")
	for _, ln := range lines[15:] { // records 45..60
		over = append(over, ln...)
	}
	if err := os.WriteFile(filepath.Join(dir, segmentName(3, 45)), over, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReplayAll(dir, l.Committed())
	wantCode(t, err, CodeDiscontinuity)
}

func TestRefusal_DISCONTINUITY_GapInsideSegment(t *testing.T) {
	dir, l := buildTerms(t, 20, 0)
	seg := segmentFiles(t, dir)[0]
	b, _ := os.ReadFile(seg)
	lines := bytes.SplitAfter(b, []byte("\n"))
	out := bytes.Join(append(lines[:5:5], lines[6:]...), nil) // drop seq 5
	if err := os.WriteFile(seg, out, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReplayAll(dir, l.Committed())
	wantCode(t, err, CodeDiscontinuity)
}

func TestRefusal_ARCHIVE_BEHIND_BOUNDARY(t *testing.T) {
	dir, l := buildTerms(t, 40, 0)
	seg := segmentFiles(t, dir)[0]
	b, _ := os.ReadFile(seg)
	lines := bytes.SplitAfter(b, []byte("\n"))
	if err := os.WriteFile(seg, bytes.Join(lines[:31], nil), 0o644); err != nil { // keep seq 1..30
		t.Fatal(err)
	}
	_, err := ReplayAll(dir, l.Committed())
	wantCode(t, err, CodeArchiveBehindBoundary)
	// Up to what is retained still replays.
	if _, err := ReplayAll(dir, 30); err != nil {
		t.Fatal(err)
	}
}

// FR-APR01: outputs after B are ignored: uncommitted appended commands are not read.
func TestFRAPR01_ReplayStopsAtBoundary(t *testing.T) {
	dir, l := buildTerms(t, 30, 0)
	w, _ := NewWorkload(99, WorkloadConfig{Instruments: l.Descriptor().Instruments})
	for i := 0; i < 10; i++ {
		if _, err := l.Append(w.Next()); err != nil {
			t.Fatal(err)
		}
	}
	if l.Committed() != 30 || l.LastSeq() != 40 {
		t.Fatalf("committed %d last %d", l.Committed(), l.LastSeq())
	}
	r, err := ReplayAll(dir, l.Committed())
	if err != nil {
		t.Fatal(err)
	}
	if r.Through() != 30 || r.CommandsApplied() != 30 {
		t.Fatalf("replayed through %d (%d commands)", r.Through(), r.CommandsApplied())
	}
}

func TestLog_ReopenStartsNewTermAndCutsTornTail(t *testing.T) {
	dir, l := buildTerms(t, 25, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seg := segmentFiles(t, dir)[0]
	f, _ := os.OpenFile(seg, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":26,"ts":"2026`) // crash mid-append
	f.Close()
	l2, err := Open(dir, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l2.LastSeq() != 25 || l2.Committed() != 25 || l2.Term() != 2 {
		t.Fatalf("reopen: last %d committed %d term %d", l2.LastSeq(), l2.Committed(), l2.Term())
	}
	w, _ := NewWorkload(3, WorkloadConfig{Instruments: l2.Descriptor().Instruments})
	c, err := l2.Append(w.Next())
	if err != nil || c.Seq != 26 {
		t.Fatalf("append after reopen: %v seq %d", err, c.Seq)
	}
	if err := l2.Commit(26); err != nil {
		t.Fatal(err)
	}
	if _, err := ReplayAll(dir, 26); err != nil {
		t.Fatal(err)
	}
	if err := l2.Commit(27); err == nil {
		t.Fatal("commit beyond appended accepted")
	}
}

// A resumed replay is identical to a fresh one, and a non-append change makes
// the Replayer stale instead of serving a history the archive no longer proves.
func TestReplayer_ResumeEqualsFreshAndDetectsTrim(t *testing.T) {
	dir, l := buildTerms(t, 50, 20)
	r, err := ReplayAll(dir, 50)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := NewWorkload(5, WorkloadConfig{Instruments: l.Descriptor().Instruments})
	for i := 0; i < 30; i++ {
		if i == 10 {
			l.NewTerm()
		}
		l.Append(w.Next())
	}
	l.Commit(80)
	if err := r.Advance(80); err != nil {
		t.Fatal(err)
	}
	fresh, err := ReplayAll(dir, 80)
	if err != nil {
		t.Fatal(err)
	}
	a, b := r.Events(0, 80), fresh.Events(0, 80)
	if len(a) != len(b) || r.Digest(80) != fresh.Digest(80) {
		t.Fatalf("resume differs: %d vs %d events", len(a), len(b))
	}
	for i := range a {
		if a[i].Seq != b[i].Seq || !bytes.Equal(a[i].Wire, b[i].Wire) {
			t.Fatalf("event %d differs", i)
		}
	}
	if err := os.Remove(segmentFiles(t, dir)[0]); err != nil {
		t.Fatal(err)
	}
	if err := r.Advance(80); !errors.Is(err, ErrStale) {
		t.Fatalf("want ErrStale after trim, got %v", err)
	}
}

func TestReplayer_MaxThrough(t *testing.T) {
	dir, _ := buildTerms(t, 60, 0)
	r, err := ReplayAll(dir, 60)
	if err != nil {
		t.Fatal(err)
	}
	for a := int64(0); a < 60; a++ {
		for _, m := range []int{1, 2, 3, 7, 1000} {
			th := r.MaxThrough(a, m)
			if n := len(r.Events(a, th)); n > m {
				t.Fatalf("a=%d m=%d: %d events", a, m, n)
			}
			if th < 60 && len(r.Events(a, th+1)) <= m {
				t.Fatalf("a=%d m=%d: through %d not maximal", a, m, th)
			}
		}
	}
}

func TestRefusal_DISCONTINUITY_TornRecordInClosedTerm(t *testing.T) {
	dir, l := buildTerms(t, 40, 20)
	seg := segmentFiles(t, dir)[0]
	b, _ := os.ReadFile(seg)
	if err := os.WriteFile(seg, b[:len(b)-5], 0o644); err != nil { // seq 20 cut mid-record
		t.Fatal(err)
	}
	_, err := ReplayAll(dir, l.Committed())
	wantCode(t, err, CodeDiscontinuity)
}

func TestCommand_ValidateRefusesUnencodable(t *testing.T) {
	w, _ := NewWorkload(1, WorkloadConfig{Instruments: []string{"X"}})
	c := w.Next()
	c.Account = "bad\naccount"
	if c.Validate() == nil {
		t.Fatal("control character accepted into the log")
	}
	c = w.Next()
	c.Kind, c.OrderID = KindPlace, "o"
	c.Price = decimalFromString("1e-80")
	if c.Validate() == nil {
		t.Fatal("unencodable price accepted into the log")
	}
}

// One process records into a log at a time: a second Open while the first
// Log is open is refused before it touches the tail or starts a term (two
// writers would interleave terms and the source would turn discontinuous);
// once the first closes, Open succeeds.
func TestOpen_RefusesALogInUse(t *testing.T) {
	dir, l := buildTerms(t, 20, 0)
	before := segmentFiles(t, dir)
	if _, err := Open(dir, LogOptions{}); err == nil {
		t.Fatal("a second Open of a log in use succeeded")
	}
	if after := segmentFiles(t, dir); len(after) != len(before) {
		t.Fatalf("the refused Open started a term: %v -> %v", before, after)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(dir, LogOptions{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	_ = l2.Close()
}
