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

// Package wire is protocol v1 of the projection event feed: the event types a
// member emits for every consensus command, and their canonical JSON encoding.
//
// The encoded bytes are what the live NATS feed carries and what the
// catch-up contract returns (docs/source-contract.md, "Wire bytes"). They are
// hashed into the output chain (FR-APR03), so the encoding is canonical: one
// event has exactly one byte string. Keys appear in a fixed order, there is no
// insignificant whitespace, decimals have one spelling, timestamps are UTC with
// exactly nine fractional digits. Without that, two members (or a replay and
// the live feed) could emit different bytes for the same event and the chain
// digests would disagree although nothing was lost.
//
// Decode is strict: it accepts only bytes that Encode would produce for the
// decoded event (Encode(Decode(b)) == b), so a digest computed over accepted
// bytes always identifies one event.
package wire

import (
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"
)

// ProtocolVersion is the version of the wire format and catch-up contract.
const ProtocolVersion = 1

// Type names the kind of a projection event.
type Type string

const (
	TypeOpening Type = "opening"
	TypeOrder   Type = "order"
	TypeTrade   Type = "trade"
)

// Side of an order.
type Side string

const (
	SideBuy  Side = "BUY"
	SideSell Side = "SELL"
)

// OrderStatus of an order version.
type OrderStatus string

const (
	StatusNew             OrderStatus = "NEW"
	StatusPartiallyFilled OrderStatus = "PARTIALLY_FILLED"
	StatusFilled          OrderStatus = "FILLED"
	StatusCancelled       OrderStatus = "CANCELLED"
)

// TimeLayout is the only accepted timestamp spelling: UTC, nine fractional digits.
const TimeLayout = "2006-01-02T15:04:05.000000000Z"

// MaxDecimalLen bounds the canonical spelling of an amount (sign, digits and
// point). Larger values are refused on both encode and decode, so a hostile
// page cannot make the consumer do unbounded big-number arithmetic.
const MaxDecimalLen = 64

// MaxStringLen bounds identifiers (accounts, instruments, order/trade ids), in bytes.
const MaxStringLen = 256

// Opening is a proven initial position. Quantity is signed (negative = short).
type Opening struct {
	Seq        int64
	Account    string
	Instrument string
	Quantity   decimal.Decimal
	AvgCost    decimal.Decimal
}

// Order is one version of an order. Version starts at 1 and increases by one
// for every new version of the same OrderID.
type Order struct {
	Seq        int64
	OrderID    string
	Version    int64
	Account    string
	Instrument string
	Side       Side
	Price      decimal.Decimal
	Quantity   decimal.Decimal
	Remaining  decimal.Decimal
	Status     OrderStatus
	TS         time.Time
}

// Trade is one execution. TradeSeq is the engine-wide trade sequence.
type Trade struct {
	Seq         int64
	TradeID     string
	TradeSeq    int64
	Instrument  string
	Price       decimal.Decimal
	Quantity    decimal.Decimal
	BuyOrderID  string
	SellOrderID string
	BuyAccount  string
	SellAccount string
	TS          time.Time
}

// Event is one projection event. Exactly one pointer is set, matching Type.
type Event struct {
	Type    Type
	Opening *Opening
	Order   *Order
	Trade   *Trade
}

// Seq is the consensus sequence of the command that produced the event (0 if
// the event is empty).
func (e Event) Seq() int64 {
	switch {
	case e.Opening != nil:
		return e.Opening.Seq
	case e.Order != nil:
		return e.Order.Seq
	case e.Trade != nil:
		return e.Trade.Seq
	}
	return 0
}

// ErrUnknownType is wrapped by a *DecodeError (Field "type") or an
// *EncodeError when the event type is not one of protocol v1.
var ErrUnknownType = errors.New("unknown event type")

// ErrNonCanonical is wrapped by a *DecodeError when the bytes are a valid
// event but not its canonical encoding (key order, whitespace, escapes,
// duplicate keys, decimal or timestamp spelling).
var ErrNonCanonical = errors.New("non-canonical encoding")

// DecodeError reports why bytes are not a protocol-v1 event. Field is the
// JSON field at fault ("" for the object as a whole).
type DecodeError struct {
	Field  string
	Reason string
	Err    error // optional sentinel (ErrUnknownType, ErrNonCanonical)
}

func (e *DecodeError) Error() string {
	if e.Field == "" {
		return "wire: decode: " + e.Reason
	}
	return fmt.Sprintf("wire: decode: field %q: %s", e.Field, e.Reason)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// EncodeError reports why an Event cannot be encoded (it would not decode).
type EncodeError struct {
	Field  string
	Reason string
	Err    error
}

func (e *EncodeError) Error() string {
	if e.Field == "" {
		return "wire: encode: " + e.Reason
	}
	return fmt.Sprintf("wire: encode: field %q: %s", e.Field, e.Reason)
}

func (e *EncodeError) Unwrap() error { return e.Err }
