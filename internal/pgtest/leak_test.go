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

package pgtest_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
)

// LeakCheck fails a passing run while a goroutine is still running, keeps a
// failing run's own exit code, and passes once the goroutine has ended.
func TestLeakCheck(t *testing.T) {
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		<-stop
	}()
	for _, tc := range []struct {
		name       string
		code, want int
	}{
		{"a passing run with a running goroutine fails", 0, 1},
		{"a failing run keeps its code", 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var report bytes.Buffer
			if got := pgtest.LeakCheckTo(&report, tc.code); got != tc.want {
				t.Fatalf("LeakCheck(%d) = %d, want %d", tc.code, got, tc.want)
			}
			// The report names the leaked goroutine when it failed the run.
			if named := strings.Contains(report.String(), "TestLeakCheck.func1"); named != (tc.code == 0) {
				t.Fatalf("report %q: naming the goroutine = %v, want %v", report.String(), named, tc.code == 0)
			}
		})
	}
	close(stop)
	<-stopped
	var report bytes.Buffer
	if got := pgtest.LeakCheckTo(&report, 0); got != 0 || report.Len() != 0 {
		t.Fatalf("LeakCheck(0) = %d after the goroutine ended, want 0 and no report; report %q", got, report.String())
	}
}
