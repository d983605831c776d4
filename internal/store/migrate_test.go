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

package store

import (
	"regexp"
	"testing"
)

// NFR-APR01: ri06 applied twice, and applied to a database already holding
// live data (before and after it existed), loses nothing.
func TestNFRAPR01_MigrationIsAdditiveAndRerunnable(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	// A database with only the base schema and live data, ri06 not yet applied.
	mustExec(t, s, `DROP TABLE projection_catchup_cursor, projection_catchup_lease, projection_catchup_basis, projection_catchup_outbox`)
	run := addRun(t, s, "s", PhaseActive, nil)
	seedTrade(t, s, "s", evTrade1, i64(2), "BOOKED")
	seedOrder(t, s, "s", evOrder, i64(2))
	seedPosition(t, s, "s", "A", "ACME", "5", "110", true, "0")
	before := snapshot0(t, s)
	for i := 0; i < 2; i++ {
		if err := s.Migrate(ctxb); err != nil {
			t.Fatalf("apply %d: %v", i+1, err)
		}
		if after := snapshot0(t, s); after != before {
			t.Fatalf("migration %d changed base data", i+1)
		}
	}
	// Recovery state written, then the migration again: still there.
	l := lease(t, s, "s", "a")
	mustExec(t, s, `DELETE FROM positions`)
	mustExec(t, s, `DELETE FROM trades`)
	mustExec(t, s, `DELETE FROM orders`)
	mustExec(t, s, `DELETE FROM order_events`)
	catchUp(t, s, l, run, baseLedger(t), 100)
	full := snapshot(t, s)
	if err := s.Migrate(ctxb); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureBaseSchema(ctxb); err != nil {
		t.Fatal(err)
	}
	if snapshot(t, s) != full {
		t.Fatal("re-applying the schema lost data")
	}
	if got, _ := s.ReadLease(ctxb, "s"); got.Fence != l.Fence {
		t.Fatalf("lease lost: %+v", got)
	}
}

// NFR-APR01, statically: the migration only creates, and only if not exists.
func TestNFRAPR01_MigrationOnlyCreatesIfNotExists(t *testing.T) {
	sql := regexp.MustCompile(`(?m)--.*$`).ReplaceAllString(MigrationSQL(), "")
	if regexp.MustCompile(`(?i)\b(DROP|ALTER|TRUNCATE|DELETE|UPDATE|INSERT|RENAME)\b`).MatchString(sql) {
		t.Fatal("ri06 must be additive: no DROP/ALTER/TRUNCATE/DELETE/UPDATE/INSERT/RENAME")
	}
	creates := regexp.MustCompile(`(?i)\bCREATE\b[^;]*`).FindAllString(sql, -1)
	for _, c := range creates {
		if !regexp.MustCompile(`(?i)IF NOT EXISTS`).MatchString(c) {
			t.Errorf("not rerunnable: %s", c)
		}
	}
	if len(creates) < 4 {
		t.Fatalf("only %d CREATE statements", len(creates))
	}
}

func snapshot0(t testing.TB, s *Store) string {
	t.Helper()
	var v string
	if err := s.pool.QueryRow(ctxb, `SELECT (SELECT string_agg(t::text, '|') FROM trades t) || (SELECT string_agg(o::text, '|') FROM orders o) ||
  (SELECT string_agg(e::text, '|') FROM order_events e) || (SELECT string_agg(p::text, '|') FROM positions p) ||
  (SELECT string_agg(r::text, '|') FROM projection_runs r)`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
