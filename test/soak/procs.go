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
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one started binary; exited closes when it has exited, err then
// holds how (any number of waiters see it).
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// startProcess runs path with args and extra environment, appending its
// output to logPath (a restarted process keeps one log).
func startProcess(logPath string, env []string, path string, args ...string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// A soak binary killed by its timeout or by hand takes its managers and
	// members with it rather than leaving them running on the machine.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *process) signal(s syscall.Signal) { _ = p.cmd.Process.Signal(s) }

// kill sends SIGKILL and waits for the exit.
func (p *process) kill() {
	p.signal(syscall.SIGCONT) // a frozen process still dies of SIGKILL; this keeps ps tidy
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// stop asks for a graceful exit (SIGTERM), then kills after grace.
func (p *process) stop(grace time.Duration) {
	if !p.alive() {
		return
	}
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.kill()
	}
}

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
