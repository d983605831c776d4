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

package recon

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// strictJournal refuses a second entry at the same (correlation id, seq),
// as the PostgreSQL journal's primary key does.
type strictJournal struct {
	fakeJournal
	seen map[string]bool
}

func (j *strictJournal) Append(ctx context.Context, e JournalEntry) error {
	k := fmt.Sprintf("%s#%d", e.CorrelationID, e.Seq)
	if j.seen[k] {
		return fmt.Errorf("duplicate key (correlation_id, position) = (%s)", k)
	}
	j.seen[k] = true
	return j.fakeJournal.Append(ctx, e)
}

// TestRollback_JournalContinuesTheApplysSequence: a rollback journals its
// reverts after the apply's entries of the same correlation id (a journal
// keyed by (correlation id, position) refused them, and the reverts were
// done but never journaled: the journal then claimed the actions were
// still applied). A second rollback, of what the first could not revert,
// continues the sequence too; a third finds nothing applied and is refused
// nothing_selected, journaling nothing (JournalReader).
func TestRollback_JournalContinuesTheApplysSequence(t *testing.T) {
	r := newRig(drifted())
	j := &strictJournal{seen: map[string]bool{}}
	r.wf.Journal = j
	p := dryRun(t, r)
	out, err := applyAll(t, r, p, false)
	if err != nil || len(out.Applied) != 2 {
		t.Fatalf("apply: %v", err)
	}
	journal := func() []string {
		var got []string
		for _, e := range j.entries {
			got = append(got, fmt.Sprintf("%d %s", e.Seq, e.Event))
		}
		return got
	}
	// Newest first: the second action is reverted, the first fails.
	r.handlers.failRev[out.Applied[0].ID] = errors.New("database went away")
	if _, err := r.wf.Rollback(context.Background(), out, "ada"); CodeOf(err) != ResultRepairFailed {
		t.Fatalf("rollback 1: %v, want repair_failed", err)
	}
	if got, want := journal(), []string{"1 applied", "2 applied", "3 reverted", "4 revert_failed"}; !eq(got, want) {
		t.Fatalf("journal after rollback 1: %v, want %v", got, want)
	}
	delete(r.handlers.failRev, out.Applied[0].ID)
	ro, err := r.wf.Rollback(context.Background(), out, "ada")
	if err != nil || len(ro.RolledBack) != 1 || ro.RolledBack[0].ID != out.Applied[0].ID {
		t.Fatalf("rollback 2: %v %+v, want only %s reverted", err, ro, out.Applied[0].ID)
	}
	want := []string{"1 applied", "2 applied", "3 reverted", "4 revert_failed", "5 reverted"}
	if got := journal(); !eq(got, want) {
		t.Fatalf("journal after rollback 2: %v, want %v", got, want)
	}
	if _, err := r.wf.Rollback(context.Background(), out, "ada"); CodeOf(err) != ResultNothingSelected {
		t.Fatalf("rollback 3: %v, want nothing_selected", err)
	}
	if got := journal(); !eq(got, want) {
		t.Fatalf("journal after rollback 3: %v, want %v", got, want)
	}
}
