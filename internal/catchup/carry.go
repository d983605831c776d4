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
	"sync"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// CarriedUnit is the first unit of a scope's next cycle: the pages after the
// unit that spends a cycle's page budget, fetched, verified and merged while
// that unit commits, and kept between the two cycles. Without it a cycle
// begins by waiting for the member and ends with a commit that overlaps
// nothing (docs/performance.md, "What the manager does for speed").
//
// It is used only by the next cycle of the same resource, and only when its
// pages are the very pages that cycle's first fetches would return: the
// cursor read from SQL is exactly where they start (after, digest), the
// selected run is the one they were prepared against (store.Run.SameBarrier),
// and the client and page size are still the spec's. Anything else drops it
// and the cycle fetches from the cursor. No transaction is open while it is
// fetched.
type CarriedUnit struct {
	ahead  *pageAhead
	run    store.Run
	client *source.Client
	size   int
	parked time.Time
}

// Outcomes of a carried unit (Counters.CarriedUnits): used by the cycle it
// was fetched for, dropped by it (the cursor, run or spec moved, or it was
// too old), evicted before it (more catching-up scopes than workers).
const (
	CarriedUsed    = "used"
	CarriedDropped = "dropped"
	CarriedEvicted = "evicted"
)

// maxCarryAge bounds how old a carried unit may be when its cycle comes. Its
// pages stay valid (the chain fixes them) but the boundary they carry is as
// old as their fetch, and status reports it until the next fetch; a scope
// whose next cycle is that late (a long queue of scopes) fetches again.
const maxCarryAge = 10 * time.Second

// carriedUsable decides whether the next cycle may start from u, given the
// cursor and run it read, the client and page size of its spec, and now.
func carriedUsable(u *CarriedUnit, cur store.Cursor, run store.Run, cl *source.Client, size int, now time.Time) bool {
	return u != nil && u.ahead != nil &&
		u.ahead.after == cur.VerifiedThroughSeq && u.ahead.digest == cur.ChainDigest &&
		u.run.SameBarrier(run) && u.client == cl && u.size == size &&
		now.Sub(u.parked) <= maxCarryAge
}

// Discard stops the unit's fetch and waits for it. Safe on nil, and on a
// unit whose pages were used (its fetch has ended).
func (u *CarriedUnit) Discard() {
	if u != nil {
		u.ahead.stop()
	}
}

// CarryOver keeps the carried units between cycles, one per resource and at
// most max in all (the worker count): the memory they hold is then that of
// the units the workers' cycles hold anyway. A resource over the bound drops
// the oldest unit. Every reconcile of a resource takes its unit out (Take),
// used or not, and discards it when done, so a unit never outlives the next
// reconcile; StopAll ends them at shutdown. Keys are resources
// (namespace/name, Cycle.Resource). A nil *CarryOver carries nothing.
type CarryOver struct {
	mu     sync.Mutex
	max    int
	units  map[string]*CarriedUnit
	closed bool
}

// NewCarryOver keeps at most max units (the worker count).
func NewCarryOver(max int) *CarryOver {
	return &CarryOver{max: max, units: map[string]*CarriedUnit{}}
}

// park keeps u for key's next cycle, and returns how many units of other
// resources it evicted.
func (c *CarryOver) park(key string, u *CarriedUnit) (evicted int) {
	if c == nil {
		u.Discard()
		return 0
	}
	var drop []*CarriedUnit
	c.mu.Lock()
	if c.closed || c.max <= 0 {
		drop = append(drop, u)
	} else {
		if old := c.units[key]; old != nil {
			drop = append(drop, old)
		}
		c.units[key] = u
		for len(c.units) > c.max {
			oldest := key
			for k, v := range c.units {
				if v.parked.Before(c.units[oldest].parked) {
					oldest = k
				}
			}
			drop = append(drop, c.units[oldest])
			delete(c.units, oldest)
			if oldest != key {
				evicted++
			}
		}
	}
	c.mu.Unlock()
	for _, d := range drop {
		d.Discard() // outside the lock: discard waits for the fetch to stop
	}
	return evicted
}

// Take removes and returns key's unit (nil when none).
func (c *CarryOver) Take(key string) *CarriedUnit {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.units[key]
	delete(c.units, key)
	return u
}

// StopAll discards every unit; nothing is parked after it.
func (c *CarryOver) StopAll() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.closed = true
	units := c.units
	c.units = map[string]*CarriedUnit{}
	c.mu.Unlock()
	for _, u := range units {
		u.Discard()
	}
}
