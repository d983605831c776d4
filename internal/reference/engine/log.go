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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// The command log lives in one directory:
//
//	descriptor.json                      canonical Descriptor
//	committed                            the committed (applied) sequence B, decimal
//	segment-<term>-<firstSeq>.log        one per recording term
//
// A segment's first line is its header {"term":T,"firstSeq":S}; every further
// line is one command (record JSON) with seq S, S+1, ... Each time a Log is
// opened a new recording term begins (a member restart), continuing at the
// next sequence. Replay checks all of this strictly (replay.go).

const (
	descriptorFile = "descriptor.json"
	committedFile  = "committed"
	segmentPrefix  = "segment-"
	segmentSuffix  = ".log"
)

type segmentHeader struct {
	Term     int64 `json:"term"`
	FirstSeq int64 `json:"firstSeq"`
}

// LogOptions tune a Log.
type LogOptions struct {
	// Sync fsyncs the segment after every append and the committed file on
	// every commit. Without it a machine crash can lose acknowledged commands.
	Sync bool
}

// Log is the persisted, term-segmented consensus command log. Safe for
// concurrent use: one appender, any number of readers of Committed.
type Log struct {
	dir  string
	desc Descriptor
	opts LogOptions

	lock *os.File // holds the directory's flock for the life of the Log

	mu        sync.Mutex
	seg       *os.File
	term      int64
	last      int64 // last appended seq
	committed int64
}

// Create initialises an empty log directory for desc and opens recording term 1.
func Create(dir string, desc Descriptor, opts LogOptions) (*Log, error) {
	desc = desc.Normalize()
	if err := desc.Validate(); err != nil {
		return nil, err
	}
	var err error
	if err = os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, descriptorFile)); err == nil {
		lock.Close()
		return nil, fmt.Errorf("create log: %s already holds a log", dir)
	}
	if err := writeFileAtomic(filepath.Join(dir, descriptorFile), desc.Canonical(), opts.Sync); err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	l := &Log{dir: dir, desc: desc, opts: opts, lock: lock}
	if err := l.writeCommitted(0); err != nil {
		lock.Close()
		return nil, err
	}
	if err := l.startTerm(1); err != nil {
		return nil, err
	}
	return l, nil
}

// Open reopens an existing log and starts a new recording term after the last
// appended command. A torn final line (crash mid-append) is cut off first: it
// was never acknowledged.
func Open(dir string, opts LogOptions) (l *Log, err error) {
	desc, err := ReadDescriptor(dir)
	if err != nil {
		return nil, err
	}
	// The lock comes before the tail repair: a second process opening a log
	// that a running member appends to would cut its tail and start a term
	// inside the range it serves.
	lock, err := lockDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	segs, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	l = &Log{dir: dir, desc: desc, opts: opts, lock: lock}
	var maxTerm int64
	if len(segs) > 0 {
		s := segs[len(segs)-1]
		maxTerm = s.Term
		last, err := repairTail(filepath.Join(dir, s.Name), s.FirstSeq)
		if err != nil {
			return nil, err
		}
		l.last = last
	}
	c, err := readCommitted(dir)
	if err != nil {
		return nil, err
	}
	l.committed = min(c, l.last)
	if err := l.startTerm(maxTerm + 1); err != nil {
		return nil, err
	}
	return l, nil
}

// ReadDescriptor reads the descriptor of a log directory.
func ReadDescriptor(dir string) (Descriptor, error) {
	b, err := os.ReadFile(filepath.Join(dir, descriptorFile))
	if err != nil {
		return Descriptor{}, fmt.Errorf("read descriptor: %w", err)
	}
	var d Descriptor
	if err := json.Unmarshal(b, &d); err != nil {
		return Descriptor{}, fmt.Errorf("read descriptor: %w", err)
	}
	d = d.Normalize()
	return d, d.Validate()
}

// Dir, Descriptor, Term, LastSeq and Committed describe the log.
func (l *Log) Dir() string            { return l.dir }
func (l *Log) Descriptor() Descriptor { return l.desc }

func (l *Log) Term() int64 { l.mu.Lock(); defer l.mu.Unlock(); return l.term }

func (l *Log) LastSeq() int64 { l.mu.Lock(); defer l.mu.Unlock(); return l.last }

// Committed is B: the applied consensus sequence (FR-APR01).
func (l *Log) Committed() int64 { l.mu.Lock(); defer l.mu.Unlock(); return l.committed }

// Append validates c, assigns it the next sequence, and persists it in the
// current term's segment with a single write. It is not committed yet.
func (l *Log) Append(c Command) (Command, error) {
	if err := c.Validate(); err != nil {
		return Command{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seg == nil {
		return Command{}, errors.New("append: log closed")
	}
	c.Seq = l.last + 1
	b, err := marshalCommand(c)
	if err != nil {
		return Command{}, fmt.Errorf("append %d: %w", c.Seq, err)
	}
	// One write of a whole line: a reader never sees half a record followed
	// by more data, only possibly a torn tail, which it ignores.
	if _, err := l.seg.Write(append(b, '\n')); err != nil {
		return Command{}, fmt.Errorf("append %d: %w", c.Seq, err)
	}
	if l.opts.Sync {
		if err := l.seg.Sync(); err != nil {
			return Command{}, fmt.Errorf("append %d: sync: %w", c.Seq, err)
		}
	}
	l.last = c.Seq
	return c, nil
}

// Commit advances B to seq (<= LastSeq). B never moves backwards.
func (l *Log) Commit(seq int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq > l.last {
		return fmt.Errorf("commit %d: only %d appended", seq, l.last)
	}
	if seq <= l.committed {
		return nil
	}
	if err := l.writeCommitted(seq); err != nil {
		return err
	}
	l.committed = seq
	return nil
}

// NewTerm closes the current segment and starts the next recording term at
// LastSeq()+1 (what a member restart or leadership change does).
func (l *Log) NewTerm() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.startTerm(l.term + 1)
}

// Close closes the current segment and releases the directory.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lock != nil {
		defer func() { l.lock.Close(); l.lock = nil }()
	}
	if l.seg == nil {
		return nil
	}
	err := l.seg.Close()
	l.seg = nil
	return err
}

