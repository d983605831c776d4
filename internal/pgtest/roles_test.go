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

package pgtest_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
)

// docStatements extracts the SQL statements of every ```sql block of a
// Markdown document: comments dropped, whitespace collapsed.
func docStatements(doc string) []string {
	var out []string
	for _, m := range regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(doc, -1) {
		body := regexp.MustCompile(`(?m)--.*$`).ReplaceAllString(m[1], "")
		for _, s := range strings.SplitAfter(body, ";") {
			if s = strings.Join(strings.Fields(s), " "); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// The grants tests run with are the documented ones, statement for
// statement: a change to either fails here until both say the same.
func TestDatabaseRoleDoc_StatementsAreTheOnesTestsApply(t *testing.T) {
	b, err := os.ReadFile("../../docs/database-role.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := docStatements(string(b))
	var applied []string
	for _, list := range [][]string{pgtest.RoleStatements, pgtest.DatabaseStatements, pgtest.HardeningStatements,
		pgtest.BaseTableStatements, pgtest.RecoveryTableStatements} {
		applied = append(applied, list...)
	}
	slices.Sort(doc)
	slices.Sort(applied)
	for _, s := range doc {
		if !slices.Contains(applied, s) {
			t.Errorf("documented but not applied by the tests: %s", s)
		}
	}
	for _, s := range applied {
		if !slices.Contains(doc, s) {
			t.Errorf("applied by the tests but not documented: %s", s)
		}
	}
	if len(doc) != len(applied) {
		t.Errorf("%d documented statements, %d applied", len(doc), len(applied))
	}
}

func TestDocStatements(t *testing.T) {
	got := docStatements("x\n```sql\nGRANT a\n  ON b; -- why\n-- note; here\nREVOKE c;\n```\n```text\nnot sql;\n```\n")
	if want := []string{"GRANT a ON b;", "REVOKE c;"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestDatabaseRoleDoc_EveryMigrationHasItsGrants: section 4 of
// docs/database-role.md names every migration the binary carries (by its
// number, e.g. `00003`), and every table a migration creates is granted to
// some role there: a migration that adds a table without its grants would
// leave the runtime roles failing with permission denied after the migrate
// step, which the operator reports as a blocking INTERNAL.
func TestDatabaseRoleDoc_EveryMigrationHasItsGrants(t *testing.T) {
	b, err := os.ReadFile("../../docs/database-role.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## 4. ")
	end := strings.Index(doc[max(start, 0):], "\n## ")
	if start < 0 || end < 0 {
		t.Fatal("docs/database-role.md has no section 4")
	}
	section := doc[start : start+end]
	granted := map[string]bool{}
	for _, s := range docStatements(section) {
		if m := regexp.MustCompile(`^GRANT .* ON (.*) TO `).FindStringSubmatch(s); m != nil {
			for _, tbl := range strings.Split(m[1], ",") {
				granted[strings.TrimSpace(tbl)] = true
			}
		}
	}
	files, err := os.ReadDir("../store/migrations")
	if err != nil {
		t.Fatal(err)
	}
	createTable := regexp.MustCompile(`(?i)CREATE TABLE IF NOT EXISTS (\w+)`)
	n := 0
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".sql") {
			continue
		}
		n++
		version := f.Name()[:5]
		if !strings.Contains(section, "`"+version+"`") {
			t.Errorf("section 4 does not name migration `%s` (%s): say which grants it needs, or that it needs none", version, f.Name())
		}
		sql, err := os.ReadFile("../store/migrations/" + f.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range createTable.FindAllStringSubmatch(string(sql), -1) {
			if !granted[m[1]] {
				t.Errorf("migration %s creates %s, which no GRANT of section 4 names", f.Name(), m[1])
			}
		}
	}
	if n == 0 || !granted["projection_recovery_schema_version"] {
		t.Fatalf("%d migrations read; the version table granted: %v", n, granted["projection_recovery_schema_version"])
	}
}
