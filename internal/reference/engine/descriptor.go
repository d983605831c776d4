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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// Descriptor identifies what a member's outputs mean: the protocol version,
// the engine, the scope and the instruments. Its hash is the first coordinate
// of FR-APR03 (descriptor hash, consensus sequence, chain digest): a cursor
// verified against one descriptor must never be continued against another,
// so the operator's SQL run row carries the hash and the client compares it.
type Descriptor struct {
	ProtocolVersion int      `json:"protocolVersion"`
	EngineID        string   `json:"engineId"`
	Scope           string   `json:"scope"`
	Instruments     []string `json:"instruments"`
}

// Normalize sorts and de-duplicates instruments and fills the protocol version.
func (d Descriptor) Normalize() Descriptor {
	if d.ProtocolVersion == 0 {
		d.ProtocolVersion = wire.ProtocolVersion
	}
	in := append([]string(nil), d.Instruments...)
	sort.Strings(in)
	out := in[:0]
	for i, s := range in {
		if i == 0 || s != in[i-1] {
			out = append(out, s)
		}
	}
	d.Instruments = out
	return d
}

// Validate refuses descriptors the engine cannot run.
func (d Descriptor) Validate() error {
	if d.EngineID == "" || d.Scope == "" || len(d.Instruments) == 0 {
		return fmt.Errorf("descriptor: engineId, scope and at least one instrument required")
	}
	if d.ProtocolVersion != wire.ProtocolVersion {
		return fmt.Errorf("descriptor: protocol version %d, engine speaks %d", d.ProtocolVersion, wire.ProtocolVersion)
	}
	for _, s := range d.Instruments {
		if s == "" {
			return fmt.Errorf("descriptor: empty instrument")
		}
	}
	return nil
}

// Canonical is the hashed form: compact JSON, keys in the order
// protocolVersion, engineId, scope, instruments (sorted, unique).
func (d Descriptor) Canonical() []byte {
	b, err := json.Marshal(d.Normalize())
	if err != nil { // strings and ints only: cannot fail
		panic(err)
	}
	return b
}

// Hash is lowercase hex SHA-256 of Canonical().
func (d Descriptor) Hash() string {
	sum := sha256.Sum256(d.Canonical())
	return hex.EncodeToString(sum[:])
}
