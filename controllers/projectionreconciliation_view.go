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
	"fmt"
	"sort"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// What an approver sees of a plan and a report lives in status, read through
// the API server (never from the database). Status is bounded: the CRD's
// MaxItems and MaxLengths, and a byte budget per list so a plan of fifty
// long actions still fits etcd's object limit beside the rest of status.
const (
	maxShownItems      = 50
	maxFieldName       = 64
	maxFieldValue      = 256
	maxTargetFields    = 16
	maxChangedFields   = 32
	maxActionFindings  = 16
	maxEvidence        = 8
	maxEvidenceLength  = 512
	maxTextLength      = 1024
	itemsBudgetBytes   = 96 << 10
	manualBudgetBytes  = 32 << 10
	findingBudgetBytes = 96 << 10
)

// resultNotShown refuses an approval that selects an action status did not
// show whole: nobody may confirm a change they could not read.
const resultNotShown = "plan_not_shown"

// planItems is the plan as status shows it: its first actions, in plan
// order, each shown whole or not at all, within the budget. An action that
// cannot be shown whole (a value past the schema's bound) is left out and
// so can never be approved; the ones after it are still shown.
//
// The apply's guard recomputes it from the stored plan (shownActionIDs), so
// what may be approved is exactly what status showed. It depends on the
// plan alone: redaction changes only what is displayed, after this.
func planItems(p *recon.Plan) []recoveryv1.PlannedAction {
	var items []recoveryv1.PlannedAction
	used := 0
	for _, a := range p.Actions {
		if len(items) == maxShownItems {
			break
		}
		it, ok := plannedAction(a)
		if !ok {
			continue
		}
		if used += itemSize(it); used > itemsBudgetBytes {
			break
		}
		items = append(items, it)
	}
	return items
}

// shownActionIDs are the ids planItems shows.
func shownActionIDs(p *recon.Plan) map[string]bool {
	ids := map[string]bool{}
	for _, it := range planItems(p) {
		ids[it.ID] = true
	}
	return ids
}

// notShown returns the first selected action status did not show, "" when
// every one was shown. The selection is the workflow's own (recon.Select).
func notShown(p *recon.Plan, opt recon.ApplyOptions) (string, int) {
	shown := shownActionIDs(p)
	first, n := "", 0
	for _, a := range recon.Select(p.Actions, opt) {
		if !shown[a.ID] {
			if first == "" {
				first = a.ID
			}
			n++
		}
	}
	return first, n
}

// plannedAction is a as status shows it; false when a part of it does not
// fit its bound (it would be shown cut).
func plannedAction(a recon.Action) (recoveryv1.PlannedAction, bool) {
	it := recoveryv1.PlannedAction{ID: a.ID, Kind: string(a.Kind), Risk: string(a.Risk), Reversible: a.Reversible,
		LifecycleEvent: a.LifecycleEvent, Rollback: a.Rollback, Findings: a.Findings, Effect: effectOf(a)}
	ok := len(a.ID) <= maxIDLength && len(it.Kind) <= 64 && len(it.Risk) <= 16 && len(a.LifecycleEvent) <= maxStatusString &&
		len(a.Rollback) <= maxTextLength && len(a.Findings) <= maxActionFindings
	for _, f := range a.Findings {
		ok = ok && len(f) <= maxIDLength
	}
	var fit bool
	it.Target, fit = fieldValues(a.Target, maxTargetFields)
	ok = ok && fit
	it.Changes, fit = changes(a.Before, a.After)
	return it, ok && fit
}

// effectOf names what the action does to its record.
func effectOf(a recon.Action) string {
	before, after := present(a.Before), present(a.After)
	switch {
	case !before && after:
		return "create"
	case before && !after:
		return "delete"
	case !before && !after, a.Before.Equal(a.After):
		return "none"
	}
	return "update"
}

// present: a record exists (positions spell an absent one row=absent).
func present(f recon.Fields) bool {
	return f != nil && !(len(f) == 1 && f["row"] == "absent")
}

