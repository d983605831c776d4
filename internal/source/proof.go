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
	"context"
	"fmt"

	"github.com/projection-recovery/projection-recovery/internal/chain"
)

// ChainProof is the member's chain digest through Seq, as a page ending at
// or after Seq proves it (ChainThrough).
type ChainProof struct {
	Seq    int64
	Digest string // the member's chain through Seq (FR-APR03)
	// BoundarySeq is the member's boundary when it answered.
	BoundarySeq int64
}

// ChainThrough asks the member for its chain digest through seq: the proof
// an idle page cannot give, since the contract answers afterSeq == boundary
// without a replay and without digests (FR-APR04). It fetches the page after
// seq-1 (the last command through seq, and more when the member has moved
// on), verifies it as Fetch does but from the member's own digestAfter, and
// hashes its events up to seq.
//
// The chain through seq hashes the member's whole history through seq, so
// a caller whose verified digest at seq equals Digest holds the same history
// through seq as the member serves now; a different Digest means the member
// serves another history there, whatever its digestAfter claims. Errors are
// those of Fetch; a member whose boundary is now below seq answers an
// *UnavailableError or AFTER_SEQ_BEYOND_BOUNDARY (nothing to prove against
// yet: retried).
func (c *Client) ChainThrough(ctx context.Context, seq int64, expectDescriptor string, maxEvents int) (ChainProof, error) {
	if seq < 1 {
		return ChainProof{}, fmt.Errorf("source client: chain through %d: want a sequence >= 1 (the chain through 0 is genesis)", seq)
	}
	after, afterDigest := seq-1, ""
	if after == 0 {
		afterDigest = chain.Genesis
	}
	check := afterDigest
	if check == "" {
		check = chain.Genesis // checkRequest wants a digest; an unknown one is checked in verifyBody
	}
	if err := checkRequest(after, check, expectDescriptor, maxEvents); err != nil {
		return ChainProof{}, err
	}
	body, err := c.get(ctx, after, maxEvents)
	if err != nil {
		return ChainProof{}, err
	}
	p, err := verifyBody(body, after, afterDigest, expectDescriptor, maxEvents)
	if err != nil {
		return ChainProof{}, err
	}
	if p.Idle {
		return ChainProof{}, &UnavailableError{Err: fmt.Errorf("the member's boundary %d is below sequence %d: nothing to prove its chain against yet", p.BoundarySeq, seq)}
	}
	// A non-idle page after seq-1 ends at or after seq (VerifyPage: it
	// advances, and whole commands only); its events are in order.
	d := p.DigestAfter
	for _, ev := range p.Events {
		if ev.Seq > seq {
			break
		}
		d = chain.Next(d, ev.Wire)
	}
	return ChainProof{Seq: seq, Digest: d, BoundarySeq: p.BoundarySeq}, nil
}
