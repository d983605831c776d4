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

import "testing"

// The demo deletes and recreates its work folder: it must be the folder the
// user named, and never the repository or a folder holding it.
func TestWorkPath(t *testing.T) {
	root := "/work/repo"
	for _, tc := range []struct {
		dir, want string // want "" = refused
	}{
		{".demo", "/work/repo/.demo"},
		{"runs/a", "/work/repo/runs/a"},
		{"/tmp/demo2", "/tmp/demo2"},
		{"/work/repo2", "/work/repo2"},
		{".", ""},
		{"", ""},
		{"./", ""},
		{"..", ""},
		{"/", ""},
		{"/work", ""},
		{"/work/repo", ""},
		{"runs/..", ""},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			got, err := workPath(root, tc.dir)
			switch {
			case tc.want == "" && err == nil:
				t.Fatalf("workPath(%q) = %q, want a refusal", tc.dir, got)
			case tc.want != "" && (err != nil || got != tc.want):
				t.Fatalf("workPath(%q) = %q, %v; want %q", tc.dir, got, err, tc.want)
			}
		})
	}
}
