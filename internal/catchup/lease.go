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

package catchup

import (
	"context"
	"time"

	"k8s.io/utils/clock"

	"github.com/projection-recovery/projection-recovery/internal/store"
)

// leaseKeeper holds the scope's fenced lease (FR-APR08) across the pages of
// one cycle. The lease is taken only once a page is fetched and verified and
// renewed before a page's transaction when half its duration has passed, so
// its clock covers the writes and never a fetch: a member slower than the
// lease still lets the scope progress. "Half" is measured on the local
// monotonic clock from before the statement that set the expiry, so clock
// skew between this manager and the database cannot overstate what is left.
type leaseKeeper struct {
	st           *store.Store
	scope, owner string
	ttl          time.Duration
	clock        clock.PassiveClock

	lease store.Lease
	at    time.Time // when the statement that set lease was sent; zero: none
}

func (k *leaseKeeper) ensure(ctx context.Context) (store.Lease, error) {
	if !k.at.IsZero() && !leaseNeedsRenewal(k.at, k.clock.Now(), k.ttl) {
		return k.lease, nil
	}
	sent := k.clock.Now()
	l, err := k.st.AcquireLease(ctx, k.scope, k.owner, k.ttl)
	if err != nil {
		return store.Lease{}, err
	}
	k.lease, k.at = l, sent
	return l, nil
}
