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

// A scheduled dry run yields to catch-ups: beside its own scope's it would
// re-read the backlog the catch-up verifies; beside another of its database
// or manager, its read takes the cores and the database the catch-up and
// the live feed need. It starts when they end (docs/performance.md,
// "Scheduled dry runs wait for catch-ups"). A person's dry run never waits.
const (
	// ScheduledWaitLimit bounds the wait past the time the run fell due:
	// a scope that never stops catching up cannot silence detection.
	ScheduledWaitLimit = time.Hour
	// CatchUpActiveWithin: a CATCHING_UP cursor counts as a catch-up under
	// way only when a page or an outcome moved it this recently; the cursor
	// of a scope nobody recovers any more holds nobody up.
	CatchUpActiveWithin = 2 * time.Minute
)

// CatchUps are the catch-ups a scheduled dry run knows of.
type CatchUps struct {
	// Own: its own scope's recovery has not reached CURRENT since it
	// began (catching up, or no cycle yet).
	Own bool
	// Manager names a recovery of this manager catching up; Database a
	// scope of its database catching up, by any manager ("" none).
	Manager, Database string
}

// ScheduledWait is the decision for a scheduled dry run due since dueSince:
// it waits while any catch-up of c is under way, until ScheduledWaitLimit
// past dueSince. Pure.
func ScheduledWait(c CatchUps, dueSince, now time.Time) (wait bool, why string) {
	switch {
	case !c.Own && c.Manager == "" && c.Database == "":
		return false, ""
	case !now.Before(dueSince.Add(ScheduledWaitLimit)):
		return false, "it waited for a catch-up past the limit of " + ScheduledWaitLimit.String() + ": it runs beside it, paced"
	case c.Own:
		return true, "its scope is catching up"
	case c.Manager != "":
		return true, "recovery " + c.Manager + " of this manager is catching up"
	}
	return true, "scope " + c.Database + " of the same database is catching up"
}
