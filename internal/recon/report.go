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
	"fmt"
	"strings"
	"time"
)

// Report is a dry-run detection result. DryRun is always true: detection
// has no write path.
type Report struct {
	Scope  string    `json:"scope"`
	DryRun bool      `json:"dryRun"`
	Now    time.Time `json:"now"`
	// Clean is false when any finding is inconsistent (the specification's
	// "critical" kind). A Clean report may still list missing, duplicate or
	// stale findings: read len(Findings) for "nothing to do".
	Clean bool `json:"clean"`

	SourceBoundary int64 `json:"sourceBoundary"`
	// SourceComplete: the read covered every event through B (the
	// provider's flag, and a decoded count that matches the read's count).
	SourceComplete         bool   `json:"sourceComplete"`
	SourceIncompleteReason string `json:"sourceIncompleteReason,omitempty"`
	VerifiedSeq            int64  `json:"verifiedThroughSeq"`

	// SourceReadEmpty: the correlated cause source_read_empty fired; the
	// planner touches nothing.
	SourceReadEmpty bool `json:"sourceReadEmpty"`
	// ManagerNotRunning / PublisherNotDraining: the other correlated causes.
	ManagerNotRunning    bool `json:"managerNotRunning"`
	PublisherNotDraining bool `json:"publisherNotDraining"`

	Findings []Finding `json:"findings"`
	// Unlisted counts the findings detected but not listed in Findings: the
	// report lists at most Snapshot.MaxFindings, the first ones in report
	// order, so a hostile scope with millions of drifting rows cannot
	// exhaust memory. A report with Unlisted > 0 is never Clean, and its
	// plan holds no action (PlanRepairs): a partial report is never acted on.
	Unlisted int `json:"unlisted,omitempty"`

	ByKind      map[Kind]int        `json:"byKind"`
	ByInvariant map[InvariantID]int `json:"byInvariant"`
}

// newReport sorts findings (invariant table order, then record key) and
// counts them.
func newReport(s *Snapshot, c correlation, l *listed) *Report {
	fs := l.sorted()
	r := &Report{Scope: s.Scope, DryRun: true, Now: s.Now, Clean: true, SourceBoundary: s.Source.Boundary,
		SourceComplete: !c.sourceIncomplete, SourceReadEmpty: c.sourceEmpty, ManagerNotRunning: c.managerDown,
		PublisherNotDraining: c.publisherDown, Findings: fs, Unlisted: l.total - len(fs), ByKind: map[Kind]int{}, ByInvariant: map[InvariantID]int{}}
	if c.sourceIncomplete {
		r.SourceIncompleteReason = c.incompleteReason
	}
	if s.SQL.Cursor != nil {
		r.VerifiedSeq = s.SQL.Cursor.VerifiedThroughSeq
	}
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	for id, n := range l.byInvariant {
		kind := invariantByID[id].Kind
		r.ByKind[kind] += n
		r.ByInvariant[id] += n
		if kind == KindInconsistent {
			r.Clean = false
		}
	}
	if r.Unlisted > 0 {
		r.Clean = false // what was not listed may be anything
	}
	return r
}

// FindingIDs is the set of finding ids of the report (verification).
func (r *Report) FindingIDs() map[string]bool {
	m := make(map[string]bool, len(r.Findings))
	for i := range r.Findings {
		m[r.Findings[i].ID] = true
	}
	return m
}

// FormatReport renders the report as text: a header, counts, then each
// finding with its statement, values, guidance and an indented `cause:` line.
// Consumers parsing it line by line must ignore unknown indented lines.
func FormatReport(r *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "reconciliation report scope=%s dry-run=%t clean=%t findings=%d\n", r.Scope, r.DryRun, r.Clean, len(r.Findings))
	fmt.Fprintf(&b, "  at=%s source_boundary=%d source_complete=%t verified_through=%d\n", ts(r.Now), r.SourceBoundary, r.SourceComplete, r.VerifiedSeq)
	if r.Unlisted > 0 {
		fmt.Fprintf(&b, "  truncated: %d more findings not listed (the first %d in report order are); no action is planned\n", r.Unlisted, len(r.Findings))
	}
	if len(r.Findings) > 0 {
		var kinds []string
		for _, k := range Kinds {
			if n := r.ByKind[k]; n > 0 {
				kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
			}
		}
		fmt.Fprintf(&b, "  by kind: %s\n", strings.Join(kinds, " "))
		var invs []string
		for _, inv := range Invariants {
			if n := r.ByInvariant[inv.ID]; n > 0 {
				invs = append(invs, fmt.Sprintf("%s=%d", inv.ID, n))
			}
		}
		fmt.Fprintf(&b, "  by invariant: %s\n", strings.Join(invs, " "))
	}
	for i := range r.Findings {
		f := &r.Findings[i]
		fmt.Fprintf(&b, "[%s] %s %s\n", f.Kind, f.Invariant, f.Record.Key())
		fmt.Fprintf(&b, "  statement: %s\n", f.Statement)
		if f.Detail != "" {
			fmt.Fprintf(&b, "  detail: %s\n", f.Detail)
		}
		fmt.Fprintf(&b, "  before: %s\n", fieldsText(f.Before))
		fmt.Fprintf(&b, "  expected: %s\n", fieldsText(f.Expected))
		fmt.Fprintf(&b, "  repair: %s (%s)\n", f.Strategy, f.Guidance)
		fmt.Fprintf(&b, "  cause: %s (%s): %s", f.RootCause.Code, f.RootCause.Confidence, f.RootCause.Hint)
		if len(f.RootCause.Evidence) > 0 {
			fmt.Fprintf(&b, " [%s]", strings.Join(f.RootCause.Evidence, ", "))
		}
		b.WriteByte('\n')
		if f.Redacted {
			b.WriteString("  redacted: identity held a secret (manual: security incident)\n")
		}
	}
	return b.String()
}

func fieldsText(f Fields) string {
	if f == nil {
		return "(absent)"
	}
	return "{" + f.canonical() + "}"
}
