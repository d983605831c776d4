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
package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a binary started by the demo or a test (a manager, a member).
// Exited is closed once it has exited and Err then holds how: any number of
// waiters (a watch loop, a deferred Stop, a restart) see the exit, where a
// one-shot channel would leave the second one blocked forever.
type Process struct {
	cmd    *exec.Cmd
	Exited chan struct{}
	Err    error // valid once Exited is closed
}

// StartProcess runs path with args and extra environment, its output
// appended to logPath (a restarted process keeps one log). The process is
// killed if the one that started it dies (Pdeathsig): a demo or test binary
// stopped by its timeout or by hand leaves nothing running on the machine.
func StartProcess(logPath string, env []string, path string, args ...string) (*Process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	p := &Process{cmd: cmd, Exited: make(chan struct{})}
	go func() {
		p.Err = cmd.Wait()
		logf.Close()
		close(p.Exited)
	}()
	return p, nil
}

// Alive reports whether the process has not exited yet.
func (p *Process) Alive() bool {
	select {
	case <-p.Exited:
		return false
	default:
		return true
	}
}

// CPU is the CPU time (user and system, every thread) the process has used
// so far, read from /proc/<pid>/stat (Linux; clock ticks of 10 ms). Unlike a
// figure the process reports about itself (process_cpu_seconds_total on its
// /metrics), reading it costs the process nothing, so a measurement window
// bounded by two reads contains only the process's own work.
func (p *Process) CPU() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields are counted after its closing one, state being field 3.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc stat %q", b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc stat %q", b)
	}
	var ticks int64
	for _, s := range f[11:13] { // utime, stime (fields 14 and 15)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected /proc stat %q: %w", b, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// clockTick is USER_HZ, the unit of /proc's CPU times: 100 on every Linux
// architecture Go supports (the kernel fixes it for user space).
const clockTick = 10 * time.Millisecond

// Signal sends s (SIGSTOP, SIGCONT, ...).
func (p *Process) Signal(s syscall.Signal) { _ = p.cmd.Process.Signal(s) }

// Kill sends SIGKILL and waits for the exit.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.Exited
}

// Stop asks for a graceful exit (SIGTERM; SIGCONT first, so a frozen process
// can act on it), waits up to grace and then kills. Stopping an exited
// process returns at once.
func (p *Process) Stop(grace time.Duration) {
	if !p.Alive() {
		return
	}
	p.Signal(syscall.SIGCONT)
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.Exited:
	case <-time.After(grace):
		p.Kill()
	}
}
