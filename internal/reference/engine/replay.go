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
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/projection-recovery/projection-recovery/internal/chain"
)

// ErrStale is returned by Replayer.Advance when the log's files changed in a
// way other than appending (a segment removed, shrunk or inserted before the
// read position). The replayed prefix may no longer be provable from the
// archive; the caller must discard the Replayer and replay from genesis,
// which then refuses with the precise code.
var ErrStale = errors.New("replay: log changed other than by appending; replay from genesis")

// ReplayedEvent is one event of a replay: its command's seq and exact wire bytes.
type ReplayedEvent struct {
	Seq  int64
	Wire []byte
}

// Replayer is a strict replay from genesis (FR-APR03) that can be resumed when
// the boundary grows. It re-reads the command log from disk (never the live
// engine's memory), checks genesis, term continuity and coverage of B, runs a
// fresh Engine, and keeps every output with the chain digest after each seq.
// Not safe for concurrent use.
type Replayer struct {
	dir string
	eng *Engine

	events   []ReplayedEvent
	eventEnd []int64 // eventEnd[s] = number of events with seq <= s
	digests  [][sha256.Size]byte
	last     string // hex digest through Through()

	// read position and the segment list it was taken against
	segs    []segmentInfo
	segIdx  int
	offset  int64 // byte offset of the next record in segs[segIdx]; 0 = header not yet read
	applied int64 // commands applied
}

