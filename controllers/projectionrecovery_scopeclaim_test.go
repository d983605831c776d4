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
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// TestScopeClaim_OldestWinsTiesByNamespaceName: the owner of a scope is the
// oldest resource, ties (creationTimestamp has second precision) broken by
// namespace then name, whatever order the cache lists them in, so every
// manager picks the same owner.
func TestScopeClaim_OldestWinsTiesByNamespaceName(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	c := func(ns, name string, ageSeconds int) claimant {
		return claimant{namespace: ns, name: name, created: t0.Add(-time.Duration(ageSeconds) * time.Second)}
	}
	cases := []struct {
		name   string
		self   claimant
		others []claimant
		want   string
	}{
		{"alone", c("ns", "a", 0), nil, "ns/a"},
		{"alone, listed with itself", c("ns", "a", 0), []claimant{c("ns", "a", 0)}, "ns/a"},
		{"older other wins", c("ns", "new", 1), []claimant{c("ns", "old", 5), c("ns", "new", 1)}, "ns/old"},
		{"self older wins", c("ns", "old", 5), []claimant{c("ns", "new", 1)}, "ns/old"},
		{"oldest among many, any order", c("ns", "b", 2), []claimant{c("z", "c", 1), c("y", "d", 9), c("x", "e", 3)}, "y/d"},
		{"tie: namespace first", c("ns-b", "a", 3), []claimant{c("ns-a", "z", 3)}, "ns-a/z"},
		{"tie: then name", c("ns", "b", 3), []claimant{c("ns", "a", 3), c("ns", "c", 3)}, "ns/a"},
		{"tie with self first in order", c("ns", "a", 3), []claimant{c("ns", "b", 3)}, "ns/a"},
		{"age beats namespace/name", c("a", "a", 1), []claimant{c("z", "z", 2)}, "z/z"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := scopeOwner(tc.self, tc.others).String(); got != tc.want {
				t.Fatalf("scopeOwner = %s, want %s", got, tc.want)
			}
			// The decision does not depend on the order the cache lists them.
			rev := make([]claimant, len(tc.others))
			for i, o := range tc.others {
				rev[len(rev)-1-i] = o
			}
			if got := scopeOwner(tc.self, rev).String(); got != tc.want {
				t.Fatalf("scopeOwner (reversed order) = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestScopeClaim_SameOwnerFromEveryMember: whichever resource of a scope
// asks, the answer is the same owner (the decision of the loser and of the
// owner agree, so exactly one resource runs).
func TestScopeClaim_SameOwnerFromEveryMember(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	all := []claimant{
		{namespace: "b", name: "x", created: t0},
		{namespace: "a", name: "y", created: t0},
		{namespace: "a", name: "x", created: t0.Add(time.Second)},
	}
	for _, self := range all {
		if got := scopeOwner(self, all); !got.is(all[1]) {
			t.Errorf("asked by %s: owner %s, want a/y", self, got)
		}
	}
	// A timestamp decoded in another location is the same instant.
	local := claimant{namespace: "a", name: "y", created: t0.In(time.FixedZone("x", 3600))}
	if !scopeOwner(local, all).is(local) {
		t.Error("the same instant in another location must compare equal")
	}
}

// TestScopeClaim_DuplicateStalls: the DuplicateScope reason maps to
// Stalled=True (kstatus Failed: an operator must delete one resource), never
// Ready or Reconciling.
func TestScopeClaim_DuplicateStalls(t *testing.T) {
	got := conditionsFor("", recoveryv1.ReasonDuplicateScope, "owned by ns/a")
	want := conditionSet{metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue, recoveryv1.ReasonDuplicateScope, "owned by ns/a"}
	if got != want {
		t.Fatalf("conditionsFor(DuplicateScope) = %+v, want %+v", got, want)
	}
}
