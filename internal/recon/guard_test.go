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

package recon

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/codes"
)

func allScenarios() []scenario {
	var all []scenario
	for _, f := range []func() []scenario{tradeScenarios, positionScenarios, orderScenarios, workerScenarios, correlatedScenarios} {
		all = append(all, f()...)
	}
	return all
}

// TestGuard_InvariantsWired: every invariant is declared once, with a kind,
// a statement, guidance, a declared strategy and causes; every declared
// invariant is emitted by exactly one check and every check emits only
// declared ones (declared but unchecked, or checked but undeclared, fails).
func TestGuard_InvariantsWired(t *testing.T) {
	kinds := map[Kind]bool{}
	for _, k := range Kinds {
		kinds[k] = true
	}
	seen := map[InvariantID]bool{}
	usedKinds := map[Kind]bool{}
	for _, inv := range Invariants {
		t.Run(string(inv.ID), func(t *testing.T) {
			if seen[inv.ID] {
				t.Fatal("declared twice")
			}
			seen[inv.ID] = true
			usedKinds[inv.Kind] = true
			if !kinds[inv.Kind] || inv.Statement == "" || inv.Guidance == "" || inv.Table == "" || len(inv.Causes) == 0 {
				t.Errorf("incomplete declaration: %+v", inv)
			}
			if _, ok := SpecOf(inv.Strategy); !ok && inv.Strategy != StrategyManual {
				t.Errorf("strategy %q is not declared", inv.Strategy)
			}
			if inv.Strategy == StrategyManual && inv.RefusedWhen == "" {
				t.Error("a manual invariant must say why (RefusedWhen)")
			}
			n := 0
			for _, c := range checks {
				for _, e := range c.emits {
					if e == inv.ID {
						n++
					}
				}
			}
			if n != 1 {
				t.Errorf("emitted by %d checks, want exactly 1", n)
			}
		})
	}
	for _, c := range checks {
		for _, e := range c.emits {
			if !seen[e] {
				t.Errorf("check %s emits undeclared invariant %s", c.name, e)
			}
		}
	}
	for _, k := range Kinds {
		if !usedKinds[k] {
			t.Errorf("drift kind %s has no invariant", k)
		}
	}
	if len(Kinds) != 4 {
		t.Errorf("the four drift kinds: %v", Kinds)
	}
}

// TestGuard_EmitRefusesUndeclared: the emit helper fails detection when a
// check emits an invariant outside its declaration or an undeclared cause.
func TestGuard_EmitRefusesUndeclared(t *testing.T) {
	for _, c := range []struct {
		name  string
		inv   InvariantID
		cause CauseCode
	}{
		{"undeclared invariant", "trade.nonexistent", CauseNotInConsensus},
		{"invariant of another check", LeaseFresh, CauseClaimAbandoned},
		{"undeclared cause", TradePresentInSource, CauseDoublePublish},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDetector(fixture(1))
			d.cur = &checks[0] // trades
			d.emit(c.inv, tradeRecord("t"), nil, nil, RootCause{Code: c.cause}, false, "")
			if d.err == nil || d.findings.total != 0 {
				t.Fatalf("emit accepted %s/%s", c.inv, c.cause)
			}
		})
	}
}

// TestGuard_EveryInvariantAndCauseHasAScenario: the scenario tables raise
// every invariant and every declared cause at least once, and plan both an
// action and a refusal for every automatable strategy.
func TestGuard_EveryInvariantAndCauseHasAScenario(t *testing.T) {
	invs := map[InvariantID]bool{}
	causes := map[CauseCode]bool{}
	acted := map[ActionKind]bool{}
	for _, sc := range allScenarios() {
		s := fixture(fxCmds)
		sc.mutate(s)
		r := mustDetect(t, s)
		for _, f := range r.Findings {
			invs[f.Invariant] = true
			causes[f.RootCause.Code] = true
		}
		for _, a := range mustPlan(t, r, s).Actions {
			acted[a.Kind] = true
		}
	}
	for _, inv := range Invariants {
		if !invs[inv.ID] {
			t.Errorf("invariant %s has no scenario", inv.ID)
		}
		for _, c := range inv.Causes {
			if !causes[c] {
				t.Errorf("cause %s of %s has no scenario", c, inv.ID)
			}
		}
	}
	for _, c := range []CauseCode{CauseSourceReadEmpty, CauseSourceReadIncomplete} {
		if !causes[c] {
			t.Errorf("correlated cause %s has no scenario", c)
		}
	}
	for _, s := range ActionSpecs {
		if !acted[s.Kind] {
			t.Errorf("strategy %s is never planned by a scenario", s.Kind)
		}
	}
}

