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
package soak

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"time"
)

// FaultKind names one kind of fault the soak injects.
type FaultKind string

const (
	// KillManager sends SIGKILL to a manager, preferably while its backend
	// has a transaction open (mid-page), and restarts it after Step.For.
	KillManager FaultKind = "kill-manager"
	// FreezeManager sends SIGSTOP for longer than the lease, then SIGCONT:
	// the zombie writer the fence exists for (FR-APR08).
	FreezeManager FaultKind = "freeze-manager"
	// RestartPostgres stops PostgreSQL in immediate mode and starts it again.
	RestartPostgres FaultKind = "restart-postgres"
	// TerminateBackend terminates the managers' backends that are inside a
	// transaction (a page, a lease write, an outbox drain).
	TerminateBackend FaultKind = "terminate-backend"
	// RestartNATS shuts the NATS server down for Step.For and starts it on
	// the same port: live events published meanwhile are lost.
	RestartNATS FaultKind = "restart-nats"
	// APIUnreachable blackholes or resets the managers' way to the API
	// server for Step.For.
	APIUnreachable FaultKind = "api-unreachable"
	// RestartMember kills one schedule's member and restarts it on the same
	// log after Step.For: a new recording term.
	RestartMember FaultKind = "restart-member"
	// MemberFault delays, cuts short or resets one member's answers through
	// its proxy for Step.For.
	MemberFault FaultKind = "member-fault"
	// ClockSkew starts a manager with a clock off by an offset and running
	// at another rate (every manager start draws one).
	ClockSkew FaultKind = "clock-skew"
)

// globalKinds hit every schedule of a batch; the member kinds hit one.
var globalKinds = []FaultKind{KillManager, FreezeManager, RestartPostgres, TerminateBackend, RestartNATS, APIUnreachable}

// Step is one fault at an offset from the start of the batch.
type Step struct {
	At     time.Duration
	Kind   FaultKind
	Target int           // manager index (global kinds) or schedule index (member kinds)
	For    time.Duration // how long the fault lasts before it is undone
	Proxy  Fault         // MemberFault and APIUnreachable: what the proxy does
}

func (s Step) String() string {
	extra := ""
	if s.Kind == MemberFault || s.Kind == APIUnreachable {
		extra = " " + s.Proxy.Mode.String()
	}
	return fmt.Sprintf("%s@%s[target=%d for=%s%s]", s.Kind, s.At.Round(time.Millisecond), s.Target, s.For.Round(time.Millisecond), extra)
}

// Schedule is one scope's part of a batch: its member's workload and its
// resource's paging. The scope name carries the batch seed, so a failing
// scope names the seed that replays it.
type Schedule struct {
	Index         int
	Scope         string
	WorkloadSeed  uint64
	DropSeed      uint64
	Commands      int
	Accounts      int
	Rate          float64 // member commands per second
	DropRate      float64 // share of the live feed lost
	PageSize      int
	PagesPerCycle int
}

// Plan is everything a batch does, drawn from its seed alone: the same seed
// gives the same schedules, the same faults at the same offsets and the same
// clock skews (timing of the real processes around them aside).
type Plan struct {
	Seed      uint64
	Managers  int
	Window    time.Duration
	Lease     time.Duration
	Schedules []Schedule
	Steps     []Step
	rng       *rand.Rand
}

// Options size a plan.
type Options struct {
	Schedules int           // scopes in the batch, each its own schedule
	Managers  int           // manager processes (at least 2)
	Window    time.Duration // faults start within it
	Lease     time.Duration // the resources' leaseDuration
}

// NewPlan draws a batch from seed.
func NewPlan(seed uint64, o Options) Plan {
	rng := rand.New(rand.NewPCG(seed, 0x50a4))
	p := Plan{Seed: seed, Managers: o.Managers, Window: o.Window, Lease: o.Lease, rng: rng}
	for i := 0; i < o.Schedules; i++ {
		p.Schedules = append(p.Schedules, Schedule{
			Index:         i,
			Scope:         fmt.Sprintf("soak-%d-%d", seed, i),
			WorkloadSeed:  rng.Uint64()%1_000_000 + 1,
			DropSeed:      rng.Uint64()%1_000_000 + 1,
			Commands:      200 + rng.IntN(1200),
			Accounts:      2 + rng.IntN(9),
			Rate:          float64(300 + rng.IntN(500)),
			DropRate:      0.05 + 0.6*rng.Float64(),
			PageSize:      []int{100, 137, 250, 500, 1000}[rng.IntN(5)], // whole commands fit (a smaller page refuses one that does not: RECOVERY_COMMAND_EXCEEDS_PAGE)
			PagesPerCycle: 1 + rng.IntN(8),
		})
	}
	w := o.Window
	at := func(room time.Duration) time.Duration { // a start that leaves room to end within the window
		span := w - room
		if span < time.Second {
			span = time.Second
		}
		return time.Duration(rng.Int64N(int64(span)))
	}
	// Global faults: every kind once per batch, in a random order at random
	// offsets, and up to three more drawn at random.
	kinds := append([]FaultKind(nil), globalKinds...)
	for extra := rng.IntN(4); extra > 0; extra-- {
		kinds = append(kinds, globalKinds[rng.IntN(len(globalKinds))])
	}
	for _, kind := range kinds {
		s := Step{Kind: kind, Target: rng.IntN(o.Managers)}
		switch s.Kind {
		case KillManager:
			s.For = ms(rng, 200, 2000)
		case FreezeManager:
			s.For = o.Lease + ms(rng, 500, 2500)
		case RestartNATS:
			s.For = ms(rng, 200, 2500)
		case APIUnreachable:
			s.For = ms(rng, 1000, 6000)
			s.Proxy = Fault{Mode: []FaultMode{Blackhole, Reset}[rng.IntN(2)]}
		}
		s.At = at(s.For)
		p.Steps = append(p.Steps, s)
	}
	// Member faults: up to two per schedule.
	for i := range p.Schedules {
		for j := rng.IntN(3); j > 0; j-- {
			s := Step{Target: i}
			if rng.IntN(3) == 0 {
				s.Kind, s.For = RestartMember, ms(rng, 100, 1500)
			} else {
				s.Kind, s.For = MemberFault, ms(rng, 500, 4000)
				switch rng.IntN(3) {
				case 0:
					s.Proxy = Fault{Mode: Delay, Delay: ms(rng, 20, 700)}
				case 1:
					s.Proxy = Fault{Mode: CutShort, CutAfter: rng.IntN(4096)}
				default:
					s.Proxy = Fault{Mode: Reset}
				}
			}
			s.At = at(s.For)
			p.Steps = append(p.Steps, s)
		}
	}
	sort.SliceStable(p.Steps, func(i, j int) bool { return p.Steps[i].At < p.Steps[j].At })
	return p
}

// Skew draws the clock a manager starts with: offset within ±10 minutes,
// rate within [0.8, 1.25]. It is drawn in start order from the plan's
// generator, after the steps, so it does not shift them.
func (p *Plan) Skew() string {
	off := time.Duration(p.rng.Int64N(int64(20*time.Minute))) - 10*time.Minute
	rate := 0.8 + 0.45*p.rng.Float64()
	return fmt.Sprintf("offset=%s,rate=%.3f", off.Round(time.Millisecond), rate)
}

// End is when the last fault is undone.
func (p Plan) End() time.Duration {
	end := p.Window
	for _, s := range p.Steps {
		end = max(end, s.At+s.For)
	}
	return end
}

func ms(rng *rand.Rand, lo, hi int) time.Duration {
	return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond
}
