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

// Package chain is the output-chain digest of FR-APR03:
//
//	d0 = Genesis (64 ASCII zeros)
//	d' = lowercase hex SHA-256(d + "\n" + wire)
//
// folded over every projection event's exact wire bytes in consensus order.
// The digest through a sequence identifies everything emitted up to it: a
// consumer that recomputes it from the bytes it applied and compares it with
// the member's proves it lost, duplicated and reordered nothing.
package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
)

// Genesis is d0: the digest before any event.
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// Next returns lowercase hex SHA-256(d + "\n" + wire). d is used as given
// (callers keep digests lowercase, so the hashed text is the same everywhere).
func Next(d string, wire []byte) string {
	sum := nextRaw(d, wire)
	return hex.EncodeToString(sum[:])
}

func nextRaw(d string, wire []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(d))
	h.Write([]byte{'\n'})
	h.Write(wire)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// Folder folds events onto a digest one at a time, with the digests Next
// gives, without allocating per event: a page hashes up to 10,000 events,
// and Next allocates a hash state and a hex string for each.
type Folder struct {
	h   hash.Hash
	cur []byte // the current digest's hex: the start digest, then hex[:]
	hex [2 * sha256.Size]byte
	sum [sha256.Size]byte
}

// NewFolder starts a fold at d (used as given, like Next's d).
func NewFolder(d string) *Folder {
	return &Folder{h: sha256.New(), cur: []byte(d)}
}

// Next folds one event's exact wire bytes and returns the new digest, raw.
func (f *Folder) Next(wire []byte) [sha256.Size]byte {
	f.h.Reset()
	f.h.Write(f.cur)
	f.h.Write(newline)
	f.h.Write(wire)
	f.h.Sum(f.sum[:0])
	hex.Encode(f.hex[:], f.sum[:])
	f.cur = f.hex[:]
	return f.sum
}

var newline = []byte{'\n'}

// Is reports whether the current digest is d, without allocating.
func (f *Folder) Is(d string) bool { return string(f.cur) == d }

// Hex is the lowercase hex form of a raw digest (Next's result form).
func Hex(raw [sha256.Size]byte) string { return hex.EncodeToString(raw[:]) }

// Valid reports whether s has the shape of a digest: 64 lowercase hex characters.
func Valid(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
