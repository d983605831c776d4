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

package pgtest

import (
	"fmt"
	"io"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// MainLeakChecked is Main plus a goroutine-leak check: it runs the tests,
// stops the cluster this binary started, and then fails the binary (exit 1,
// the leaked goroutines' stacks on stderr) when any goroutine is still
// running that opts do not name. Use it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.MainLeakChecked(m) }
//
// Every goroutine a test or the code under test starts must have ended when
// the tests return: a pool not closed, a publisher not stopped or a server not
// shut down by its test would otherwise go unnoticed until it exhausts
// connections or races a later test in production. opts are for goroutines
// that are not ours and cannot be stopped; each must be narrow
// (goleak.IgnoreTopFunction) and say why at the call site.
func MainLeakChecked(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	Shutdown()
	os.Exit(LeakCheck(code, opts...))
}

// LeakCheck returns code unchanged when it is non-zero (the failing tests are
// the report) or when no goroutine leaked; otherwise it prints the leaked
// goroutines and returns 1. For TestMain functions that run their own teardown
// (an envtest control plane) before the check and so cannot use
// MainLeakChecked. goleak.Find retries for a short while, so goroutines
// already told to stop (a closed pool's health checker) may finish first.
func LeakCheck(code int, opts ...goleak.Option) int {
	return leakCheck(os.Stderr, code, opts...)
}

func leakCheck(report io.Writer, code int, opts ...goleak.Option) int {
	if code != 0 {
		return code
	}
	if err := goleak.Find(opts...); err != nil {
		fmt.Fprintf(report, "goleak: goroutines still running after every test passed: %v\n", err)
		return 1
	}
	return 0
}
