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

package reconstore

import (
	"context"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/store"
)

// TestDryRun_TakesNoLeaseNorWriteLock: a dry run of a drifting scope, with
// a live writer holding the scope's projection write lock and with the
// lease free, completes without waiting for the lock and leaves the lease
// row exactly as it was: no owner taken, no fence moved. A scheduled dry
// run that took either would stall live writes and pages every interval.
func TestDryRun_TakesNoLeaseNorWriteLock(t *testing.T) {
	t.Parallel()
	s := newScene(t, "venue-dry", sceneOpts{})
	breakages[1].corrupt(s) // a drifting position: the plan has an action
	lease := func() string {
		var v string
		s.one(`SELECT coalesce((SELECT l::text FROM projection_catchup_lease l WHERE scope = $1), 'none')`, []any{s.scope}, &v)
		return v
	}
	before, beforeDump := lease(), s.dump(true)

	// A live writer mid-transaction: it holds the write lock until rollback.
	ctx := context.Background()
	tx, err := s.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, store.WriteLockSQL, s.scope); err != nil {
		t.Fatal(err)
	}

	done := make(chan *DryRun, 1)
	go func() {
		d, err := s.wf.DryRun(ctx, s.scope)
		if err != nil {
			t.Errorf("dry run: %v", err)
		}
		done <- d
	}()
	select {
	case d := <-done:
		if d == nil || d.Plan == nil || len(d.Plan.Actions) == 0 {
			t.Fatalf("want a plan with an action, got %+v", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the dry run waited for the projection write lock a live writer holds")
	}
	if got := lease(); got != before {
		t.Fatalf("the dry run changed the lease row:\nbefore %s\nafter  %s", before, got)
	}
	if diff := sameDump(s.dump(true), beforeDump); len(diff) != 0 {
		t.Fatalf("the dry run wrote projection rows: %v", diff)
	}
}
