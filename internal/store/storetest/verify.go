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

package storetest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// VerifyAgainstSource reads the member's whole output through the verifying
// client (genesis to B) and compares every SQL position with an independent
// replay (big.Rat arithmetic, no code shared with the operator's derivation).
// It returns the number of keys compared. The demo and the e2e node's
// replay check (hack/e2e/replaycheck) both prove CURRENT with it.
func VerifyAgainstSource(ctx context.Context, memberURL string, pool *pgxpool.Pool, scope string) (int, error) {
	cl, err := source.NewClient(source.ClientConfig{BaseURL: memberURL})
	if err != nil {
		return 0, err
	}
	var evs []wire.Event
	after, digest := int64(0), chain.Genesis
	for {
		p, err := cl.Fetch(ctx, after, digest, "", source.MaxPageEvents)
		if err != nil {
			return 0, fmt.Errorf("reading the member: %w", err)
		}
		for _, e := range p.Events {
			ev, err := wire.Decode(e.Wire)
			if err != nil {
				return 0, err
			}
			evs = append(evs, ev)
		}
		if p.Idle || p.ThroughSeq == p.BoundarySeq {
			break
		}
		after, digest = p.ThroughSeq, p.DigestThrough
	}
	keys, diffs, err := ComparePositions(ctx, pool, scope, evs)
	if err != nil {
		return 0, err
	}
	if len(diffs) > 0 {
		return 0, fmt.Errorf("%d differences, first: %s", len(diffs), diffs[0])
	}
	return keys, nil
}