// TestRefusal_EveryBlockingCodeHasAnInvariant: every blocking refusal code
// of internal/codes maps to at least one invariant (or is excluded with a
// reason as a code about the source itself); every spelling is a real code.
func TestRefusal_EveryBlockingCodeHasAnInvariant(t *testing.T) {
	known := map[string]codes.Code{}
	for _, c := range codes.All {
		known[string(c)] = c
	}
	for _, c := range codes.All {
		if c.Transient() {
			continue
		}
		t.Run(string(c), func(t *testing.T) {
			invs, mapped := RefusalInvariants[string(c)]
			reason, excluded := RefusalExclusions[string(c)]
			switch {
			case mapped && excluded:
				t.Fatal("both mapped and excluded")
			case excluded && reason == "":
				t.Fatal("excluded without a reason")
			case !mapped && !excluded:
				t.Fatal("blocking code without an invariant: add it to RefusalInvariants")
			}
			for _, id := range invs {
				if _, ok := Lookup(id); !ok {
					t.Errorf("maps to undeclared invariant %s", id)
				}
			}
			if mapped && len(invs) == 0 {
				t.Error("mapped to no invariant")
			}
		})
	}
	for _, m := range []map[string]bool{keys(RefusalInvariants), keys(RefusalExclusions)} {
		for s := range m {
			if c, ok := known[s]; !ok || c.Transient() {
				t.Errorf("%q is not a blocking code of internal/codes", s)
			}
		}
	}
}

func keys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

// forbidden imports anywhere in recon's non-test files or in the module
// packages they pull in: anything that can write (a database driver, the
// network, the file system, a Kubernetes client) or that links one
// (internal/codes links pgconn).
var forbidden = []string{"os", "os/exec", "net", "net/http", "database/sql", "syscall", "io/ioutil", "unsafe", "plugin",
	"github.com/jackc/", "k8s.io/", "sigs.k8s.io/", "github.com/nats-io/",
	"github.com/projection-recovery/projection-recovery/internal/codes", "github.com/projection-recovery/projection-recovery/internal/store",
	"github.com/projection-recovery/projection-recovery/internal/source"}

// allowedThirdParty may be linked: pure libraries.
var allowedThirdParty = []string{"github.com/shopspring/decimal", "github.com/go-logr/logr"}

const module = "github.com/projection-recovery/projection-recovery/"

// TestGuard_NoWritePathImports parses recon's non-test files and, through
// module-local imports, every package they link: no forbidden import, and
// no third-party one outside the allow list.
func TestGuard_NoWritePathImports(t *testing.T) {
	visited := map[string]bool{}
	var walk func(dir, via string)
	walk = func(dir, via string) {
		if visited[dir] {
			return
		}
		visited[dir] = true
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s (%v)", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, im := range af.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				for _, bad := range forbidden {
					if p == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(p, bad)) {
						t.Errorf("%s imports %s (via %s): detection and repair planning must have no write path", f, p, via)
					}
				}
				switch {
				case strings.HasPrefix(p, module):
					walk(filepath.Join("..", "..", strings.TrimPrefix(p, module)), via+" → "+p)
				case strings.Contains(strings.Split(p, "/")[0], "."):
					ok := false
					for _, a := range allowedThirdParty {
						ok = ok || p == a || strings.HasPrefix(p, a+"/")
					}
					if !ok {
						t.Errorf("%s imports third-party %s: not on the pure allow list", f, p)
					}
				}
			}
		}
	}
	walk(".", "recon")
	var dirs []string
	for d := range visited {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	if len(dirs) < 3 { // recon, wire, position, chain at least
		t.Fatalf("walked too little: %v", dirs)
	}
	if _, err := os.Stat("detect.go"); err != nil {
		t.Fatal("run from the package directory")
	}
}
