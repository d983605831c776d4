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

package completeness

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestFRAPR11_CompletenessSeparatedFromLiveness: the answer keeps what is
// proven (completeness) apart from whether the worker runs (liveness), and a
// scope stays CURRENT in the answer while a new cycle is in flight.
func TestFRAPR11_CompletenessSeparatedFromLiveness(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	reg := NewRegistry(func() time.Time { return t0 })
	verified := t0.Add(-time.Minute)
	reg.CycleStarted("ns", "a", "venue-a", t0, true)
	reg.CycleEnded("ns", "a", "venue-a", t0.Add(time.Second), Completeness{VerifiedThroughSeq: 90, ObservedBoundarySeq: 90, State: "CURRENT", LastSuccessfulVerification: &verified})
	reg.CycleStarted("ns", "a", "venue-a", t0.Add(2*time.Second), true)
	reg.CycleStarted("ns", "b", "venue-b", t0, false)

	srv := httptest.NewServer(reg.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + Path + "?scope=venue-a")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a Answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	if len(a.Scopes) != 1 {
		t.Fatalf("scope filter: got %d scopes", len(a.Scopes))
	}
	s := a.Scopes[0]
	if s.Completeness.State != "CURRENT" || s.Completeness.VerifiedThroughSeq != 90 || !s.Worker.InFlight || s.Worker.LastCycleEnd == nil {
		t.Fatalf("entry = %+v", s)
	}
	if !s.Completeness.LastSuccessfulVerification.Equal(verified) {
		t.Fatalf("last verification = %v", s.Completeness.LastSuccessfulVerification)
	}
}

// TestFRAPR11_ReadOnly: no operator action on the endpoint.
func TestFRAPR11_ReadOnly(t *testing.T) {
	srv := httptest.NewServer(NewRegistry(nil).Handler())
	defer srv.Close()
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		t.Run(m, func(t *testing.T) {
			req, _ := http.NewRequest(m, srv.URL+Path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("%s: status %d, want 405", m, resp.StatusCode)
			}
		})
	}
	resp, err := http.Get(srv.URL + "/v2/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown path: status %d, want 404", resp.StatusCode)
	}
}

// CatchingUp names this manager's scope catching up now: CATCHING_UP and in
// flight or ended a cycle within the window; never a CURRENT one, a stale
// one, or one forgotten; the first by name when several are.
func TestRegistry_CatchingUp(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	r := NewRegistry(func() time.Time { return now })
	within := 2 * time.Minute
	check := func(name, want string) {
		t.Run(name, func(t *testing.T) {
			if got := r.CatchingUp(now, within); got != want {
				t.Fatalf("CatchingUp = %q, want %q", got, want)
			}
		})
	}
	check("empty", "")
	r.CycleEnded("ns", "b", "s-b", now.Add(-time.Second), Completeness{State: "CURRENT"})
	check("current only", "")
	r.CycleEnded("ns", "c", "s-c", now.Add(-3*time.Minute), Completeness{State: "CATCHING_UP"})
	check("catching up, but no cycle for longer than the window", "")
	r.CycleStarted("ns", "c", "s-c", now, true)
	check("the stale one's cycle in flight again", "ns/c")
	r.CycleEnded("ns", "a", "s-a", now.Add(-10*time.Second), Completeness{State: "CATCHING_UP"})
	check("two: the first by name", "ns/a")
	r.Forget("ns", "a")
	r.CycleEnded("ns", "c", "s-c", now, Completeness{State: "CURRENT"})
	check("forgotten and caught up", "")
}
