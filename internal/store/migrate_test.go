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
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/pgtest"
)

// recoveryRelations are every relation recovery's migrations create.
var recoveryRelations = []string{VersionTable, "projection_catchup_cursor", "projection_catchup_lease",
	"projection_catchup_basis", "projection_catchup_outbox"}

// adminStore is a superuser Store on a fresh database holding only the
// trade-processor's base tables: what recovery finds on first install. Its
// seeding helpers (mustExec) run on the same superuser pool.
func adminStore(t testing.TB) *Store {
	t.Helper()
	s := New(pgtest.Pool(t, pgtest.NewDSN(t)))
	admins.Store(s, s.pool)
	t.Cleanup(func() { admins.Delete(s) })
	if err := s.EnsureBaseSchema(ctxb); err != nil {
		t.Fatal(err)
	}
	return s
}

// presentRelations lists which of recovery's relations exist.
func presentRelations(t testing.TB, s *Store) []string {
	t.Helper()
	var out []string
	for _, r := range recoveryRelations {
		var ok bool
		if err := s.pool.QueryRow(ctxb, `SELECT to_regclass($1) IS NOT NULL`, r).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

// versionRows is the version table's content (version:applied, by id).
func versionRows(t testing.TB, s *Store) string {
	t.Helper()
	var v string
	if err := s.pool.QueryRow(ctxb, `SELECT string_agg(version_id || ':' || is_applied, ',' ORDER BY id) FROM `+
		pgx.Identifier{VersionTable}.Sanitize()).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// previousReleaseScript is the frozen hand-rolled ri06 script of the last
// release before versioned migrations.
func previousReleaseScript(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("testdata/ri06-previous-release.sql")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRefusal_SCHEMA_MISSING: EnsureSchema(apply=false) on a database whose
// recovery schema is absent or unversioned answers SCHEMA_MISSING naming the
// current and required versions and `manager migrate`, and writes nothing:
// no table, no version table, no version row. It runs as the superuser, so
// "nothing written" is the code's restraint, not a missing privilege.
func TestRefusal_SCHEMA_MISSING(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, s *Store)
		present []string // recovery relations before and after
	}{
		{"fresh database", func(*testing.T, *Store) {}, nil},
		{"tables of the hand-rolled script, no version table", func(t *testing.T, s *Store) {
			mustExec(t, s, previousReleaseScript(t))
		}, recoveryRelations[1:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := adminStore(t)
			tc.prepare(t, s)
			if got := presentRelations(t, s); !slices.Equal(got, tc.present) {
				t.Fatalf("before: %v, want %v", got, tc.present)
			}
			err := s.EnsureSchema(ctxb, false)
			wantCode(t, err, codes.SchemaMissing)
			for _, want := range []string{"version 0", fmt.Sprintf("requires %d", latestVersion()), "manager migrate"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q does not say %q", err, want)
				}
			}
			if got := presentRelations(t, s); !slices.Equal(got, tc.present) {
				t.Fatalf("EnsureSchema(apply=false) wrote: relations %v, want %v", got, tc.present)
			}
			// The DBA's fix, then the same check passes.
			if err := s.Migrate(ctxb); err != nil {
				t.Fatal(err)
			}
			if err := s.EnsureSchema(ctxb, false); err != nil {
				t.Fatalf("after migrate: %v", err)
			}
		})
	}
}

// NFR-APR01: the migrations applied twice, and applied to a database already
// holding live data (before and after they existed), lose nothing; the second
// run applies nothing.
func TestNFRAPR01_MigrationIsAdditiveAndRerunnable(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	adm := New(adminOf(t, s))
	// A database with only the base schema and live data, recovery's schema not yet applied.
	mustExec(t, s, `DROP TABLE projection_catchup_cursor, projection_catchup_lease, projection_catchup_basis, projection_catchup_outbox, `+
		pgx.Identifier{VersionTable}.Sanitize())
	run := addRun(t, s, "s", PhaseActive, nil)
	seedTrade(t, s, "s", evTrade1, i64(2), "BOOKED")
	seedOrder(t, s, "s", evOrder, i64(2))
	seedPosition(t, s, "s", "A", "ACME", "5", "110", true, "0")
	before := snapshot0(t, s)
	for i, want := range []int{len(KnownMigrations()), 0} {
		applied, err := adm.ApplyMigrations(ctxb)
		if err != nil {
			t.Fatalf("apply %d: %v", i+1, err)
		}
		if len(applied) != want {
			t.Fatalf("apply %d applied %+v, want %d migrations", i+1, applied, want)
		}
		if after := snapshot0(t, s); after != before {
			t.Fatalf("migration %d changed base data", i+1)
		}
	}
	// The migrator's grants went with the dropped tables: re-grant as documented.
	for _, g := range pgtest.RecoveryTableStatements {
		mustExec(t, s, g)
	}
	// Recovery state written, then the migrations again: still there.
	l := lease(t, s, "s", "a")
	mustExec(t, s, `DELETE FROM positions`)
	mustExec(t, s, `DELETE FROM trades`)
	mustExec(t, s, `DELETE FROM orders`)
	mustExec(t, s, `DELETE FROM order_events`)
	catchUp(t, s, l, run, baseLedger(t), 100)
	full := snapshot(t, s)
	mustExec(t, s, `DELETE FROM `+pgx.Identifier{VersionTable}.Sanitize()+` WHERE version_id > 0`) // forget it was applied: rerun 00001 itself
	if applied, err := adm.ApplyMigrations(ctxb); err != nil || len(applied) != len(KnownMigrations()) {
		t.Fatalf("rerun: applied %+v, %v", applied, err)
	}
	if err := adm.EnsureBaseSchema(ctxb); err != nil {
		t.Fatal(err)
	}
	if snapshot(t, s) != full {
		t.Fatal("re-applying the schema lost data")
	}
	if got, _ := s.ReadLease(ctxb, "s"); got.Fence != l.Fence {
		t.Fatalf("lease lost: %+v", got)
	}
}

// NFR-APR01: a database where the previous release's hand-rolled script
// created recovery's tables, and recovery has worked (cursor, lease, basis,
// outbox), is adopted by goose: version 1 recorded, every row kept, and the
// next page continues from the kept cursor.
func TestMigrate_UpgradesAHandRolledDatabase(t *testing.T) {
	t.Parallel()
	s := adminStore(t)
	mustExec(t, s, previousReleaseScript(t))
	run := addRun(t, s, "s", PhaseActive, nil)
	l := lease(t, s, "s", "a")
	src := baseLedger(t)
	// This binary's pages need 00005's columns of the basis; the previous
	// release's rows are written with them, then the columns are dropped, so
	// the upgrade below meets basis rows exactly as that release left them.
	mustExec(t, s, `ALTER TABLE projection_catchup_basis ADD COLUMN derived_quantity numeric, ADD COLUMN derived_avg_cost numeric,
    ADD COLUMN deferred boolean NOT NULL DEFAULT false`)
	catchUp(t, s, l, run, src, 2)
	mustExec(t, s, `ALTER TABLE projection_catchup_basis DROP COLUMN derived_quantity, DROP COLUMN derived_avg_cost, DROP COLUMN deferred`)
	before := snapshot(t, s)
	if !strings.Contains(before, "CURRENT") || outbox(t, s) == nil {
		t.Fatalf("the previous release's state is not there to lose:\n%s", before)
	}

	applied, err := s.ApplyMigrations(ctxb)
	if err != nil {
		t.Fatal(err)
	}
	// 00001 is adopted (its IF NOT EXISTS finds the tables), the later ones
	// are created: every known migration recorded once, in order.
	if len(applied) != len(KnownMigrations()) || applied[0].Version != 1 || applied[0].Name != "00001_ri06-automatic-recovery.sql" {
		t.Fatalf("applied %+v, want 00001 adopted and every later migration applied", applied)
	}
	// 00005 gives every basis row an unknown derived position and no
	// deferral (",,,f" at the end of the row); nothing else may differ.
	if after := snapshot(t, s); strings.ReplaceAll(after, ",,,f)", ")") != before {
		t.Fatalf("the upgrade lost data:\nbefore %s\nafter  %s", before, after)
	}
	if got, _ := s.ReadLease(ctxb, "s"); got.Fence != l.Fence || got.Owner != "a" {
		t.Fatalf("lease lost: %+v", got)
	}
	v, err := s.SchemaVersion(ctxb)
	if err != nil || v.Current != latestVersion() || v.Missing() || v.Newer() {
		t.Fatalf("version after upgrade %+v %v", v, err)
	}
	if err := s.EnsureSchema(ctxb, false); err != nil {
		t.Fatal(err)
	}
	// Work continues where the previous release stopped.
	res, err := s.ApplyPage(ctxb, l, run, src.Page(src.Boundary, 2))
	if err != nil || !res.Current() || res.VerifiedThroughSeq != src.Boundary {
		t.Fatalf("next page after the upgrade: %+v %v", res, err)
	}
}

// Two managers starting together on a fresh database: the migrations are
// applied exactly once, every caller succeeds, and the version table has one
// row for each migration.
func TestMigrate_ConcurrentCallsSerialize(t *testing.T) {
	t.Parallel()
	first := adminStore(t)
	dsn := first.pool.Config().ConnString()
	const n = 4
	stores := []*Store{first}
	for i := 1; i < n; i++ {
		stores = append(stores, New(pgtest.Pool(t, dsn)))
	}
	results := make([][]AppliedMigration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = s.ApplyMigrations(ctxb)
		}()
	}
	wg.Wait()
	appliedBy := 0
	for i := range stores {
		if errs[i] != nil {
			t.Fatalf("migrator %d: %v", i, errs[i])
		}
		appliedBy += len(results[i])
	}
	if appliedBy != len(KnownMigrations()) {
		t.Fatalf("%d migrations applied across %d concurrent migrators, want each of %v once: %+v", appliedBy, n, KnownMigrations(), results)
	}
	if got := versionRows(t, first); got != wantVersionRows() {
		t.Fatalf("version rows %q", got)
	}
}

