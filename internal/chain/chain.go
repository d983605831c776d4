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
