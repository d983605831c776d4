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

// Package completeness serves GET /v2/projection-completeness (FR-APR11): a
// read-only view that keeps point-in-time completeness (what is proven) apart
// from worker liveness (whether the worker is running). A scope can be CURRENT
// with a dead worker, or have a live worker and be BLOCKED; a single "healthy"
// flag would hide one or the other. The endpoint has no operator action, and
// no readiness or liveness probe depends on it (FR-APR10).
package completeness

import (
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Completeness is what is proven about one scope at one point in time: the
// values of the resource's status when its last cycle ended. Every field
// carries a doc comment: docs/reference/completeness.md is generated from
// them (hack/reference), and the generator refuses a field without one.
type Completeness struct {
	// VerifiedThroughSeq is the consensus sequence through which the
	// projection is proven complete (status.verifiedThroughSeq). 0: nothing
	// proven yet.
	VerifiedThroughSeq int64 `json:"verifiedThroughSeq"`
	// ObservedBoundarySeq is the member's applied boundary last observed
	// (status.observedBoundarySeq).
	ObservedBoundarySeq int64 `json:"observedBoundarySeq"`
	// Lag is the boundary minus VerifiedThroughSeq, in sequence numbers
	// (status.lag); the boundary is the frozen sequence of a draining run
	// when that is lower. 0 when CURRENT.
	Lag int64 `json:"lag"`
	// ChainDigest is the output-chain digest through VerifiedThroughSeq
	// (status.chainDigest): equal digests at equal sequences mean the same
	// verified history.
	ChainDigest string `json:"chainDigest,omitempty"`
	// EventCount is the number of verified events through
	// VerifiedThroughSeq (status.eventCount).
	EventCount int64 `json:"eventCount"`
	// LastSuccessfulVerification is when a page, or an idle answer of the
	// member, last verified (status.lastSuccessfulVerification).
	LastSuccessfulVerification *time.Time `json:"lastSuccessfulVerification,omitempty"`
	// State is CATCHING_UP, CURRENT, RETRYING or BLOCKED (status.state);
	// empty before the scope's first cycle ended.
	State string `json:"state,omitempty"`
	// Reason is the stable code explaining State, a refusal code when
	// RETRYING or BLOCKED (status.reason).
	Reason string `json:"reason,omitempty"`
	// EventsPerSecond is the catch-up's rate while CATCHING_UP
	// (status.progress.eventsPerSecond).
	EventsPerSecond int64 `json:"eventsPerSecond,omitempty"`
	// ETA estimates the time to CURRENT at that rate, e.g. "1m40s", while
	// CATCHING_UP (status.progress.eta); an estimate, not a promise.
	ETA string `json:"eta,omitempty"`
	// OpenDrift names the reconciliation whose last report holds findings
	// (status.openDrift): a CURRENT scope with open drift is complete in
	// what was verified, not free of known errors.
	OpenDrift *OpenDrift `json:"openDrift,omitempty"`
}

// OpenDrift is what a reconciliation of the scope knows to be wrong.
type OpenDrift struct {
	// Reconciliation is the name of the ProjectionReconciliation (same
	// namespace) whose last report holds the findings.
	Reconciliation string `json:"reconciliation"`
	// Findings is the number of findings of that report.
	Findings int32 `json:"findings"`
}

// Liveness is whether the worker of a scope is running, apart from what is
// proven: a scope can be CURRENT with a dead worker, or have a live worker
// and be BLOCKED.
type Liveness struct {
	// LastCycleStart is when this manager last started a cycle of the scope.
	LastCycleStart *time.Time `json:"lastCycleStart,omitempty"`
	// LastCycleEnd is when this manager last ended a cycle of the scope.
	LastCycleEnd *time.Time `json:"lastCycleEnd,omitempty"`
	// InFlight is true while a cycle of the scope runs.
	InFlight bool `json:"inFlight"`
	// AutoRecovery is whether the cycle may write the projection
	// (--enable-auto-recovery); false: it only reports completeness.
	AutoRecovery bool `json:"autoRecovery"`
}

// Scope is one entry of the answer.
type Scope struct {
	// Namespace is the ProjectionRecovery's namespace.
	Namespace string `json:"namespace"`
	// Name is the ProjectionRecovery's name.
	Name string `json:"name"`
	// Scope is the projection scope it recovers (spec.scope).
	Scope string `json:"scope"`
	// Completeness is what is proven about the scope.
	Completeness Completeness `json:"completeness"`
	// Worker is whether the scope's worker is running.
	Worker Liveness `json:"worker"`
}

// Answer is the body of GET /v2/projection-completeness.
type Answer struct {
	// GeneratedAt is when this manager built the answer (UTC).
	GeneratedAt time.Time `json:"generatedAt"`
	// Scopes lists every scope this manager has run a cycle of, sorted by
	// namespace and name; empty, never null, when there is none.
	Scopes []Scope `json:"scopes"`
}

// Registry holds the latest view of every scope of this manager.
type Registry struct {
	mu     sync.RWMutex
	scopes map[string]*Scope
	now    func() time.Time
}

// NewRegistry returns an empty registry; now is the injected clock.
func NewRegistry(now func() time.Time) *Registry {
	if now == nil {
		now = time.Now
	}
	return &Registry{scopes: map[string]*Scope{}, now: now}
}

func key(namespace, name string) string { return namespace + "/" + name }

func (r *Registry) entry(namespace, name, scope string) *Scope {
	k := key(namespace, name)
	e, ok := r.scopes[k]
	if !ok {
		e = &Scope{Namespace: namespace, Name: name}
		r.scopes[k] = e
	}
	e.Scope = scope
	return e
}

// CycleStarted marks a cycle in flight.
func (r *Registry) CycleStarted(namespace, name, scope string, at time.Time, autoRecovery bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entry(namespace, name, scope)
	e.Worker.LastCycleStart, e.Worker.InFlight, e.Worker.AutoRecovery = &at, true, autoRecovery
}

// CycleEnded records the end of a cycle and the completeness it left.
func (r *Registry) CycleEnded(namespace, name, scope string, at time.Time, c Completeness) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entry(namespace, name, scope)
	e.Worker.LastCycleEnd, e.Worker.InFlight = &at, false
	e.Completeness = c
}

