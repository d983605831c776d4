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

package controllers

import (
	"testing"
	"time"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/reference/live"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// TestEnvtest_PageRefusedInALaterSliceReportsTheEarlierOnes: one page of
// the whole history commits in write slices; an orphan trade at the last
// seq refuses the slice holding it. The slices before it stay committed,
// and the status says so at once: BLOCKED ORPHAN_TRADE with verifiedThroughSeq
// where the SQL cursor stands (past genesis, short of the boundary), not the
// cursor the cycle started from.
func TestEnvtest_PageRefusedInALaterSliceReportsTheEarlierOnes(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "sliced-orphan", 300, 0.3)
	b := f.boundary()
	// An orphan the member never produced, written as the live projector
	// writes (the position moves with it, so the balance rule holds and
	// only the orphan check of the slice whose window holds it refuses).
	var last *wire.Trade
	for _, e := range f.allEvents() {
		if e.Trade != nil {
			last = e.Trade
		}
	}
	orphan := *last
	orphan.TradeID, orphan.TradeSeq, orphan.Seq = "orphan-1", 1_000_000, b
	if err := live.Apply(bg, f.pool, f.scope, wire.Event{Type: wire.TypeTrade, Trade: &orphan}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.allEvents()); n < 600 {
		t.Fatalf("%d events: want more than two first slices' worth", n)
	}
	rec := f.recovery(ns, "sliced", nil, func(s *recoveryv1.ProjectionRecoverySpec) { s.PageSize = 10_000 })
	got, _ := waitState(t, ns, rec.Name, 60*time.Second, "BLOCKED", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.State == recoveryv1.StateBlocked
	})
	if got.Status.Reason != string(codes.OrphanTrade) {
		t.Fatalf("reason %s, want ORPHAN_TRADE", got.Status.Reason)
	}
	cur, err := f.store.ReadCursor(bg, f.scope)
	if err != nil {
		t.Fatal(err)
	}
	v := got.Status.VerifiedThroughSeq
	if v <= 0 || v >= b || v != cur.VerifiedThroughSeq || got.Status.ChainDigest != cur.ChainDigest {
		t.Fatalf("status verified through %d (digest %s), SQL cursor %d (%s), boundary %d: want the committed slices, past genesis and short of the boundary",
			v, got.Status.ChainDigest, cur.VerifiedThroughSeq, cur.ChainDigest, b)
	}
	t.Logf("BLOCKED %s with %d of %d seqs verified by the slices before the refused one", got.Status.Reason, v, b)
}
