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

package recon

import "testing"

func TestDetect_CleanFixtureHasNoFinding(t *testing.T) {
	for _, n := range []int{0, 1, 40} {
		s := fixture(n)
		r := mustDetect(t, s)
		if len(r.Findings) != 0 || !r.Clean || !r.DryRun {
			t.Fatalf("cmds=%d: clean fixture: clean=%v dryRun=%v findings:%s", n, r.Clean, r.DryRun, joinLines(summary(r)))
		}
		p := mustPlan(t, r, s)
		if len(p.Actions) != 0 || len(p.Manual) != 0 {
			t.Fatalf("cmds=%d: plan of a clean scope: %d actions, %d manual", n, len(p.Actions), len(p.Manual))
		}
	}
}
