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

package docgen

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
)

// Page is one generated file: its name under the reference directory and
// its content.
type Page struct {
	Name    string
	Content string
}

// Write writes pages into dir.
func Write(dir string, pages []Page) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("docgen: %w", err)
	}
	for _, p := range pages {
		if err := os.WriteFile(filepath.Join(dir, p.Name), []byte(p.Content), 0o644); err != nil {
			return fmt.Errorf("docgen: %w", err)
		}
	}
	return nil
}

// Check compares every page with the committed file of its name in dir and
// fails with the differences when one differs or is missing: the committed
// reference must say what the code does.
func Check(dir string, pages []Page) error {
	var errs []error
	for _, p := range slices.Clone(pages) {
		path := filepath.Join(dir, p.Name)
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%s is missing", path))
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if committed := string(b); committed != p.Content {
			errs = append(errs, fmt.Errorf("%s differs from what the code generates (-committed +generated):\n%s",
				path, cmp.Diff(strings.Split(committed, "\n"), strings.Split(p.Content, "\n"))))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w\nrun `make reference` and commit the result", errors.Join(errs...))
	}
	return nil
}
