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

package controllers

import (
	"fmt"
	"strings"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/recon"
)

func viewAction(id string, before, after recon.Fields) recon.Action {
	return recon.Action{ID: id, Kind: recon.ActionRederivePosition, Target: recon.Fields{"scope": "s", "account": "a"},
		Before: before, After: after, Reversible: true, Risk: "low", Rollback: "put Before back", Findings: []string{"f@" + id}}
}

// TestNotShown: only what status shows whole may be approved.
func TestNotShown(t *testing.T) {
	long := strings.Repeat("9", maxFieldValue+1)
	many := func(n int) []recon.Action {
		var as []recon.Action
		for i := range n {
			as = append(as, viewAction(fmt.Sprintf("a%02d", i), recon.Fields{"quantity": "1"}, recon.Fields{"quantity": "2"}))
		}
		return as
	}
	cases := []struct {
		name    string
		actions []recon.Action
		opt     recon.ApplyOptions
		want    int
	}{
		{"every action shown", many(3), recon.ApplyOptions{}, 0},
		{"one past the fifty shown", many(maxShownItems + 1), recon.ApplyOptions{}, 1},
		{"the shown page of a larger plan", many(maxShownItems + 1), recon.ApplyOptions{Only: []string{"a00", "a49"}}, 0},
		{"the unshown one by name", many(maxShownItems + 1), recon.ApplyOptions{Only: []string{"a50"}}, 1},
		{"a value too long to show", []recon.Action{viewAction("x", recon.Fields{"quantity": "1"}, recon.Fields{"quantity": long})}, recon.ApplyOptions{}, 1},
		{"irreversible left out by the apply anyway", []recon.Action{{ID: "i", Kind: recon.ActionReleaseLease, Before: recon.Fields{"owner": long}}}, recon.ApplyOptions{}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, n := notShown(&recon.Plan{Actions: tc.actions}, tc.opt); n != tc.want {
				t.Fatalf("%d not shown, want %d", n, tc.want)
			}
		})
	}
}

func TestPlannedAction_Changes(t *testing.T) {
	cases := []struct {
		name          string
		before, after recon.Fields
		effect        string
		changes       string
	}{
		{"update", recon.Fields{"quantity": "1", "avg_cost": "10"}, recon.Fields{"quantity": "2", "avg_cost": "10"}, "update", "quantity:1>2"},
		{"create", recon.Fields{"row": "absent"}, recon.Fields{"quantity": "2"}, "create", "quantity:->2"},
		{"delete", recon.Fields{"quantity": "2"}, nil, "delete", "quantity:2>-"},
		{"none", nil, nil, "none", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it, ok := plannedAction(viewAction("x", tc.before, tc.after))
			if !ok || it.Effect != tc.effect {
				t.Fatalf("ok %t effect %s, want %s", ok, it.Effect, tc.effect)
			}
			var parts []string
			for _, c := range it.Changes {
				b, a := "-", "-"
				if c.Before != nil {
					b = *c.Before
				}
				if c.After != nil {
					a = *c.After
				}
				parts = append(parts, c.Field+":"+b+">"+a)
			}
			if got := strings.Join(parts, ","); got != tc.changes {
				t.Fatalf("changes %s, want %s", got, tc.changes)
			}
		})
	}
}
