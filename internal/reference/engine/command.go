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

// Package engine is the reference member: a deterministic price-time-priority
// matching engine over a persisted, term-segmented command log, and the strict
// genesis replay the catch-up contract is served from (FR-APR01..03).
//
// Determinism is the invariant everything rests on: the same committed command
// log always yields the same events with the same wire bytes, whether applied
// live (published on NATS) or replayed (served by the contract). Nothing here
// reads the clock or iterates a Go map in an order that reaches the output;
// timestamps come from the commands.
package engine

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// Kind of a consensus command.
type Kind string

const (
	KindOpening   Kind = "opening"   // establish a proven initial position → one opening event
	KindPlace     Kind = "place"     // limit order → order versions and trades
	KindCancel    Kind = "cancel"    // cancel a resting order → one order version, or nothing
	KindHeartbeat Kind = "heartbeat" // no outputs; still advances the sequence
)

// Command is one consensus command. Seq is assigned by Log.Append.
type Command struct {
	Seq        int64
	TS         time.Time
	Kind       Kind
	Account    string
	Instrument string
	OrderID    string
	Side       wire.Side
	Price      decimal.Decimal
	Quantity   decimal.Decimal // order quantity, or the signed opening quantity
	AvgCost    decimal.Decimal // opening only
}

// record is the on-disk line of a command. Amounts are canonical decimal
// strings (wire.FormatDecimal), timestamps wire.TimeLayout: a float or a
// local-time round trip would change replayed bytes.
type record struct {
	Seq        int64  `json:"seq"`
	TS         string `json:"ts"`
	Kind       Kind   `json:"kind"`
	Account    string `json:"account,omitempty"`
	Instrument string `json:"instrument,omitempty"`
	OrderID    string `json:"orderId,omitempty"`
	Side       string `json:"side,omitempty"`
	Price      string `json:"price,omitempty"`
	Quantity   string `json:"quantity,omitempty"`
	AvgCost    string `json:"avgCost,omitempty"`
}

func decStr(d decimal.Decimal, set bool) string {
	if !set {
		return ""
	}
	return wire.FormatDecimal(d)
}

func marshalCommand(c Command) ([]byte, error) {
	r := record{Seq: c.Seq, TS: wire.FormatTime(c.TS), Kind: c.Kind, Account: c.Account, Instrument: c.Instrument, OrderID: c.OrderID, Side: string(c.Side)}
	switch c.Kind {
	case KindOpening:
		r.Quantity, r.AvgCost = decStr(c.Quantity, true), decStr(c.AvgCost, true)
	case KindPlace:
		r.Price, r.Quantity = decStr(c.Price, true), decStr(c.Quantity, true)
	}
	return json.Marshal(r)
}

func unmarshalCommand(b []byte) (Command, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return Command{}, fmt.Errorf("command record: %w", err)
	}
	ts, err := time.Parse(wire.TimeLayout, r.TS)
	if err != nil {
		return Command{}, fmt.Errorf("command %d: ts: %w", r.Seq, err)
	}
	c := Command{Seq: r.Seq, TS: ts, Kind: r.Kind, Account: r.Account, Instrument: r.Instrument, OrderID: r.OrderID, Side: wire.Side(r.Side)}
	parse := func(name, s string) (decimal.Decimal, error) {
		d, err := decimal.NewFromString(s)
		if err != nil {
			return d, fmt.Errorf("command %d: %s: %w", r.Seq, name, err)
		}
		return d, nil
	}
	switch r.Kind {
	case KindOpening:
		if c.Quantity, err = parse("quantity", r.Quantity); err != nil {
			return Command{}, err
		}
		if c.AvgCost, err = parse("avgCost", r.AvgCost); err != nil {
			return Command{}, err
		}
	case KindPlace:
		if c.Price, err = parse("price", r.Price); err != nil {
			return Command{}, err
		}
		if c.Quantity, err = parse("quantity", r.Quantity); err != nil {
			return Command{}, err
		}
	case KindCancel, KindHeartbeat:
	default:
		return Command{}, fmt.Errorf("command %d: unknown kind %q", r.Seq, r.Kind)
	}
	return c, nil
}

// Validate checks the shape of a command before it enters the log. Business
// outcomes (unknown order, duplicate id, unknown instrument) are not errors:
// the engine answers them deterministically with zero outputs.
func (c Command) Validate() error {
	if c.TS.IsZero() || c.TS.UTC().Year() > 9999 {
		return fmt.Errorf("command: timestamp missing or out of range")
	}
	for _, f := range []struct{ name, v string }{{"account", c.Account}, {"instrument", c.Instrument}, {"orderId", c.OrderID}} {
		if f.v != "" {
			if err := wire.ValidateString(f.v); err != nil {
				return fmt.Errorf("command: %s: %w", f.name, err)
			}
		}
	}
	for _, f := range []struct {
		name string
		v    decimal.Decimal
	}{{"price", c.Price}, {"quantity", c.Quantity}, {"avgCost", c.AvgCost}} {
		if err := wire.ValidateAmount(f.v); err != nil {
			return fmt.Errorf("command: %s: %w", f.name, err)
		}
	}
	switch c.Kind {
	case KindHeartbeat:
	case KindCancel:
		if c.OrderID == "" {
			return fmt.Errorf("cancel: orderId required")
		}
	case KindOpening:
		if c.Account == "" || c.Instrument == "" || c.AvgCost.Sign() < 0 {
			return fmt.Errorf("opening: account, instrument and avgCost >= 0 required")
		}
	case KindPlace:
		if c.Account == "" || c.Instrument == "" || c.OrderID == "" {
			return fmt.Errorf("place: account, instrument and orderId required")
		}
		if c.Side != wire.SideBuy && c.Side != wire.SideSell {
			return fmt.Errorf("place: side %q", c.Side)
		}
		if c.Price.Sign() <= 0 || c.Quantity.Sign() <= 0 {
			return fmt.Errorf("place: price and quantity must be positive")
		}
	default:
		return fmt.Errorf("command: unknown kind %q", c.Kind)
	}
	return nil
}
