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
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
	"github.com/projection-recovery/projection-recovery/internal/reference/member"
)

// envMemberDir tells the re-executed test binary to serve the log in that
// directory (serveMemberProcess, from TestMain) instead of running tests.
const envMemberDir = "PROJECTION_TEST_MEMBER_DIR"

const memberURLPrefix = "member-url="

// startMemberProcess serves the log in dir from a child process: the test
// binary re-executed, which TestMain turns into the member (serveMemberProcess). In production the
// member is another process; measuring reconciliation's heap with the
// member's replay cache in the same heap would charge the member's memory
// (and the garbage the collector lets it grow by: GOGC paces on the whole
// live heap) to reconciliation. The child ends when its stdin closes (the
// test's cleanup), or is killed by its process id after a grace period.
func startMemberProcess(tb testing.TB, dir string) string {
	tb.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envMemberDir+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start the member process: %v", err)
	}
	exited := make(chan error, 1)
	tb.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), memberURLPrefix); ok && !sent {
				urls <- u
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	select {
	case u := <-urls:
		return u
	case err := <-exited:
		exited <- err // for the cleanup
		tb.Fatalf("the member process exited before serving: %v", err)
	case <-time.After(time.Minute):
		tb.Fatal("the member process did not report its URL within a minute")
	}
	return ""
}

// serveMemberProcess is the child side of startMemberProcess (TestMain runs
// it instead of the tests when the parent set envMemberDir): it opens the
// log, serves the contract on a loopback port, prints the URL and serves
// until stdin closes. It returns the process's exit code.
func serveMemberProcess(dir string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "member process:", err)
		return 1
	}
	l, err := engine.Open(dir, engine.LogOptions{})
	if err != nil {
		return fail(err)
	}
	defer l.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	srv := &http.Server{Handler: member.NewHandler(l, member.HandlerOptions{}), ReadHeaderTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Printf("%shttp://%s\n", memberURLPrefix, ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	_ = srv.Close()
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(err)
	}
	return 0
}
