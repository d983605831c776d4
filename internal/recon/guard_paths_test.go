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
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestGuard_DetectionReceivesNoWriter: detection and planning are functions
// of the snapshot (and the report made from it) alone. An added parameter
// would be a way in for a writer (a handler, a pool, a journal) that the
// import guard cannot see, so the signatures are pinned.
func TestGuard_DetectionReceivesNoWriter(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   any
		want []reflect.Type
	}{
		{"Detect", Detect, []reflect.Type{reflect.TypeOf(&Snapshot{})}},
		{"DetectHistory", DetectHistory, []reflect.Type{reflect.TypeOf((*context.Context)(nil)).Elem(), reflect.TypeOf(&Snapshot{}),
			reflect.TypeOf((*History)(nil)).Elem()}},
		{"PlanRepairs", PlanRepairs, []reflect.Type{reflect.TypeOf(&Report{}), reflect.TypeOf(&Snapshot{})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := reflect.TypeOf(tc.fn)
			var got []reflect.Type
			for i := 0; i < ft.NumIn(); i++ {
				got = append(got, ft.In(i))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%s takes %v, want only %v: detection and planning receive no writer", tc.name, got, tc.want)
			}
		})
	}
	// The snapshot itself carries data, never behaviour: no func, chan or
	// interface field anywhere in it (an interface could smuggle a writer).
	var walk func(path string, ty reflect.Type, seen map[reflect.Type]bool)
	walk = func(path string, ty reflect.Type, seen map[reflect.Type]bool) {
		if seen[ty] {
			return
		}
		seen[ty] = true
		switch ty.Kind() {
		case reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
			t.Errorf("%s is a %s: a snapshot holds data only", path, ty.Kind())
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(path+"[]", ty.Elem(), seen)
		case reflect.Map:
			walk(path+"{key}", ty.Key(), seen)
			walk(path+"{}", ty.Elem(), seen)
		case reflect.Struct:
			if ty.PkgPath() == "time" || strings.HasSuffix(ty.PkgPath(), "shopspring/decimal") {
				return // value types with unexported internals
			}
			for i := 0; i < ty.NumField(); i++ {
				f := ty.Field(i)
				walk(path+"."+f.Name, f.Type, seen)
			}
		}
	}
	walk("Snapshot", reflect.TypeOf(Snapshot{}), map[reflect.Type]bool{})
	// The history is the one interface detection receives: its methods are
	// the reads pinned here, each returning data (rows, events, counts), so
	// a writer cannot ride in through it unnoticed.
	ht := reflect.TypeOf((*History)(nil)).Elem()
	var methods []string
	for i := 0; i < ht.NumMethod(); i++ {
		methods = append(methods, ht.Method(i).Name)
	}
	want := []string{"Counts", "CurrentOrders", "Duplicates", "End", "Legacy", "NextPage", "OrderEventsByKey", "OrdersByID", "RowsThrough", "TradesByID"}
	if !reflect.DeepEqual(methods, want) {
		t.Errorf("History's methods are %v, want only the reads %v", methods, want)
	}
	for _, ty := range []reflect.Type{reflect.TypeOf(SourcePage{}), reflect.TypeOf(HistoryRows{}), reflect.TypeOf(LegacyRows{}), reflect.TypeOf(HistoryCounts{})} {
		walk(ty.Name(), ty, map[reflect.Type]bool{})
	}
}

// TestGuard_ApplyPathKeepsItsGuards reads Workflow.Apply and Workflow.Rollback
// as source: every guard of the specification is checked before the first
// write, in the specification's order, and the failure path rolls back. The
// behavioural tests (TestApply_GuardsWriteNothing, TestApply_GuardOrder)
// prove each guard works; this one fails when one is deleted outright, with
// a message naming it.
func TestGuard_ApplyPathKeepsItsGuards(t *testing.T) {
	fset := token.NewFileSet()
	body := func(file, fn string) string {
		t.Helper()
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn {
				src, _ := readRange(file, fset.Position(fd.Pos()).Offset, fset.Position(fd.End()).Offset)
				return src
			}
		}
		t.Fatalf("%s: no function %s (the apply path was restructured: update this guard with it)", file, fn)
		return ""
	}
	apply := body("apply.go", "Apply")
	order := []struct{ guard, ident string }{
		{"permission (repair_denied)", "ResultRepairDenied"},
		{"confirmation (confirmation_required)", "ResultConfirmationNeeded"},
		{"tamper check (plan_tampered)", "ResultPlanTampered"},
		{"expiry (plan_expired)", "ResultPlanExpired"},
		{"irreversible opt-in / only (nothing_selected)", "ResultNothingSelected"},
		{"blast radius (blast_radius_exceeded)", "ResultBlastRadius"},
		{"handlers (handler_missing)", "ResultHandlerMissing"},
		{"fresh read (snapshot_unavailable)", "ResultSnapshotUnavailable"},
		{"stale plan (plan_stale)", "ResultPlanStale"},
	}
	last := -1
	for _, g := range order {
		i := strings.Index(apply, g.ident)
		switch {
		case i < 0:
			t.Errorf("Workflow.Apply lost the %s guard (%s)", g.guard, g.ident)
		case i < last:
			t.Errorf("the %s guard (%s) runs out of the specification's order", g.guard, g.ident)
		default:
			last = i
		}
	}
	if !strings.Contains(apply, "selectActions(") || !strings.Contains(body("apply.go", "selectActions"), "!opt.AllowIrreversible") {
		t.Error("Workflow.Apply lost the irreversible opt-in (selectActions must drop irreversible actions unless ApplyOptions.AllowIrreversible)")
	}
	if !strings.Contains(body("apply.go", "execute"), "rollbackAfter(") || !strings.Contains(body("apply.go", "rollbackAfter"), "revertNewestFirst(") {
		t.Error("Workflow.Apply lost its rollback: the first handler error must revert the journal newest-first")
	}
	if rb := body("rollback.go", "Rollback"); !strings.Contains(rb, "Allowed") {
		t.Error("Workflow.Rollback lost its permission check")
	}
}

// readRange returns file[from:to].
func readRange(file string, from, to int) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	return string(b[from:to]), nil
}
