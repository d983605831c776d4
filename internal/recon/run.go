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

import (
	"context"
	"fmt"
	"time"
)

// RunPhase is the lifecycle of one reconciliation run:
//
//	pending → collecting → analyzing → reported
//	any non-terminal phase → failed | cancelled
//
// reported, failed and cancelled are terminal, so a crashed run is as
// inspectable as a job: it stays in the phase it reached.
type RunPhase string

const (
	RunPending    RunPhase = "pending"
	RunCollecting RunPhase = "collecting"
	RunAnalyzing  RunPhase = "analyzing"
	RunReported   RunPhase = "reported"
	RunFailed     RunPhase = "failed"
	RunCancelled  RunPhase = "cancelled"
)

// RunPhases lists every phase.
var RunPhases = []RunPhase{RunPending, RunCollecting, RunAnalyzing, RunReported, RunFailed, RunCancelled}

var runTransitions = map[RunPhase][]RunPhase{
	RunPending:    {RunCollecting, RunFailed, RunCancelled},
	RunCollecting: {RunAnalyzing, RunFailed, RunCancelled},
	RunAnalyzing:  {RunReported, RunFailed, RunCancelled},
}

// Terminal reports whether no transition leaves p.
func (p RunPhase) Terminal() bool { return len(runTransitions[p]) == 0 }

// CanTransition reports whether p → to is legal.
func (p RunPhase) CanTransition(to RunPhase) bool {
	for _, t := range runTransitions[p] {
		if t == to {
			return true
		}
	}
	return false
}

// Run is one reconciliation run (a dry run: detect, explain, plan).
type Run struct {
	ID        string
	Scope     string
	Phase     RunPhase
	Code      ResultCode // failed/cancelled: why
	Detail    string
	Findings  int
	Clean     bool
	PlanID    string
	StartedAt time.Time
	UpdatedAt time.Time
}

// Transition moves the run to phase to at time at, or refuses an illegal move.
func (r *Run) Transition(to RunPhase, at time.Time) error {
	if !r.Phase.CanTransition(to) {
		return fmt.Errorf("recon: run %s: illegal transition %s → %s", r.ID, r.Phase, to)
	}
	r.Phase, r.UpdatedAt = to, at
	return nil
}

// RunStore persists runs at every transition (a later migration adds the
// table; until then a deployment may keep them in the resource's status).
type RunStore interface {
	Save(ctx context.Context, r Run) error
}
