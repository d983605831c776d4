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
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/catchup"
	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// TestComputeStatus_VerifiedNeverRewindsUnlessTheCursorSaysSo: a CURRENT
// scope at 4000 keeps reporting its last known cursor, marked as not
// re-checked, whenever a reconcile could not read the cursor (database
// unreachable, unusable spec, schema missing, suspended); a cursor read from
// SQL is mirrored as it is, a reset included; a drained DRAINING run shows
// lag 0. Pure: fake clock, no I/O.
func TestComputeStatus_VerifiedNeverRewindsUnlessTheCursorSaysSo(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	verifiedAt := metav1.NewTime(clk.Now().Add(-time.Hour))
	prev := recoveryv1.ProjectionRecoveryStatus{
		State: recoveryv1.StateCurrent, VerifiedThroughSeq: 4000, ObservedBoundarySeq: 4000, Lag: 0,
		ChainDigest: strings.Repeat("a", 64), EventCount: 9000, LastSuccessfulVerification: &verifiedAt,
	}
	frozen := int64(3000)
	cases := []struct {
		name                                string
		scope                               recoveryScope
		wantState                           recoveryv1.RecoveryState
		wantReason                          string
		wantVerified, wantBoundary, wantLag int64
		wantStale                           bool   // message says "not re-checked"
		wantCond                            string // the condition that is True
		wantCondReason                      string
	}{
		{"database unreachable", recoveryScope{state: recoveryv1.StateRetrying, reason: string(codes.DatabaseUnavailable), message: "DATABASE_UNAVAILABLE: connecting",
			cycle: &catchup.Result{State: catchup.StateRetrying}},
			recoveryv1.StateRetrying, string(codes.DatabaseUnavailable), 4000, 4000, 0, true, recoveryv1.ConditionReconciling, recoveryv1.ReasonRetrying},
		{"spec unusable", recoveryScope{reason: recoveryv1.ReasonInvalidSpec, message: "spec.source.tls.caSecretRef holds no PEM certificate", cycle: &catchup.Result{}},
			recoveryv1.StateCurrent, recoveryv1.ReasonInvalidSpec, 4000, 4000, 0, true, recoveryv1.ConditionStalled, recoveryv1.ReasonInvalidSpec},
		{"schema missing", recoveryScope{reason: string(codes.SchemaMissing), message: "run `manager migrate`", cycle: &catchup.Result{}},
			recoveryv1.StateCurrent, string(codes.SchemaMissing), 4000, 4000, 0, true, recoveryv1.ConditionStalled, recoveryv1.ReasonSchemaMissing},
		{"suspended", recoveryScope{reason: recoveryv1.ReasonSuspended, message: "spec.suspend is true: no cycle runs"},
			recoveryv1.StateCurrent, recoveryv1.ReasonSuspended, 4000, 4000, 0, true, "", recoveryv1.ReasonSuspended},
		{"cursor reset in SQL is a real rewind", recoveryScope{state: recoveryv1.StateCatchingUp, message: "verified through 0 of boundary 4000",
			cycle: &catchup.Result{State: catchup.StateCatchingUp, CursorRead: true, Cursor: store.Genesis("s"), Boundary: 4000}},
			recoveryv1.StateCatchingUp, "", 0, 4000, 4000, false, recoveryv1.ConditionReconciling, recoveryv1.ReasonCatchingUp},
		{"source down, cursor read", recoveryScope{state: recoveryv1.StateRetrying, reason: string(codes.SourceUnavailable), message: "down",
			cycle: &catchup.Result{State: catchup.StateRetrying, CursorRead: true, Boundary: 4000,
				Cursor: store.Cursor{Exists: true, VerifiedThroughSeq: 4000, LastObservedBoundarySeq: 4000, ChainDigest: strings.Repeat("a", 64), EventCount: 9000}}},
			recoveryv1.StateRetrying, string(codes.SourceUnavailable), 4000, 4000, 0, false, recoveryv1.ConditionReconciling, recoveryv1.ReasonRetrying},
		{"drained DRAINING run", recoveryScope{state: recoveryv1.StateCurrent, message: "drained",
			cycle: &catchup.Result{State: catchup.StateCurrent, CursorRead: true, Boundary: 5000, Frozen: &frozen,
				Cursor: store.Cursor{Exists: true, VerifiedThroughSeq: 3000, LastObservedBoundarySeq: 5000, ChainDigest: chain.Genesis}}},
			recoveryv1.StateCurrent, "", 3000, 5000, 0, false, recoveryv1.ConditionReady, recoveryv1.ReasonCurrent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &recoveryv1.ProjectionRecovery{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", Generation: 2}, Status: *prev.DeepCopy()}
			s := tc.scope
			s.obj, s.now = obj, clk.Now()
			(&ProjectionRecoveryReconciler{}).computeStatus(&s)
			st := obj.Status
			if st.State != tc.wantState || st.Reason != tc.wantReason {
				t.Fatalf("state/reason = %s/%s, want %s/%s", st.State, st.Reason, tc.wantState, tc.wantReason)
			}
			if st.VerifiedThroughSeq != tc.wantVerified || st.ObservedBoundarySeq != tc.wantBoundary || st.Lag != tc.wantLag {
				t.Fatalf("verified/boundary/lag = %d/%d/%d, want %d/%d/%d", st.VerifiedThroughSeq, st.ObservedBoundarySeq, st.Lag, tc.wantVerified, tc.wantBoundary, tc.wantLag)
			}
			if stale := strings.Contains(st.Message, "not re-checked"); stale != tc.wantStale {
				t.Fatalf("message %q: not-re-checked note = %v, want %v", st.Message, stale, tc.wantStale)
			}
			if tc.wantStale && (st.LastSuccessfulVerification == nil || !st.LastSuccessfulVerification.Equal(&verifiedAt) || st.ChainDigest != prev.ChainDigest) {
				t.Fatalf("lastSuccessfulVerification/digest changed: %v %s", st.LastSuccessfulVerification, st.ChainDigest)
			}
			for _, typ := range []string{recoveryv1.ConditionReady, recoveryv1.ConditionReconciling, recoveryv1.ConditionStalled} {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if typ == recoveryv1.ConditionReady && tc.wantReason == recoveryv1.ReasonSuspended {
					// Suspended asserts nothing about completeness: no Ready at all.
					if c != nil {
						t.Fatalf("suspended: Ready = %+v, want no Ready condition", c)
					}
					continue
				}
				if c == nil || c.Reason != tc.wantCondReason || c.ObservedGeneration != 2 || (c.Status == metav1.ConditionTrue) != (typ == tc.wantCond) {
					t.Fatalf("condition %s = %+v, want True only for %q with reason %s", typ, c, tc.wantCond, tc.wantCondReason)
				}
				if c.Message != st.Message {
					t.Fatalf("condition %s message %q differs from status %q", typ, c.Message, st.Message)
				}
			}
		})
	}
}
