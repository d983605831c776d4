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
package soak

import (
	"bufio"
	"os"
	"strings"
	"sync"
)

// logScanner remembers how far a log has been read, so each batch reports
// only what its own time wrote.
type logScanner struct {
	mu     sync.Mutex
	offset map[string]int64
}

// badLines returns the lines since the last call that show a data race, a
// panic or a fatal error. A race report is what -race prints; panics and
// "fatal error:" are the runtime's own.
func (s *logScanner) badLines(path string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.offset == nil {
		s.offset = map[string]int64{}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(s.offset[path], 0); err != nil {
		return nil, err
	}
	var bad []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var n int64
	for sc.Scan() {
		line := sc.Text()
		n += int64(len(line)) + 1
		if strings.Contains(line, "WARNING: DATA RACE") || strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
			bad = append(bad, line)
		}
	}
	s.offset[path] += n
	return bad, sc.Err()
}
