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
	"errors"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// The decision every reversible handler shares (transition.next): the goal
// is tested before the starting state, so a repeated apply or revert is a
// no-op, and a record in neither state is refused with ErrRecordMoved.
func TestHandlers_TransitionDecision(t *testing.T) {
	t.Parallel()
	before, after := recon.Fields{"q": "1"}, recon.Fields{"q": "2"}
	moved := recon.Fields{"q": "3"}
	a := recon.Action{ID: "x", Before: before, After: after}
	apply := transition{done: is(after), from: is(before), want: "Before"}
	revert := transition{done: is(before), from: is(after), want: "After"}
	create := transition{done: is(after), from: is(nil), want: "absent"}
	for _, tc := range []struct {
		name      string
		t         transition
		cur       recon.Fields
		write     bool
		wantMoved bool
	}{
		{"apply from Before writes", apply, before, true, false},
		{"apply at After is a no-op", apply, after, false, false},
		{"apply over a moved record refuses", apply, moved, false, true},
		{"apply over an absent record refuses", apply, nil, false, true},
		{"revert from After writes", revert, after, true, false},
		{"revert at Before is a no-op", revert, before, false, false},
		{"revert over a moved record refuses", revert, moved, false, true},
		{"create from absent writes", create, nil, true, false},
		{"create over a present record refuses", create, moved, false, true},
		{"the goal wins when a record is both", transition{done: is(before), from: is(before)}, before, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			write, err := tc.t.next(a, tc.cur)
			if write != tc.write || errors.Is(err, ErrRecordMoved) != tc.wantMoved || (err != nil && !tc.wantMoved) {
				t.Fatalf("next(%v) = %v, %v; want write %v, moved %v", tc.cur, write, err, tc.write, tc.wantMoved)
			}
		})
	}
}
