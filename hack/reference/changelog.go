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

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pressly/goose/v3"

	"github.com/projection-recovery/projection-recovery/internal/store"
)

// MigrationsDir holds the schema migrations the manager embeds.
const MigrationsDir = "internal/store/migrations"

// CheckChangelog fails when a schema migration has no entry in
// CHANGELOG.md: a heading naming its file in a code span (### `00007_x.sql`)
// whose section says which grants the runtime roles need for it (a line
// starting "Grants:" or "Grants (as ...):"). An operator upgrading reads the
// changelog, not the SQL; a migration that lands without an entry leaves
// them to discover its grants from permission errors.
func CheckChangelog(root string) error {
	names, err := migrationFiles(root)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return fmt.Errorf("changelog: %w", err)
	}
	return checkEntries(string(b), names)
}

// migrationFiles lists the migration files under root, checked against the
// versions the manager embeds (store.KnownMigrations) so that the check
// reads the directory the binary carries.
func migrationFiles(root string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(root, MigrationsDir, "*.sql"))
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(paths))
	var versions []int64
	for _, p := range paths {
		n := filepath.Base(p)
		v, err := goose.NumericComponent(n)
		if err != nil {
			return nil, fmt.Errorf("changelog: migration %s: %w", n, err)
		}
		names = append(names, n)
		versions = append(versions, v)
	}
	slices.Sort(versions)
	if known := store.KnownMigrations(); !slices.Equal(versions, known) {
		return nil, fmt.Errorf("changelog: %s holds versions %v, the manager embeds %v", MigrationsDir, versions, known)
	}
	return names, nil
}

// checkEntries checks that changelog has an entry with grants for every
// migration file name.
func checkEntries(changelog string, names []string) error {
	sections := map[string]string{} // file name -> its section's text
	var current string
	var body strings.Builder
	flush := func() {
		if current != "" {
			sections[current] = body.String()
		}
		body.Reset()
	}
	for _, line := range strings.Split(changelog, "\n") {
		if strings.HasPrefix(line, "#") {
			flush()
			current = ""
			for _, n := range names {
				if strings.Contains(line, "`"+n+"`") {
					current = n
				}
			}
			continue
		}
		body.WriteString(line + "\n")
	}
	flush()
	var errs []error
	for _, n := range names {
		s, ok := sections[n]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("CHANGELOG.md has no entry for migration %s: add a heading naming `%s`, what it creates or changes, its grants and its downgrade rule", n, n))
		case !hasGrantsLine(s):
			errs = append(errs, fmt.Errorf("CHANGELOG.md's entry for migration %s says nothing of grants: add a line starting \"Grants:\" or \"Grants (as ROLE):\" (\"Grants: none new\" when the table-level grants cover it)", n))
		}
	}
	return errors.Join(errs...)
}

func hasGrantsLine(section string) bool {
	for _, line := range strings.Split(section, "\n") {
		line = strings.TrimLeft(strings.TrimSpace(line), "-* ")
		line = strings.TrimPrefix(line, "**")
		if rest, ok := strings.CutPrefix(line, "Grants"); ok && (strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, " (") || strings.HasPrefix(rest, "**")) {
			return true
		}
	}
	return false
}
