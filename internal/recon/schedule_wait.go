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

import "time"

// A scheduled dry run yields to catch-ups: while a scope of its database is
// catching up, its read would hold a snapshot that keeps the catch-up's and
// the live feed's row versions from being pruned, and (for its own scope)
// re-read the backlog the catch-up is verifying. It waits, and starts when
// the catch-ups end (docs/performance.md, "Scheduled dry runs wait for
// catch-ups"). A dry run a person asked for never waits.
const (
	// ScheduledWaitLimit bounds the wait past the time the run fell due:
	// a scope that never stops catching up cannot silence detection.
	ScheduledWaitLimit = time.Hour
	// CatchUpActiveWithin: a CATCHING_UP cursor counts as a catch-up under
	// way only when a page or an outcome moved it this recently; the cursor
	// of a scope nobody recovers any more holds nobody up.
	CatchUpActiveWithin = 2 * time.Minute
)

// ScheduledWait is the decision for a scheduled dry run due since dueSince:
// own is true while its own scope's recovery has not reached CURRENT since
// it started (catching up, or no cycle yet), other names a scope of the
// same database with a catch-up under way ("" none). It waits while either
// holds, until ScheduledWaitLimit past dueSince. Pure.
func ScheduledWait(own bool, other string, dueSince, now time.Time) (wait bool, why string) {
	switch {
	case !own && other == "":
		return false, ""
	case !now.Before(dueSince.Add(ScheduledWaitLimit)):
		return false, "it waited for a catch-up past the limit of " + ScheduledWaitLimit.String() + ": it runs beside it, paced"
	case own:
		return true, "its scope is catching up"
	}
	return true, "scope " + other + " of the same database is catching up"
}
