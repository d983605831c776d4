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

package main

import (
	"testing"
	"time"
)

// TestDemo_StopAfterObservedExitReturns: the demo's watch loops observe a
// manager or member that exits, then its deferred stop (and, for the member,
// the walk-through's restart) stops it again. Every stop must return at
// once with the exit status kept: with a one-shot exit channel the watch
// loop consumed the only value and the teardown blocked forever.
func TestDemo_StopAfterObservedExitReturns(t *testing.T) {
	for _, tc := range []struct {
		name, script string
	}{
		{"exited by itself", "exit 3"},
		{"still running, stopped by SIGTERM", "sleep 60"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := startProcess(t.TempDir(), "proc", nil, "/bin/sh", "-c", tc.script)
			if err != nil {
				t.Fatal(err)
			}
			if tc.script == "exit 3" {
				select {
				case <-p.Exited: // what a watch loop does on an exit
				case <-time.After(10 * time.Second):
					t.Fatal("the process did not exit")
				}
			}
			done := make(chan struct{})
			go func() { p.Stop(20 * time.Second); p.Stop(20 * time.Second); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("stop did not return: the demo's teardown hangs")
			}
			if p.Err == nil {
				t.Fatal("the exit status was lost")
			}
		})
	}
}
