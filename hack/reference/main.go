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

// Command reference writes the generated references under docs/reference/
// (the custom resources, the metrics and the completeness endpoint) and the
// checks that keep them and CHANGELOG.md true to the code:
//
//	go run ./hack/reference          # write docs/reference/{crds,metrics,completeness}.md
//	go run ./hack/reference -check   # fail, with the diff, when a committed page differs
//
// The manager's flags page is rendered by cmd/manager's
// TestManagerFlagsReference, the one place the manager's unexported flag
// sets can be read from (`make reference` runs both).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/projection-recovery/projection-recovery/internal/docgen"
)

func main() {
	root := flag.String("root", ".", "the repository's root directory")
	check := flag.Bool("check", false, "compare the committed pages and CHANGELOG.md with the code instead of writing the pages")
	flag.Parse()
	if err := run(*root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "reference:", err)
		os.Exit(1)
	}
}

func run(root string, check bool) error {
	pages, err := Pages(root)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, ReferenceDir)
	if !check {
		return docgen.Write(dir, pages)
	}
	return errors.Join(docgen.Check(dir, pages), CheckChangelog(root))
}
