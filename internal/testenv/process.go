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
	"fmt"
	"os"
	"os/exec"
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
