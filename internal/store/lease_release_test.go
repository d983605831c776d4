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
	"time"
)

// TestFRAPR08_ReleaseIsTellableFromADeadHolder: a release (deletion,
// shutdown) stamps renewed_at = expires_at, while a holder that died leaves
// renewed_at one lease duration before the expiry. Reconciliation's
// lease.fresh tells the two apart by exactly this, so a clean shutdown is
// never reported as an abandoned claim. The fence survives both.
func TestFRAPR08_ReleaseIsTellableFromADeadHolder(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	read := func(scope string) (renewed, expires time.Time, fence int64) {
		t.Helper()
		if err := adminOf(t, s).QueryRow(ctxb, `SELECT renewed_at, expires_at, fence FROM projection_catchup_lease WHERE scope = $1`, scope).
			Scan(&renewed, &expires, &fence); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, tc := range []struct {
		name    string
		release func(l Lease) error
	}{
		{"ReleaseLease", func(l Lease) error { return s.ReleaseLease(ctxb, l) }},
		{"ReleaseAll", func(l Lease) error { return s.ReleaseAll(ctxb, l.Owner) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := lease(t, s, "rel-"+tc.name, "owner-"+tc.name)
			if err := tc.release(l); err != nil {
				t.Fatal(err)
			}
			renewed, expires, fence := read(l.Scope)
			if !renewed.Equal(expires) || fence != l.Fence {
				t.Fatalf("released lease: renewed_at %s, expires_at %s, fence %d; want renewed_at == expires_at and fence %d", renewed, expires, fence, l.Fence)
			}
		})
	}
	t.Run("a holder that died", func(t *testing.T) {
		l := lease(t, s, "dead", "owner-dead")
		renewed, expires, _ := read(l.Scope)
		if !renewed.Before(expires) {
			t.Fatalf("a live (later dead) holder: renewed_at %s is not before expires_at %s", renewed, expires)
		}
	})
}