// The serialisation is the session lock itself: while another session holds
// it (a DBA's `manager migrate` in progress), Migrate waits and writes
// nothing; it proceeds when the lock is released.
func TestMigrate_WaitsForTheMigrationLock(t *testing.T) {
	t.Parallel()
	s := adminStore(t)
	holder, err := pgx.Connect(ctxb, s.pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctxb)
	if _, err := holder.Exec(ctxb, `SELECT pg_advisory_lock($1)`, migrationLockID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Migrate(ctxb) }()
	select {
	case err := <-done:
		t.Fatalf("Migrate finished (%v) while another session held the migration lock", err)
	case <-time.After(2500 * time.Millisecond):
	}
	if got := presentRelations(t, s); slices.Contains(got, "projection_catchup_cursor") {
		t.Fatalf("a migration ran under another session's lock: %v", got)
	}
	if _, err := holder.Exec(ctxb, `SELECT pg_advisory_unlock($1)`, migrationLockID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Migrate did not proceed after the lock was released")
	}
	if got := presentRelations(t, s); !slices.Equal(got, recoveryRelations) {
		t.Fatalf("relations after migrate: %v", got)
	}
}

// A schema newer than this binary (a newer manager migrated it) is accepted,
// never downgraded, and logged once.
func TestSchema_NewerIsAcceptedNotDowngraded(t *testing.T) {
	t.Parallel()
	s := adminStore(t)
	if err := s.Migrate(ctxb); err != nil {
		t.Fatal(err)
	}
	// What a future migration (one past this binary's latest) would leave behind.
	future := latestVersion() + 1
	mustExec(t, s, `CREATE TABLE projection_catchup_future (x int)`)
	mustExec(t, s, `INSERT INTO `+pgx.Identifier{VersionTable}.Sanitize()+` (version_id, is_applied) VALUES ($1, true)`, future)
	rows := versionRows(t, s)

	v, err := s.SchemaVersion(ctxb)
	if err != nil || v.Current != future || v.Required != latestVersion() || !v.Newer() || v.Missing() {
		t.Fatalf("SchemaVersion = %+v, %v", v, err)
	}
	var logged []string
	ctx := logr.NewContext(ctxb, funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{}))
	for _, apply := range []bool{false, true, false} {
		if err := s.EnsureSchema(ctx, apply); err != nil {
			t.Fatalf("EnsureSchema(%v) on a newer schema: %v", apply, err)
		}
	}
	if applied, err := s.ApplyMigrations(ctxb); err != nil || len(applied) != 0 {
		t.Fatalf("ApplyMigrations on a newer schema: %+v %v", applied, err)
	}
	if got := versionRows(t, s); got != rows {
		t.Fatalf("version rows changed: %q -> %q", rows, got)
	}
	if got := presentRelations(t, s); !slices.Equal(got, recoveryRelations) {
		t.Fatalf("relations %v", got)
	}
	var kept bool
	if err := s.pool.QueryRow(ctxb, `SELECT to_regclass('projection_catchup_future') IS NOT NULL`).Scan(&kept); err != nil || !kept {
		t.Fatalf("the newer migration's table was dropped (%v)", err)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], fmt.Sprintf(`"schemaVersion"=%d`, future)) || !strings.Contains(logged[0], fmt.Sprintf(`"managerSchemaVersion"=%d`, latestVersion())) {
		t.Fatalf("want one log line naming both versions, got %q", logged)
	}
}

