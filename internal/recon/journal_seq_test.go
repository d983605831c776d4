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
// still applied). A second rollback of the same outcome continues too.
func TestRollback_JournalContinuesTheApplysSequence(t *testing.T) {
	r := newRig(drifted())
	j := &strictJournal{seen: map[string]bool{}}
	r.wf.Journal = j
	p := dryRun(t, r)
	out, err := applyAll(t, r, p, false)
	if err != nil || len(out.Applied) != 2 {
		t.Fatalf("apply: %v", err)
	}
	for round := 1; round <= 2; round++ {
		if _, err := r.wf.Rollback(context.Background(), out, "ada"); err != nil {
			t.Fatalf("rollback %d: %v", round, err)
		}
		want := []string{"1 applied", "2 applied"}
		for i := 1; i <= round; i++ {
			want = append(want, fmt.Sprintf("%d reverted", 2*i+1), fmt.Sprintf("%d reverted", 2*i+2))
		}
		var got []string
		for _, e := range j.entries {
			got = append(got, fmt.Sprintf("%d %s", e.Seq, e.Event))
		}
		if !eq(got, want) {
			t.Fatalf("journal after rollback %d: %v, want %v", round, got, want)
		}
	}
}
