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
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

const docs = "https://github.com/projection-recovery/projection-recovery/blob/main/docs/troubleshooting.md"

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason}
}

// TestStatus_PointsAtTroubleshooting: under the table, status prints one
// line per resource that is failing or waits on a person (RETRYING or
// BLOCKED, Stalled, or Ready=False without progressing), linking the
// troubleshooting entry of its code; a resource that is CURRENT, catching
// up or suspended gets none. The link is built from the code through the
// anchor rules, never printed raw.
func TestStatus_PointsAtTroubleshooting(t *testing.T) {
	T, F := metav1.ConditionTrue, metav1.ConditionFalse
	for _, tc := range []struct {
		name string
		st   recoveryv1.ProjectionRecoveryStatus
		want string // "" for no pointer
	}{
		{"blocked", recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateBlocked, Reason: "ORPHAN_TRADE",
			Conditions: []metav1.Condition{cond("Ready", F, "Blocked"), cond("Stalled", T, "Blocked")}}, "x: ORPHAN_TRADE, see " + docs + "#orphan_trade"},
		{"retrying", recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateRetrying, Reason: "SOURCE_UNAVAILABLE",
			Conditions: []metav1.Condition{cond("Ready", F, "Retrying"), cond("Reconciling", T, "Retrying")}}, "x: SOURCE_UNAVAILABLE, see " + docs + "#source_unavailable"},
		{"schema missing, no state", recoveryv1.ProjectionRecoveryStatus{Reason: "SCHEMA_MISSING",
			Conditions: []metav1.Condition{cond("Ready", F, "SchemaMissing"), cond("Stalled", T, "SchemaMissing")}}, "x: SCHEMA_MISSING, see " + docs + "#schema_missing"},
		{"Secret missing", recoveryv1.ProjectionRecoveryStatus{Reason: "SecretNotFound",
			Conditions: []metav1.Condition{cond("Ready", F, "SecretNotFound"), cond("Stalled", T, "SecretNotFound")}}, "x: SecretNotFound, see " + docs + "#secretnotfound"},
		{"stalled, reason only in the condition", recoveryv1.ProjectionRecoveryStatus{
			Conditions: []metav1.Condition{cond("Ready", F, "DuplicateScope"), cond("Stalled", T, "DuplicateScope")}}, "x: DuplicateScope, see " + docs + "#duplicatescope"},
		{"hostile reason", recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateBlocked, Reason: "A\x1b[2J\nFORGED"},
			"x: A\\x1b[2J\\x0aFORGED, see " + docs + "#a2jforged"},
		{"catching up", recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateCatchingUp,
			Conditions: []metav1.Condition{cond("Ready", F, "CatchingUp"), cond("Reconciling", T, "CatchingUp")}}, ""},
		{"current", recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateCurrent,
			Conditions: []metav1.Condition{cond("Ready", T, "Current")}}, ""},
		{"suspended", recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateCurrent, Reason: "Suspended",
			Conditions: []metav1.Condition{cond("Reconciling", F, "Suspended"), cond("Stalled", F, "Suspended")}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			items := []recoveryv1.ProjectionRecovery{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}, Status: tc.st}}
			if err := writeRecoveryTable(&b, items, false, t0); err != nil {
				t.Fatal(err)
			}
			got := b.String()
			if tc.want == "" {
				if strings.Contains(got, "troubleshooting.md") {
					t.Fatalf("a pointer for a resource that needs nothing:\n%s", got)
				}
				return
			}
			if !strings.Contains(got, "\n"+tc.want+"\n") {
				t.Fatalf("output lacks the line %q:\n%s", tc.want, got)
			}
			if what, bad := terminalHazard(got, true); bad {
				t.Fatalf("printed %s raw:\n%s", what, esc(got))
			}
		})
	}
	// With -A the pointer names the namespace too.
	var b bytes.Buffer
	_ = writeRecoveryTable(&b, []recoveryv1.ProjectionRecovery{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"},
		Status: recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateBlocked, Reason: "CHAIN_MISMATCH"}}}, true, t0)
	if !strings.Contains(b.String(), "\nns/x: CHAIN_MISMATCH, see "+docs+"#chain_mismatch\n") {
		t.Fatalf("-A output lacks the namespaced pointer:\n%s", b.String())
	}
}
