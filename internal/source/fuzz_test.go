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

package source

import (
	"errors"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// FuzzClientPageDecode: whatever a (hostile or broken) member sends, the
// client's page verification never panics, fails only with typed errors, and
// hands out a page only if every invariant of VerifyPage really holds.
// Seeds: testdata/fuzz/FuzzClientPageDecode (real pages, idle, refusals, junk).
func FuzzClientPageDecode(f *testing.F) {
	f.Add([]byte(`{"protocolVersion":1}`), int64(0), chain.Genesis, 10)
	f.Fuzz(func(t *testing.T, body []byte, afterSeq int64, afterDigest string, maxEvents int) {
		p, err := VerifyPage(body, afterSeq, afterDigest, "", maxEvents)
		if err != nil {
			var ve *VerificationError
			if errors.As(err, &ve) {
				if ve.Code == "" {
					t.Fatal("verification error without code")
				}
				return
			}
			if checkRequest(afterSeq, afterDigest, "", maxEvents) == nil {
				t.Fatalf("untyped error for valid arguments: %v", err)
			}
			return
		}
		if p.ProtocolVersion != wire.ProtocolVersion || p.AfterSeq != afterSeq || p.DigestAfter != afterDigest {
			t.Fatalf("accepted page with wrong identity: %+v", p)
		}
		if !(p.AfterSeq <= p.ThroughSeq && p.ThroughSeq <= p.BoundarySeq) || len(p.Events) > maxEvents {
			t.Fatalf("accepted page out of bounds: after %d through %d boundary %d, %d events", p.AfterSeq, p.ThroughSeq, p.BoundarySeq, len(p.Events))
		}
		if p.Idle && (len(p.Events) != 0 || p.ThroughSeq != p.AfterSeq || p.DigestThrough != afterDigest) {
			t.Fatalf("accepted inconsistent idle page: %+v", p)
		}
		d, prev := afterDigest, afterSeq
		for _, e := range p.Events {
			if e.Seq <= p.AfterSeq || e.Seq > p.ThroughSeq || e.Seq < prev {
				t.Fatalf("accepted event seq %d", e.Seq)
			}
			prev = e.Seq
			we, err := wire.Decode(e.Wire)
			if err != nil || we.Seq() != e.Seq {
				t.Fatalf("accepted wire %q: %v", e.Wire, err)
			}
			d = chain.Next(d, e.Wire)
		}
		if d != p.DigestThrough {
			t.Fatal("accepted page whose chain does not recompute")
		}
	})
}
