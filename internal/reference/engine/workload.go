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

package engine

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// WorkloadConfig shapes the seeded command generator.
type WorkloadConfig struct {
	Accounts       int       // number of accounts "acct-1".."acct-N" (default 4)
	Instruments    []string  // default: the descriptor's instruments; required here
	CancelRatio    float64   // fraction of commands that cancel a previously placed order (default 0.1)
	HeartbeatRatio float64   // fraction of zero-output heartbeats (default 0.05)
	Openings       bool      // start with one proven opening per (account, instrument)
	Start          time.Time // timestamp of the first command (default 2026-01-01T00:00:00Z)
	Step           time.Duration
	// IDPrefix is prepended to generated order ids ("o-1" → IDPrefix+"o-1").
	// A member restarting over an existing log sets a per-term prefix so new
	// orders never reuse an id (the engine rejects reused ids).
	IDPrefix string
	// Clock, when set, stamps commands with the real time instead of the
	// deterministic Start + n*Step (the live member). The log records the
	// timestamp, so replay stays deterministic either way.
	Clock func() time.Time
}

// Workload generates a deterministic command stream from a seed: the same
// seed and config give the same commands (with the default clock).
type Workload struct {
	cfg      WorkloadConfig
	rng      *rand.Rand
	n        int64
	nextID   int64
	placed   []string
	openings []Command
}

// NewWorkload returns a generator. Prices hover around 100 per instrument with
// two decimals and quantities 1..10 in steps of 0.5, so orders cross often.
func NewWorkload(seed uint64, cfg WorkloadConfig) (*Workload, error) {
	if len(cfg.Instruments) == 0 {
		return nil, fmt.Errorf("workload: at least one instrument required")
	}
	if cfg.Accounts <= 0 {
		cfg.Accounts = 4
	}
	if cfg.CancelRatio == 0 {
		cfg.CancelRatio = 0.1
	}
	if cfg.HeartbeatRatio == 0 {
		cfg.HeartbeatRatio = 0.05
	}
	if cfg.CancelRatio < 0 || cfg.HeartbeatRatio < 0 || cfg.CancelRatio+cfg.HeartbeatRatio >= 1 {
		return nil, fmt.Errorf("workload: cancel ratio %.3f and heartbeat ratio %.3f must be >= 0 and sum below 1", cfg.CancelRatio, cfg.HeartbeatRatio)
	}
	if cfg.Start.IsZero() {
		cfg.Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if cfg.Step <= 0 {
		cfg.Step = time.Millisecond + 7*time.Nanosecond // odd step: nanoseconds show in timestamps
	}
	w := &Workload{cfg: cfg, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	if cfg.Openings {
		for a := 1; a <= cfg.Accounts; a++ {
			for _, in := range cfg.Instruments {
				q := decimal.New(int64(w.rng.IntN(41)-20), 0)
				w.openings = append(w.openings, Command{Kind: KindOpening, Account: account(a), Instrument: in,
					Quantity: q, AvgCost: decimal.New(int64(9000+w.rng.IntN(2000)), -2)})
			}
		}
	}
	return w, nil
}

func account(i int) string { return fmt.Sprintf("acct-%d", i) }

// Next returns the next command (Seq unset: Log.Append assigns it).
func (w *Workload) Next() Command {
	ts := w.cfg.Start.Add(time.Duration(w.n) * w.cfg.Step)
	if w.cfg.Clock != nil {
		ts = w.cfg.Clock().UTC()
	}
	w.n++
	if len(w.openings) > 0 {
		c := w.openings[0]
		w.openings = w.openings[1:]
		c.TS = ts
		return c
	}
	x := w.rng.Float64()
	switch {
	case x < w.cfg.HeartbeatRatio:
		return Command{Kind: KindHeartbeat, TS: ts}
	case x < w.cfg.HeartbeatRatio+w.cfg.CancelRatio && len(w.placed) > 0:
		// may name an order that is already filled: a zero-output command
		i := w.rng.IntN(len(w.placed))
		id := w.placed[i]
		w.placed[i] = w.placed[len(w.placed)-1]
		w.placed = w.placed[:len(w.placed)-1]
		return Command{Kind: KindCancel, OrderID: id, TS: ts}
	}
	w.nextID++
	id := fmt.Sprintf("%so-%d", w.cfg.IDPrefix, w.nextID)
	w.placed = append(w.placed, id)
	if len(w.placed) > 512 {
		w.placed = w.placed[1:]
	}
	side := wire.SideBuy
	if w.rng.IntN(2) == 1 {
		side = wire.SideSell
	}
	return Command{
		Kind:       KindPlace,
		TS:         ts,
		Account:    account(1 + w.rng.IntN(w.cfg.Accounts)),
		Instrument: w.cfg.Instruments[w.rng.IntN(len(w.cfg.Instruments))],
		OrderID:    id,
		Side:       side,
		Price:      decimal.New(int64(9800+w.rng.IntN(401)), -2),
		Quantity:   decimal.New(int64(2+w.rng.IntN(19)), 0).Div(decimal.New(2, 0)),
	}
}

// BuildLog creates a log in dir for desc, appends n workload commands (seeded),
// starting a new recording term every termEvery commands (0 = one term), and
// commits them all. Convenient for tests of other packages:
//
//	l, err := engine.BuildLog(t.TempDir(), desc, 42, engine.WorkloadConfig{Instruments: desc.Instruments, Openings: true}, 500, 0)
func BuildLog(dir string, desc Descriptor, seed uint64, cfg WorkloadConfig, n, termEvery int) (*Log, error) {
	if len(cfg.Instruments) == 0 {
		cfg.Instruments = desc.Normalize().Instruments
	}
	w, err := NewWorkload(seed, cfg)
	if err != nil {
		return nil, err
	}
	l, err := Create(dir, desc, LogOptions{})
	if err != nil {
		return nil, err
	}
	for i := 1; i <= n; i++ {
		if termEvery > 0 && i > 1 && (i-1)%termEvery == 0 {
			if err := l.NewTerm(); err != nil {
				return nil, err
			}
		}
		if _, err := l.Append(w.Next()); err != nil {
			return nil, fmt.Errorf("build log: %w", err)
		}
	}
	if err := l.Commit(l.LastSeq()); err != nil {
		return nil, err
	}
	return l, nil
}

// TestDescriptor is a small valid descriptor for tests and demos.
func TestDescriptor(scope string) Descriptor {
	return Descriptor{ProtocolVersion: wire.ProtocolVersion, EngineID: "reference-engine-v1", Scope: scope, Instruments: []string{"BTC-USD", "ETH-USD"}}
}
