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

// The struct declarations JSONFields reads doc comments from in
// gotype_test.go; the types themselves are declared there too.
package docgen

import "time"

type documented struct {
	// Name is documented.
	Name string `json:"name"`
	// Items are documented.
	Items  []item `json:"items"`
	Hidden string `json:"-"`
	// At is documented.
	At *time.Time `json:"at,omitempty"`
}

type item struct {
	Count int64 `json:"count,omitempty"` // Count is documented on its line.
}

type undocumented struct {
	// Name is documented.
	Name string `json:"name"`
	Bare string `json:"bare"`
}
