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
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/docgen"
)

// updateReference makes TestManagerFlagsReference write the page instead
// of comparing it (`make reference`).
var updateReference = flag.Bool("update-reference", false, "write docs/reference/manager-flags.md from the flag sets instead of comparing it")

// managerCommands are the manager's command lines with the flag sets they
// parse: the reference is rendered from these, not from a copy.
func managerCommands() []docgen.Command {
	synopsis := func(help string) string {
		s, _, _ := strings.Cut(help, "Flags:\n")
		return s
	}
	return []docgen.Command{
		{Name: "manager", Synopsis: synopsis(usage()), Flags: newFlagSet(&options{})},
		{Name: "manager migrate", Synopsis: synopsis(migrateUsage), Flags: newMigrateFlagSet(&migrateOptions{})},
		{Name: "manager drain", Synopsis: synopsis(drainUsage), Flags: newDrainFlagSet(&drainOptions{})},
	}
}

// TestManagerFlagsReference fails when docs/reference/manager-flags.md is
// not what the manager's flag sets render: a flag added, removed or
// re-described without `make reference` leaves the page wrong.
func TestManagerFlagsReference(t *testing.T) {
	page, err := docgen.Flags("manager", managerCommands())
	if err != nil {
		t.Fatal(err)
	}
	pages := []docgen.Page{{Name: "manager-flags.md", Content: page}}
	dir := filepath.Join("..", "..", "docs", "reference")
	if *updateReference {
		if err := docgen.Write(dir, pages); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := docgen.Check(dir, pages); err != nil {
		t.Fatal(err)
	}
}

// The synopsis must be the help text up to its flag list: a --help whose
// layout changed would otherwise put the flag list, or nothing, on the page.
func TestManagerCommands_SynopsisIsTheHelpBeforeTheFlags(t *testing.T) {
	for _, c := range managerCommands() {
		t.Run(c.Name, func(t *testing.T) {
			if !strings.HasPrefix(c.Synopsis, "Usage: "+c.Name) || strings.Contains(c.Synopsis, "  -") {
				t.Fatalf("synopsis of %s:\n%s", c.Name, c.Synopsis)
			}
		})
	}
}
