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
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/reference/live"
)

// envLive tells the re-executed test binary to be the live projector
// (driveLiveProcess) instead of running tests: "dsn scope rate".
const envLive = "PROJECTION_TEST_LIVE"

const liveStartedPrefix = "live-started="

// driveLiveProcess is live.Drive in a child process (the test binary
// re-executed): the trade-processor's live projector is another process in
// production, so its writes must not share this process's scheduler and
// collector with the catch-up and detection it is measured beside. during
// runs once the child's feed has started (t0 is its first arrival); the
// child stops when its stdin closes and reports every write's latency.
func driveLiveProcess(tb testing.TB, dsn, scope string, rate int, during func(ctx context.Context, t0 time.Time)) []time.Duration {
	tb.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d", envLive, dsn, scope, rate))
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
		tb.Fatalf("start the live projector: %v", err)
	}
	started := make(chan time.Time, 1)
	lats := make(chan []time.Duration, 1)
	go func() {
		var lat []time.Duration
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, liveStartedPrefix); ok {
				ns, _ := strconv.ParseInt(v, 10, 64)
				started <- time.Unix(0, ns)
				continue
			}
			if ns, err := strconv.ParseInt(line, 10, 64); err == nil {
				lat = append(lat, time.Duration(ns))
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		lats <- lat
	}()
	select {
	case t0 := <-started:
		ctx, cancel := context.WithCancel(ctxb)
		during(ctx, t0)
		cancel()
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		tb.Fatal("the live projector did not start within a minute")
	}
	_ = stdin.Close()
	lat := <-lats
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("the live projector: %v", err)
	}
	return lat
}

// serveLiveProcess is the child side of driveLiveProcess: live.Drive until
// stdin closes, then one latency (ns) per line. A failed write fails the
// process (exit 1), which fails the parent's phase.
func serveLiveProcess(spec string) int {
	f := strings.Fields(spec)
	if len(f) != 3 {
		fmt.Fprintln(os.Stderr, "live process: want \"dsn scope rate\"")
		return 2
	}
	rate, err := strconv.Atoi(f[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "live process:", err)
		return 2
	}
	pool, err := pgxpool.New(context.Background(), f[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "live process:", err)
		return 1
	}
	defer pool.Close()
	failed := false
	gen := &live.Feed{Seq: 1 << 40}
	lat := live.Drive(pool, f[1], rate, gen.Next, func(err error) {
		fmt.Fprintln(os.Stderr, "live process: write:", err)
		failed = true
	}, func(ctx context.Context) {
		fmt.Printf("%s%d\n", liveStartedPrefix, time.Now().UnixNano())
		_, _ = io.Copy(io.Discard, os.Stdin)
	})
	w := bufio.NewWriter(os.Stdout)
	for _, l := range lat {
		fmt.Fprintln(w, int64(l))
	}
	_ = w.Flush()
	if failed {
		return 1
	}
	return 0
}
