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
	"context"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
)

// TestConnections_PoolSharedAndClosedWhenUnused: resources on one DSN share a
// pool; a pool closes when its last resource is deleted or moves to another
// DSN (a rotated Secret), so a long-running manager does not accumulate them.
func TestConnections_PoolSharedAndClosedWhenUnused(t *testing.T) {
	ctx := context.Background()
	dsnA, dsnB := pgtest.NewDSN(t), pgtest.NewDSN(t)
	c := &Connections{}
	defer func() { _ = c.ReleaseAll(ctx, "nobody") }()

	a1, err := c.Store(ctx, "ns/one", dsnA)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := c.Store(ctx, "ns/two", dsnA)
	if a1 != a2 {
		t.Fatal("two resources on one DSN must share one pool")
	}
	if err := a1.Pool().Ping(ctx); err != nil {
		t.Fatal(err)
	}

	// ns/one rotates to another DSN: the pool stays for ns/two.
	if _, err := c.Store(ctx, "ns/one", dsnB); err != nil {
		t.Fatal(err)
	}
	if err := a1.Pool().Ping(ctx); err != nil {
		t.Fatalf("pool closed while ns/two still uses it: %v", err)
	}
	// ns/two is deleted: nobody uses dsnA any more, its pool is closed.
	c.Forget("ns/two")
	if err := a1.Pool().Ping(ctx); err == nil {
		t.Fatal("the unused pool was not closed")
	}
	if len(c.stores) != 1 {
		t.Fatalf("%d pools open, want 1 (dsnB)", len(c.stores))
	}
	c.Forget("ns/one")
	if len(c.stores) != 0 {
		t.Fatalf("%d pools open after every resource was forgotten", len(c.stores))
	}
}