// changes lists every field whose value differs between before and after,
// by name; false when they do not fit.
func changes(before, after recon.Fields) ([]recoveryv1.FieldChange, bool) {
	if !present(before) {
		before = nil
	}
	if !present(after) {
		after = nil
	}
	names := map[string]bool{}
	for k := range before {
		names[k] = true
	}
	for k := range after {
		names[k] = true
	}
	var out []recoveryv1.FieldChange
	ok := true
	for _, k := range sortedKeys(names) {
		b, hasB := before[k]
		a, hasA := after[k]
		if hasB == hasA && a == b {
			continue
		}
		c := recoveryv1.FieldChange{Field: k}
		if hasB {
			c.Before = &b
		}
		if hasA {
			c.After = &a
		}
		ok = ok && len(k) <= maxFieldName && len(b) <= maxFieldValue && len(a) <= maxFieldValue
		out = append(out, c)
	}
	return out, ok && len(out) <= maxChangedFields
}

// fieldValues lists f by name; false when it does not fit.
func fieldValues(f recon.Fields, maxItems int) ([]recoveryv1.FieldValue, bool) {
	names := map[string]bool{}
	for k := range f {
		names[k] = true
	}
	var out []recoveryv1.FieldValue
	ok := len(f) <= maxItems
	for _, k := range sortedKeys(names) {
		ok = ok && len(k) <= maxFieldName && len(f[k]) <= maxFieldValue
		out = append(out, recoveryv1.FieldValue{Name: k, Value: f[k]})
	}
	return out, ok
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// itemSize approximates an item's bytes in status (its strings).
func itemSize(it recoveryv1.PlannedAction) int {
	n := len(it.ID) + len(it.Kind) + len(it.Rollback) + len(it.LifecycleEvent) + 64
	for _, t := range it.Target {
		n += len(t.Name) + len(t.Value) + 16
	}
	for _, c := range it.Changes {
		n += len(c.Field) + 32
		if c.Before != nil {
			n += len(*c.Before)
		}
		if c.After != nil {
			n += len(*c.After)
		}
	}
	for _, f := range it.Findings {
		n += len(f) + 4
	}
	return n
}

// manualItems are the plan's manual entries as status shows them: the
// first ones within the budget, bounded (the count is PlanSummary.Manual).
func manualItems(p *recon.Plan, rep *recon.Report) []recoveryv1.ManualItem {
	guidance := map[string]string{}
	if rep != nil {
		for _, f := range rep.Findings {
			guidance[f.ID] = f.Guidance
		}
	}
	var out []recoveryv1.ManualItem
	used := 0
	for _, m := range p.Manual {
		if len(out) == maxShownItems {
			break
		}
		it := recoveryv1.ManualItem{FindingID: truncateTo(m.FindingID, maxIDLength), Invariant: truncateTo(string(m.Invariant), maxStatusString),
			Record: truncateTo(m.Record, maxIDLength), Reason: truncateTo(m.Reason, maxTextLength), Guidance: truncateTo(guidance[m.FindingID], maxTextLength)}
		if used += len(it.FindingID) + len(it.Invariant) + len(it.Record) + len(it.Reason) + len(it.Guidance) + 64; used > manualBudgetBytes {
			break
		}
		out = append(out, it)
	}
	return out
}

// findingSummary is one finding as status shows it; Truncated says a part
// was cut (the run record keeps it whole).
func findingSummary(f recon.Finding) recoveryv1.FindingSummary {
	out := recoveryv1.FindingSummary{ID: truncateTo(f.ID, maxIDLength), Invariant: truncateTo(string(f.Invariant), maxStatusString),
		Kind: string(f.Kind), Cause: causeLine(f.RootCause), Statement: truncateTo(f.Statement, maxTextLength),
		Record: truncateTo(f.Record.Key(), maxIDLength), Detail: truncateTo(f.Detail, maxTextLength),
		Guidance: truncateTo(f.Guidance, maxTextLength), ActualAbsent: f.Before == nil, ExpectedAbsent: f.Expected == nil}
	var fitA, fitE bool
	out.Actual, fitA = fieldValues(f.Before, maxChangedFields)
	out.Expected, fitE = fieldValues(f.Expected, maxChangedFields)
	cut := !fitA || !fitE || len(f.ID) > maxIDLength || len(f.Statement) > maxTextLength || len(f.Detail) > maxTextLength ||
		len(f.Record.Key()) > maxIDLength || len(f.Guidance) > maxTextLength
	out.Actual, out.Expected = boundValues(out.Actual), boundValues(out.Expected)
	rc := &recoveryv1.RootCauseSummary{Code: truncateTo(string(f.RootCause.Code), 64), Confidence: truncateTo(string(f.RootCause.Confidence), 16),
		Hint: truncateTo(f.RootCause.Hint, maxTextLength)}
	for i, e := range f.RootCause.Evidence {
		if i == maxEvidence {
			cut = true
			break
		}
		cut = cut || len(e) > maxEvidenceLength
		rc.Evidence = append(rc.Evidence, truncateTo(e, maxEvidenceLength))
	}
	if rc.Code != "" {
		out.RootCause = rc
	}
	out.Truncated = cut
	return out
}

// boundValues cuts a field list to the schema's bounds.
func boundValues(vs []recoveryv1.FieldValue) []recoveryv1.FieldValue {
	if len(vs) > maxChangedFields {
		vs = vs[:maxChangedFields]
	}
	for i := range vs {
		vs[i].Name, vs[i].Value = truncateTo(vs[i].Name, maxFieldName), truncateTo(vs[i].Value, maxFieldValue)
	}
	return vs
}

// findingSize approximates a finding's bytes in status.
func findingSize(f recoveryv1.FindingSummary) int {
	n := len(f.ID) + len(f.Invariant) + len(f.Cause) + len(f.Statement) + len(f.Record) + len(f.Detail) + len(f.Guidance) + 64
	for _, v := range append(append([]recoveryv1.FieldValue{}, f.Actual...), f.Expected...) {
		n += len(v.Name) + len(v.Value) + 16
	}
	if rc := f.RootCause; rc != nil {
		n += len(rc.Hint) + 32
		for _, e := range rc.Evidence {
			n += len(e)
		}
	}
	return n
}

// redactView passes every string status shows of a plan or report through
// redact, then bounds it again (redaction can lengthen a value).
func redactView(st *recoveryv1.ProjectionReconciliationStatus, redact func(string) string) {
	r := func(s string, n int) string { return truncateTo(redact(s), n) }
	rv := func(vs []recoveryv1.FieldValue) {
		for i := range vs {
			vs[i].Value = r(vs[i].Value, maxFieldValue)
		}
	}
	if rep := st.Report; rep != nil {
		for i := range rep.Top {
			f := &rep.Top[i]
			f.Cause, f.Statement, f.Detail, f.Guidance = r(f.Cause, maxCauseLength), r(f.Statement, maxTextLength), r(f.Detail, maxTextLength), r(f.Guidance, maxTextLength)
			f.Record = r(f.Record, maxIDLength)
			rv(f.Actual)
			rv(f.Expected)
			if rc := f.RootCause; rc != nil {
				rc.Hint = r(rc.Hint, maxTextLength)
				for j := range rc.Evidence {
					rc.Evidence[j] = r(rc.Evidence[j], maxEvidenceLength)
				}
			}
		}
	}
	if p := st.Plan; p != nil {
		for i := range p.Items {
			it := &p.Items[i]
			it.Rollback = r(it.Rollback, maxTextLength)
			rv(it.Target)
			for j := range it.Changes {
				c := &it.Changes[j]
				if c.Before != nil {
					v := r(*c.Before, maxFieldValue)
					c.Before = &v
				}
				if c.After != nil {
					v := r(*c.After, maxFieldValue)
					c.After = &v
				}
			}
		}
		for i := range p.ManualItems {
			m := &p.ManualItems[i]
			m.Reason, m.Guidance, m.Record = r(m.Reason, maxTextLength), r(m.Guidance, maxTextLength), r(m.Record, maxIDLength)
		}
		p.Preflight = r(p.Preflight, maxTextLength)
	}
}

// preflight is the plan's check without executing anything: every action
// has a handler, the hooks its kind needs are wired, and the resource can
// write at all. "" when it would succeed as far as can be known.
func preflight(p *recon.Plan, handlers recon.Handlers, hasRepairDSN, hasPublisher bool) string {
	if len(p.Actions) == 0 {
		return ""
	}
	if !hasRepairDSN {
		return "spec.repairDsnSecretRef is not set: the resource reports and plans only"
	}
	for _, a := range p.Actions {
		switch {
		case handlers[a.Kind] == nil:
			return fmt.Sprintf("%s: no handler for %s", a.ID, a.Kind)
		case a.Kind == recon.ActionRepublish && !hasPublisher:
			return fmt.Sprintf("%s: this manager has no NATS publisher (--nats-url): republish cannot send", a.ID)
		}
	}
	return ""
}