// CatchingUp names ("namespace/name") a scope of this manager whose last
// cycle left it CATCHING_UP and which is in flight or ended a cycle within
// `within` of now, "" when none; the first by name, so the answer stays
// the same while the same scopes catch up. A scheduled dry run waits for it.
func (r *Registry) CatchingUp(now time.Time, within time.Duration) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	found := ""
	for k, e := range r.scopes {
		if e.Completeness.State != stateCatchingUp || (found != "" && k >= found) {
			continue
		}
		if end := e.Worker.LastCycleEnd; e.Worker.InFlight || (end != nil && now.Sub(*end) < within) {
			found = k
		}
	}
	return found
}

// stateCatchingUp is Completeness.State while verified pages are applied.
const stateCatchingUp = "CATCHING_UP"

// Forget drops a deleted resource.
func (r *Registry) Forget(namespace, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.scopes, key(namespace, name))
}

// Snapshot returns a copy of every scope, sorted by namespace/name.
func (r *Registry) Snapshot() Answer {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a := Answer{GeneratedAt: r.now().UTC(), Scopes: make([]Scope, 0, len(r.scopes))}
	for _, e := range r.scopes {
		a.Scopes = append(a.Scopes, *e)
	}
	sort.Slice(a.Scopes, func(i, j int) bool {
		return key(a.Scopes[i].Namespace, a.Scopes[i].Name) < key(a.Scopes[j].Namespace, a.Scopes[j].Name)
	})
	return a
}

// Path is where the endpoint is served.
const Path = "/v2/projection-completeness"

// Handler serves the registry read-only: GET and HEAD only, optional
// ?scope= filter. Any other method is 405: there is no operator action here.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != Path {
			http.NotFound(w, req)
			return
		}
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read-only endpoint: GET or HEAD", http.StatusMethodNotAllowed)
			return
		}
		a := r.Snapshot()
		if want := req.URL.Query().Get("scope"); want != "" {
			kept := a.Scopes[:0]
			for _, s := range a.Scopes {
				if s.Scope == want {
					kept = append(kept, s)
				}
			}
			a.Scopes = kept
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(a)
	})
}