// NFR-APR01, statically: every migration only creates, and only if not
// exists, and has no Down section (nothing here ever downgrades). The one
// ALTER allowed adds columns, IF NOT EXISTS, to a table an earlier migration
// of recovery's own created (never a base table): every clause of it must be
// ADD COLUMN IF NOT EXISTS.
func TestNFRAPR01_MigrationsOnlyCreateIfNotExists(t *testing.T) {
	names, _ := fs.Glob(migrationsFS(), "*.sql")
	if len(names) == 0 {
		t.Fatal("no migrations embedded")
	}
	own := map[string]bool{} // tables created by the migrations read so far
	alter := regexp.MustCompile(`(?is)\bALTER\s+TABLE\s+(\w+)\s+(ADD\s+COLUMN\s+IF\s+NOT\s+EXISTS\s[^,;]*(?:,\s*ADD\s+COLUMN\s+IF\s+NOT\s+EXISTS\s[^,;]*)*);`)
	for _, name := range names {
		b, err := fs.ReadFile(migrationsFS(), name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), "-- +goose Up\n") || strings.Contains(string(b), "+goose Down") {
			t.Errorf("%s: must start with -- +goose Up and have no Down section", name)
		}
		sql := regexp.MustCompile(`(?m)--.*$`).ReplaceAllString(string(b), "")
		sql = alter.ReplaceAllStringFunc(sql, func(stmt string) string {
			if tbl := strings.ToLower(alter.FindStringSubmatch(stmt)[1]); !own[tbl] {
				t.Errorf("%s adds columns to %s, which no earlier migration of recovery's created", name, tbl)
			}
			return ""
		})
		for _, m := range regexp.MustCompile(`(?i)\bCREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+(\w+)`).FindAllStringSubmatch(sql, -1) {
			own[strings.ToLower(m[1])] = true
		}
		if regexp.MustCompile(`(?i)\b(DROP|ALTER|TRUNCATE|DELETE|UPDATE|INSERT|RENAME)\b`).MatchString(sql) {
			t.Errorf("%s must be additive: no DROP/ALTER/TRUNCATE/DELETE/UPDATE/INSERT/RENAME", name)
		}
		creates := regexp.MustCompile(`(?i)\bCREATE\b[^;]*`).FindAllString(sql, -1)
		for _, c := range creates {
			if !regexp.MustCompile(`(?i)IF NOT EXISTS`).MatchString(c) {
				t.Errorf("%s not rerunnable: %s", name, c)
			}
		}
		if name == "00001_ri06-automatic-recovery.sql" && len(creates) < 5 {
			t.Fatalf("%s: only %d CREATE statements", name, len(creates))
		}
	}
}

// Migration files are NNNNN_name.sql, numbered 1, 2, 3... without gaps, so
// the order and the version are the file name.
func TestMigrations_FilesAreNumbered(t *testing.T) {
	names, _ := fs.Glob(migrationsFS(), "*")
	known := KnownMigrations()
	if len(names) != len(known) {
		t.Fatalf("files %v, versions %v", names, known)
	}
	for i, name := range names {
		if !regexp.MustCompile(`^\d{5}_[a-z0-9-]+\.sql$`).MatchString(name) {
			t.Errorf("%s: want NNNNN_lower-case-name.sql", name)
		}
		if known[i] != int64(i+1) {
			t.Errorf("versions %v: want 1..%d without gaps", known, len(known))
		}
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

// latestVersion is the newest migration this binary carries.
func latestVersion() int64 {
	known := KnownMigrations()
	return known[len(known)-1]
}

// wantVersionRows is versionRows after every known migration was applied once.
func wantVersionRows() string {
	parts := []string{"0:true"}
	for _, v := range KnownMigrations() {
		parts = append(parts, fmt.Sprintf("%d:true", v))
	}
	return strings.Join(parts, ",")
}
