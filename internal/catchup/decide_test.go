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

package catchup

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

func TestClassify_TransientRetriesEverythingElseBlocks(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		wantState State
		wantCode  codes.Code
	}{
		{"lease held retries", &codes.Refusal{Code: codes.LeaseHeld}, StateRetrying, codes.LeaseHeld},
		{"superseded retries", &codes.Refusal{Code: codes.Superseded}, StateRetrying, codes.Superseded},
		{"database unavailable retries", &codes.Refusal{Code: codes.DatabaseUnavailable}, StateRetrying, codes.DatabaseUnavailable},
		{"source unreachable retries", &source.UnavailableError{Err: errors.New("connection refused")}, StateRetrying, codes.SourceUnavailable},
		{"orphan trade blocks", &codes.Refusal{Code: codes.OrphanTrade}, StateBlocked, codes.OrphanTrade},
		{"unexplained balance blocks", &codes.Refusal{Code: codes.UnexplainedBalance}, StateBlocked, codes.UnexplainedBalance},
		{"source refusal blocks", &source.RefusalError{Status: 409, Code: "MISSING_GENESIS"}, StateBlocked, codes.SourceRefused},
		{"unclassified error blocks as internal", errors.New("a bug"), StateBlocked, codes.Internal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			state, code := classify(tc.err)
			if state != tc.wantState || code != tc.wantCode {
				t.Errorf("classify(%v) = %s/%s, want %s/%s", tc.err, state, code, tc.wantState, tc.wantCode)
			}
		})
	}
}

func TestDecide_IdleCheckSuffices(t *testing.T) {
	cur := store.Cursor{Exists: true, State: store.StateCurrent, VerifiedThroughSeq: 100, LastObservedBoundarySeq: 100}
	cases := []struct {
		name string
		cur  store.Cursor
		page pageView
		want bool
	}{
		{"idle at the recorded boundary", cur, pageView{idle: true, boundary: 100, through: 100}, true},
		{"boundary grew", cur, pageView{idle: false, boundary: 120, through: 110}, false},
		{"cursor not yet recorded CURRENT", store.Cursor{Exists: true, State: store.StateCatchingUp, VerifiedThroughSeq: 100, LastObservedBoundarySeq: 90}, pageView{idle: true, boundary: 100, through: 100}, false},
		{"no cursor", store.Cursor{}, pageView{idle: true}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := idleCheckSuffices(tc.cur, tc.page); got != tc.want {
				t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}

func TestDecide_StateAfterProgress(t *testing.T) {
	if stateAfterProgress(50, 100, false) != StateCatchingUp {
		t.Error("behind the boundary must be CATCHING_UP")
	}
	if stateAfterProgress(100, 100, false) != StateCurrent {
		t.Error("at the boundary must be CURRENT")
	}
	if stateAfterProgress(40, 100, true) != StateCurrent {
		t.Error("a page reporting current (DRAINING at frozen seq) must be CURRENT")
	}
}

func TestDecide_GateOf(t *testing.T) {
	f := int64(100)
	active := store.Run{RunID: 1, Scope: "s", Epoch: 1, Managed: true, Selected: true, Phase: store.PhaseActive}
	draining := active
	draining.Phase, draining.FrozenSeq = store.PhaseDraining, &f
	sealed := active
	sealed.Phase = store.PhaseSealed
	abandoned := active
	abandoned.Phase = "ABANDONED"
	unmanaged := active
	unmanaged.Managed = false
	at := func(v int64) store.Cursor { return store.Cursor{Exists: true, VerifiedThroughSeq: v} }
	cases := []struct {
		name        string
		cur         store.Cursor
		run         store.Run
		wantCode    codes.Code
		wantDrained bool
	}{
		{"active run fetches", at(50), active, "", false},
		{"no selected run", at(50), store.Run{Scope: "s"}, codes.NotEligible, false},
		{"sealed", at(50), sealed, codes.NotEligible, false},
		{"abandoned", at(50), abandoned, codes.NotEligible, false},
		{"not managed", at(50), unmanaged, codes.NotEligible, false},
		{"draining below f fetches", at(99), draining, "", false},
		{"draining at f: CURRENT, nothing fetched", at(100), draining, "", true},
		{"draining past f", at(101), draining, codes.BeyondFrozen, false},
		{"genesis on a draining run fetches", store.Genesis("s"), draining, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := gateOf(tc.cur, tc.run)
			if g.code != tc.wantCode || g.drained != tc.wantDrained {
				t.Fatalf("gateOf = %+v, want code %q drained %v", g, tc.wantCode, tc.wantDrained)
			}
			if g.code != "" && !strings.Contains(g.detail, string(g.code)) {
				t.Fatalf("detail %q does not name the code", g.detail)
			}
		})
	}
}

func TestDecide_EffectiveBoundaryAndLag(t *testing.T) {
	f := int64(100)
	cases := []struct {
		name                  string
		boundary, verified    int64
		frozen                *int64
		wantBoundary, wantLag int64
		wantState             State
	}{
		{"active behind", 200, 150, nil, 200, 50, StateCatchingUp},
		{"active current", 200, 200, nil, 200, 0, StateCurrent},
		{"draining at f, member past it", 200, 100, &f, 100, 0, StateCurrent},
		{"draining below f", 200, 60, &f, 100, 40, StateCatchingUp},
		{"draining, member still below f", 80, 80, &f, 80, 0, StateCurrent},
		{"never negative", 50, 60, nil, 50, 0, StateCurrent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := effectiveBoundary(tc.boundary, tc.frozen)
			if b != tc.wantBoundary {
				t.Fatalf("effectiveBoundary = %d, want %d", b, tc.wantBoundary)
			}
			if lag := Lag(tc.boundary, tc.verified, tc.frozen); lag != tc.wantLag {
				t.Fatalf("Lag = %d, want %d", lag, tc.wantLag)
			}
			if st := stateAfterProgress(tc.verified, b, false); st != tc.wantState {
				t.Fatalf("state = %s, want %s", st, tc.wantState)
			}
		})
	}
}

func TestProgressMessage_DependsOnTheCursorOnly(t *testing.T) {
	f := int64(100)
	cases := []struct {
		name               string
		verified, boundary int64
		frozen             *int64
		want               string
	}{
		{"active run behind the boundary", 150, 200, nil, "verified through 150 of boundary 200"},
		{"draining run below its frozen sequence", 60, 200, &f, "verified through 60 of the DRAINING run's frozen sequence 100 (the member's boundary is 200)"},
		{"draining run drained at its frozen sequence", 100, 200, &f, "DRAINING run verified through its frozen sequence 100; nothing past it is fetched (the member's boundary is 200)"},
		{"draining run with the member still below f", 80, 80, &f, "verified through 80 of boundary 80"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := progressMessage(tc.verified, tc.boundary, tc.frozen); got != tc.want {
				t.Errorf("progressMessage(%d, %d) = %q, want %q", tc.verified, tc.boundary, got, tc.want)
			}
		})
	}
}

func TestDecide_LeaseNeedsRenewal(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ttl := 10 * time.Second
	cases := []struct {
		name    string
		elapsed time.Duration
		want    bool
	}{
		{"just taken", 0, false},
		{"less than half the lease gone", 4 * time.Second, false},
		{"half the lease gone: renew before writing", 5 * time.Second, true},
		{"expired during a slow fetch: take it again", 12 * time.Second, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := leaseNeedsRenewal(t0, t0.Add(tc.elapsed), ttl); got != tc.want {
				t.Errorf("leaseNeedsRenewal(after %s) = %v, want %v", tc.elapsed, got, tc.want)
			}
		})
	}
}
