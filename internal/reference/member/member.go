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

package member

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
)

// Publisher sends one message; *nats.Conn satisfies it.
type Publisher interface {
	Publish(subject string, data []byte) error
}

// DefaultSubject is the live feed subject of a scope.
func DefaultSubject(scope string) string { return "projection.events." + scope }

// MemberConfig wires a reference member: a workload appends commands to the
// log, each is committed, applied to the live engine, and every output's
// exact wire bytes are published (minus the deliberately dropped ones).
type MemberConfig struct {
	Log       *engine.Log
	Workload  *engine.Workload
	Publisher Publisher // nil: nothing is published (everything counts as dropped)
	Subject   string    // default DefaultSubject(scope)
	// DropRate in [0,1] is the probability that an event is not published.
	// Dropped events stay in the log: this is how gaps in the live feed are
	// made for the recovery to close.
	DropRate    float64
	DropSeed    uint64
	Interval    time.Duration // between commands in Run; 0 = as fast as possible
	MaxCommands int64         // Run stops after the log holds this many commands (0 = no limit)
	Logger      *slog.Logger
}

// Member is a running reference member.
type Member struct {
	cfg    MemberConfig
	live   *engine.Engine
	rng    *rand.Rand
	logger *slog.Logger

	published, dropped, publishErrors atomic.Int64
}

// NewMember recovers the live engine from the log (committing anything
// appended but not yet committed: this member is the only writer, so every
// appended command was accepted) and returns a member ready to Step or Run.
func NewMember(cfg MemberConfig) (*Member, error) {
	if cfg.Log == nil || cfg.Workload == nil {
		return nil, fmt.Errorf("member: log and workload required")
	}
	if cfg.DropRate < 0 || cfg.DropRate > 1 {
		return nil, fmt.Errorf("member: drop rate %v outside [0,1]", cfg.DropRate)
	}
	if cfg.Subject == "" {
		cfg.Subject = DefaultSubject(cfg.Log.Descriptor().Scope)
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Log.Commit(cfg.Log.LastSeq()); err != nil {
		return nil, fmt.Errorf("member: %w", err)
	}
	live, err := engine.Recover(cfg.Log.Dir(), cfg.Log.Committed())
	if err != nil {
		return nil, fmt.Errorf("member: recover live engine: %w", err)
	}
	return &Member{cfg: cfg, live: live, rng: rand.New(rand.NewPCG(cfg.DropSeed, 0x5eed)), logger: lg}, nil
}

// Step appends, commits and applies one workload command and publishes its
// outputs. Publishing happens after commit: the feed never carries an event
// the contract could not serve.
func (m *Member) Step() (engine.Command, []engine.Output, error) {
	c, err := m.cfg.Log.Append(m.cfg.Workload.Next())
	if err != nil {
		return c, nil, fmt.Errorf("member: append: %w", err)
	}
	if err := m.cfg.Log.Commit(c.Seq); err != nil {
		return c, nil, fmt.Errorf("member: commit %d: %w", c.Seq, err)
	}
	outs, err := m.live.Apply(c)
	if err != nil {
		return c, nil, fmt.Errorf("member: apply %d: %w", c.Seq, err)
	}
	for _, o := range outs {
		if m.cfg.Publisher == nil || (m.cfg.DropRate > 0 && m.rng.Float64() < m.cfg.DropRate) {
			m.dropped.Add(1)
			continue
		}
		if err := m.cfg.Publisher.Publish(m.cfg.Subject, o.Wire); err != nil {
			// The event stays in the log; recovery will close the gap.
			m.publishErrors.Add(1)
			m.logger.Warn("publish failed", "seq", c.Seq, "err", err)
			continue
		}
		m.published.Add(1)
	}
	return c, outs, nil
}

// Run steps until ctx is done or MaxCommands is reached.
func (m *Member) Run(ctx context.Context) error {
	var tick <-chan time.Time
	if m.cfg.Interval > 0 {
		t := time.NewTicker(m.cfg.Interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		if m.cfg.MaxCommands > 0 && m.cfg.Log.LastSeq() >= m.cfg.MaxCommands {
			m.logger.Info("max commands reached", "seq", m.cfg.Log.LastSeq())
			return nil
		}
		if tick != nil {
			select {
			case <-ctx.Done():
				return nil
			case <-tick:
			}
		} else if ctx.Err() != nil {
			return nil
		}
		if _, _, err := m.Step(); err != nil {
			return err
		}
	}
}

// MemberStats are the live feed counters.
type MemberStats struct{ Published, Dropped, PublishErrors int64 }

// Stats returns the live feed counters.
func (m *Member) Stats() MemberStats {
	return MemberStats{Published: m.published.Load(), Dropped: m.dropped.Load(), PublishErrors: m.publishErrors.Load()}
}
