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

package store

import (
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/reference/enginetest"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

// FR-APR07 + R1: from genesis into an empty projection, pages of a real engine
// ledger give every key exactly the independent replay.
func TestFRAPR07_BootstrapFromGenesisMatchesIndependentReplay(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	run := addRun(t, s, "s1", PhaseActive, nil)
	src := enginetest.Ledger(t, 7, 600, 5)
	l := lease(t, s, "s1", "a")
	res := catchUp(t, s, l, run, src, 50)
	if res.VerifiedThroughSeq != src.Boundary || res.ChainDigest != src.DigestThrough(src.Boundary) || res.EventCount != int64(len(src.Events)) {
		t.Fatalf("cursor %+v, want through %d digest %s count %d", res, src.Boundary, src.DigestThrough(src.Boundary), len(src.Events))
	}
	storetest.AssertPositions(t, s.pool, "s1", src.Decoded)
	c, err := s.ReadCursor(ctxb, "s1")
	if err != nil || c.State != StateCurrent || c.VerifiedThroughSeq != src.Boundary {
		t.Fatalf("cursor %+v %v", c, err)
	}
	// The page result carries the cursor's timestamp as the database wrote
	// it: status mirrors it at commit and again from the next read.
	if c.LastVerifiedAt == nil || !c.LastVerifiedAt.Equal(res.VerifiedAt) {
		t.Fatalf("last_verified_at %v, the last page reported %v", c.LastVerifiedAt, res.VerifiedAt)
	}
}
