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
	"strings"
	"testing"
	"time"
)

func TestScheduledWait(t *testing.T) {
	due := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		c    CatchUps
		now  time.Time
		wait bool
		why  string
	}{
		{"nothing catching up runs", CatchUps{}, due.Add(time.Minute), false, ""},
		{"nothing catching up runs even before due", CatchUps{}, due.Add(-time.Minute), false, ""},
		{"own scope catching up waits", CatchUps{Own: true}, due.Add(time.Minute), true, "its scope is catching up"},
		{"another scope of the database waits", CatchUps{Database: "btc-eur"}, due.Add(time.Minute), true, "scope btc-eur of the same database"},
		{"a recovery of this manager waits", CatchUps{Manager: "ns/eth"}, due.Add(time.Minute), true, "recovery ns/eth of this manager"},
		{"own wins the message", CatchUps{Own: true, Manager: "ns/eth", Database: "btc-eur"}, due, true, "its scope"},
		{"the manager's before the database's", CatchUps{Manager: "ns/eth", Database: "btc-eur"}, due, true, "recovery ns/eth"},
		{"just under the limit still waits", CatchUps{Own: true}, due.Add(ScheduledWaitLimit - time.Second), true, "its scope"},
		{"at the limit runs", CatchUps{Own: true}, due.Add(ScheduledWaitLimit), false, "past the limit"},
		{"past the limit runs beside another", CatchUps{Database: "btc-eur"}, due.Add(2 * ScheduledWaitLimit), false, "past the limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wait, why := ScheduledWait(c.c, due, c.now)
			if wait != c.wait || !strings.Contains(why, c.why) || (c.why == "" && why != "") {
				t.Fatalf("ScheduledWait = %v %q, want %v containing %q", wait, why, c.wait, c.why)
			}
		})
	}
}
