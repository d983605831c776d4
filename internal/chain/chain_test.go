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

package chain

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

type vectorFile struct {
	Genesis string `json:"genesis"`
	Vectors []struct {
		Name    string   `json:"name"`
		Start   string   `json:"start"`
		Wires   []string `json:"wires"`
		Digests []string `json:"digests"`
	} `json:"vectors"`
}

// TestFRAPR03_GoldenVectors checks Next against vectors computed by an
// independent implementation (testdata/vectors.json, Python hashlib).
func TestFRAPR03_GoldenVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vf vectorFile
	if err := json.Unmarshal(raw, &vf); err != nil {
		t.Fatal(err)
	}
	if vf.Genesis != Genesis || len(Genesis) != 64 || strings.Trim(Genesis, "0") != "" {
		t.Fatalf("genesis %q", Genesis)
	}
	if len(vf.Vectors) < 3 {
		t.Fatalf("only %d vectors", len(vf.Vectors))
	}
	for _, v := range vf.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			d := v.Start
			f := NewFolder(v.Start)
			for i, w := range v.Wires {
				d = Next(d, []byte(w))
				if d != v.Digests[i] {
					t.Fatalf("%s[%d]: got %s want %s", v.Name, i, d, v.Digests[i])
				}
				if !Valid(d) {
					t.Fatalf("digest %q not valid", d)
				}
				if raw := f.Next([]byte(w)); Hex(raw) != v.Digests[i] || !f.Is(v.Digests[i]) {
					t.Fatalf("%s[%d]: Folder got %s want %s", v.Name, i, Hex(raw), v.Digests[i])
				}
			}
		})
	}
}

func TestChain_OrderMatters(t *testing.T) {
	a, b := []byte("a"), []byte("b")
	if Next(Next(Genesis, a), b) == Next(Next(Genesis, b), a) {
		t.Fatal("chain is order-insensitive")
	}
	for _, tc := range []struct {
		name, bad string
	}{
		{"empty", ""},
		{"upper-case hex", strings.ToUpper(Next(Genesis, a))},
		{"63 characters", Genesis[:63]},
		{"65 characters", Genesis + "0"},
		{"not hex", strings.Repeat("g", 64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if Valid(tc.bad) {
				t.Errorf("Valid(%q)", tc.bad)
			}
		})
	}
}

// TestFolder_NoAllocations: folding an event allocates nothing (a page folds
// up to 10,000 on the store's path).
func TestFolder_NoAllocations(t *testing.T) {
	f := NewFolder(Genesis)
	w := []byte(`{"type":"trade"}`)
	if a := testing.AllocsPerRun(1000, func() { f.Next(w) }); a != 0 {
		t.Fatalf("%v allocations per event, want 0", a)
	}
	if a := testing.AllocsPerRun(1000, func() { _ = f.Is(Genesis) }); a != 0 {
		t.Fatalf("Is: %v allocations, want 0", a)
	}
}