// lockDir takes an exclusive, non-blocking flock on <dir>/lock: one process
// records into a log at a time (two would interleave terms). The kernel
// releases it when the process dies, so a killed member's successor opens
// the log at once.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is in use by another process: %w", dir, err)
	}
	return f, nil
}

func (l *Log) startTerm(term int64) error {
	if l.seg != nil {
		if err := l.seg.Close(); err != nil {
			return fmt.Errorf("close term %d: %w", l.term, err)
		}
		l.seg = nil
	}
	name := filepath.Join(l.dir, segmentName(term, l.last+1))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start term %d: %w", term, err)
	}
	h, _ := json.Marshal(segmentHeader{Term: term, FirstSeq: l.last + 1})
	if _, err := f.Write(append(h, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("start term %d: %w", term, err)
	}
	if l.opts.Sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("start term %d: %w", term, err)
		}
	}
	l.seg, l.term = f, term
	return nil
}

func (l *Log) writeCommitted(seq int64) error {
	if err := writeFileAtomic(filepath.Join(l.dir, committedFile), []byte(strconv.FormatInt(seq, 10)+"\n"), l.opts.Sync); err != nil {
		return fmt.Errorf("commit %d: %w", seq, err)
	}
	return nil
}

func readCommitted(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, committedFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read committed: %w", err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("read committed: bad value %q", b)
	}
	return v, nil
}

func writeFileAtomic(path string, data []byte, sync bool) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func segmentName(term, firstSeq int64) string {
	return fmt.Sprintf("%s%020d-%020d%s", segmentPrefix, term, firstSeq, segmentSuffix)
}

// segmentInfo is a segment as listed: header plus current size.
type segmentInfo struct {
	Name     string
	Term     int64
	FirstSeq int64
	Size     int64
}

// listSegments reads every segment header, sorted by term. Two segments of
// one term, or a header that disagrees with its name, are a discontinuity.
func listSegments(dir string) ([]segmentInfo, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list segments: %w", err)
	}
	var segs []segmentInfo
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasPrefix(n, segmentPrefix) || !strings.HasSuffix(n, segmentSuffix) {
			continue
		}
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("open segment %s: %w", n, err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("stat segment %s: %w", n, err)
		}
		line, err := bufio.NewReaderSize(f, 256).ReadBytes('\n')
		f.Close()
		var h segmentHeader
		if err != nil || json.Unmarshal(line, &h) != nil || h.Term < 1 || h.FirstSeq < 1 {
			return nil, &ReplayError{Code: CodeDiscontinuity, Detail: "segment " + n + " has no valid header"}
		}
		if n != segmentName(h.Term, h.FirstSeq) {
			return nil, &ReplayError{Code: CodeDiscontinuity, Detail: "segment " + n + " header says term " + strconv.FormatInt(h.Term, 10) + " first seq " + strconv.FormatInt(h.FirstSeq, 10)}
		}
		segs = append(segs, segmentInfo{Name: n, Term: h.Term, FirstSeq: h.FirstSeq, Size: st.Size()})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].Term < segs[j].Term })
	for i := 1; i < len(segs); i++ {
		if segs[i].Term == segs[i-1].Term {
			return nil, &ReplayError{Code: CodeDiscontinuity, Detail: "two segments for term " + strconv.FormatInt(segs[i].Term, 10)}
		}
	}
	return segs, nil
}

// repairTail cuts a torn last line off the segment and returns the last seq in it.
func repairTail(path string, firstSeq int64) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("open log tail: %w", err)
	}
	if cut := bytes.LastIndexByte(b, '\n') + 1; cut != len(b) {
		if err := os.Truncate(path, int64(cut)); err != nil {
			return 0, fmt.Errorf("cut torn tail of %s: %w", path, err)
		}
		b = b[:cut]
	}
	lines := bytes.Count(b, []byte{'\n'}) - 1 // minus header
	if lines < 0 {
		return firstSeq - 1, nil
	}
	last := firstSeq - 1 + int64(lines)
	// Cross-check the last record's own seq: a mismatch means the segment is
	// not what its header says; refuse to append after it.
	if lines > 0 {
		body := b[:len(b)-1]
		rec := body[bytes.LastIndexByte(body, '\n')+1:]
		c, err := unmarshalCommand(rec)
		if err != nil {
			return 0, fmt.Errorf("log tail %s: %w", path, err)
		}
		if c.Seq != last {
			return 0, &ReplayError{Code: CodeDiscontinuity, Detail: fmt.Sprintf("%s: last record seq %d, expected %d", path, c.Seq, last)}
		}
	}
	return last, nil
}

var _ io.Closer = (*Log)(nil)