// NewReplayer prepares a replay of the log in dir from genesis.
func NewReplayer(dir string) (*Replayer, error) {
	desc, err := ReadDescriptor(dir)
	if err != nil {
		return nil, err
	}
	var g [sha256.Size]byte
	copy(g[:], mustHex(chain.Genesis))
	return &Replayer{dir: dir, eng: New(desc), eventEnd: []int64{0}, digests: [][sha256.Size]byte{g}, last: chain.Genesis}, nil
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// Through is the last replayed sequence.
func (r *Replayer) Through() int64 { return r.eng.LastSeq() }

// CommandsApplied counts commands this Replayer has executed.
func (r *Replayer) CommandsApplied() int64 { return r.applied }

// Digest is the chain digest through seq (0 <= seq <= Through()).
func (r *Replayer) Digest(seq int64) string { return hex.EncodeToString(r.digests[seq][:]) }

// Events returns the events with a < seq <= t (0 <= a <= t <= Through()). The
// slice aliases the Replayer's storage: do not modify it.
func (r *Replayer) Events(a, t int64) []ReplayedEvent { return r.events[r.eventEnd[a]:r.eventEnd[t]] }

// MaxThrough is the largest t in [a, Through()] such that the events with
// a < seq <= t number at most maxEvents. Because t is a command boundary,
// the page holds whole commands only (FR-APR02); commands with zero outputs
// add nothing and are always covered. t == a with a < Through() means command
// a+1 alone has more than maxEvents events.
func (r *Replayer) MaxThrough(a int64, maxEvents int) int64 {
	limit := r.eventEnd[a] + int64(maxEvents)
	through := r.Through()
	// first s in (a, through] whose prefix count exceeds the limit
	s := a + 1 + int64(sort.Search(int(through-a), func(i int) bool { return r.eventEnd[a+1+int64(i)] > limit }))
	return s - 1
}

// Advance replays from the current position through B (B >= Through()),
// reading the log strictly:
//   - the first segment must start at seq 1 (MISSING_GENESIS);
//   - each term's segment starts exactly after the previous one ends and
//     records inside a segment are consecutive (DISCONTINUITY);
//   - the retained records reach B (ARCHIVE_BEHIND_BOUNDARY).
//
// Outputs after B are never produced: commands after B are not read.
// On any error the Replayer must be discarded.
func (r *Replayer) Advance(b int64) error {
	if b < r.Through() {
		return fmt.Errorf("replay: boundary %d behind replayed %d: %w", b, r.Through(), ErrStale)
	}
	segs, err := listSegments(r.dir)
	if err != nil {
		return err
	}
	if r.segs != nil && !r.stillPrefix(segs) {
		return ErrStale
	}
	r.segs = segs
	if b == r.Through() {
		return nil
	}
	if len(segs) == 0 {
		return &ReplayError{Code: CodeMissingGenesis, Detail: "no segments retained"}
	}
	if r.Through() == 0 && r.offset == 0 && segs[0].FirstSeq != 1 {
		return &ReplayError{Code: CodeMissingGenesis, Detail: fmt.Sprintf("oldest retained segment (term %d) starts at seq %d", segs[0].Term, segs[0].FirstSeq)}
	}
	for r.Through() < b {
		seg := segs[r.segIdx]
		if r.offset == 0 && seg.FirstSeq != r.Through()+1 {
			return &ReplayError{Code: CodeDiscontinuity, Detail: fmt.Sprintf("term %d starts at seq %d, previous terms end at %d", seg.Term, seg.FirstSeq, r.Through())}
		}
		torn, err := r.readSegment(seg, b)
		if err != nil {
			return err
		}
		if r.Through() >= b {
			break
		}
		if r.segIdx+1 >= len(segs) {
			return &ReplayError{Code: CodeArchiveBehindBoundary, Detail: fmt.Sprintf("retained commands end at seq %d, boundary is %d", r.Through(), b)}
		}
		if torn {
			// Only the live tail may end in a record being written; a closed
			// term ending mid-record lost (part of) a command.
			return &ReplayError{Code: CodeDiscontinuity, Detail: fmt.Sprintf("term %d ends in an incomplete record after seq %d", seg.Term, r.Through())}
		}
		r.segIdx++
		r.offset = 0
	}
	// A later term that starts at or before B overlaps what was just served.
	for _, s := range segs[r.segIdx+1:] {
		if s.FirstSeq <= b {
			return &ReplayError{Code: CodeDiscontinuity, Detail: fmt.Sprintf("term %d starts at seq %d, inside the replayed range ending %d", s.Term, s.FirstSeq, b)}
		}
	}
	return nil
}

// stillPrefix reports whether the files read so far are unchanged: the same
// segments up to the read position, earlier ones the same size, the current
// one at least as long as what was consumed. It trusts that a segment of
// unchanged name and size was not rewritten in place (the Log only appends).
func (r *Replayer) stillPrefix(segs []segmentInfo) bool {
	if len(segs) <= r.segIdx {
		return false
	}
	for i := 0; i <= r.segIdx; i++ {
		old, now := r.segs[i], segs[i]
		if old.Name != now.Name {
			return false
		}
		if i < r.segIdx && old.Size != now.Size {
			return false
		}
	}
	return segs[r.segIdx].Size >= r.offset
}

// readSegment applies records of seg from the read position up to b. torn
// reports that the segment ended in an incomplete line (not consumed).
func (r *Replayer) readSegment(seg segmentInfo, b int64) (torn bool, err error) {
	path := filepath.Join(r.dir, seg.Name)
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("replay: open %s: %w", seg.Name, err)
	}
	defer f.Close()
	if _, err := f.Seek(r.offset, io.SeekStart); err != nil {
		return false, fmt.Errorf("replay: seek %s: %w", seg.Name, err)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if r.offset == 0 {
		h, err := br.ReadBytes('\n')
		if err != nil {
			return false, &ReplayError{Code: CodeDiscontinuity, Detail: seg.Name + ": header unreadable"}
		}
		r.offset = int64(len(h))
	}
	for r.Through() < b {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return len(line) > 0, nil // end of segment, or a torn record still being written: not consumed
		}
		if err != nil {
			return false, fmt.Errorf("replay: read %s: %w", seg.Name, err)
		}
		c, err := unmarshalCommand(line[:len(line)-1])
		if err != nil {
			return false, fmt.Errorf("replay: %s at offset %d: %w", seg.Name, r.offset, err)
		}
		if want := r.Through() + 1; c.Seq != want {
			return false, &ReplayError{Code: CodeDiscontinuity, Detail: fmt.Sprintf("%s: record seq %d where %d was expected", seg.Name, c.Seq, want)}
		}
		outs, err := r.eng.Apply(c)
		if err != nil {
			return false, fmt.Errorf("replay: %w", err)
		}
		r.applied++
		d := r.last
		for _, o := range outs {
			d = chain.Next(d, o.Wire)
			r.events = append(r.events, ReplayedEvent{Seq: c.Seq, Wire: o.Wire})
		}
		var raw [sha256.Size]byte
		copy(raw[:], mustHex(d))
		r.last = d
		r.digests = append(r.digests, raw)
		r.eventEnd = append(r.eventEnd, int64(len(r.events)))
		r.offset += int64(len(line))
	}
	return false, nil
}

// ReplayAll is a one-shot strict replay from genesis through b.
func ReplayAll(dir string, b int64) (*Replayer, error) {
	r, err := NewReplayer(dir)
	if err != nil {
		return nil, err
	}
	if err := r.Advance(b); err != nil {
		return nil, err
	}
	return r, nil
}
