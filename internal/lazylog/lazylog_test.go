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

package lazylog

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// observed is a lazy logger over zap at info level, and what it wrote.
func observed() (logr.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.InfoLevel)
	return New(zapr.NewLogger(zap.New(core, zap.AddCaller()))), logs
}

// TestLines: a line carries what the eager logger would have written, in the
// same order: the pairs of every WithValues (before and after WithName),
// then the line's own; its logger name; its caller (the test, not this
// package: the call depth is right).
func TestLines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(l logr.Logger)
		want  []string // field keys in order
		err   bool
	}{
		{"no values", func(l logr.Logger) { l.Info("m") }, nil, false},
		{"values then name", func(l logr.Logger) { l.WithValues("a", 1).WithName("n").WithValues("b", 2).Info("m", "c", 3) }, []string{"a", "b", "c"}, false},
		{"error", func(l logr.Logger) { l.WithValues("a", 1).Error(errors.New("boom"), "m", "c", 3) }, []string{"a", "c", "error"}, true},
		{"call depth helper", func(l logr.Logger) { helper(l.WithValues("a", 1)) }, []string{"a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, logs := observed()
			tc.write(l)
			all := logs.AllUntimed()
			if len(all) != 1 {
				t.Fatalf("%d lines, want 1", len(all))
			}
			e := all[0]
			var keys []string
			for _, f := range e.Context {
				keys = append(keys, f.Key)
			}
			if len(keys) != len(tc.want) {
				t.Fatalf("fields %v, want %v", keys, tc.want)
			}
			for i := range keys {
				if keys[i] != tc.want[i] {
					t.Fatalf("fields %v, want %v", keys, tc.want)
				}
			}
			if got := filepath.Base(e.Caller.File); got != "lazylog_test.go" {
				t.Fatalf("caller %s, want this test file", e.Caller.String())
			}
			if tc.err != (e.Level == zapcore.ErrorLevel) {
				t.Fatalf("level %s", e.Level)
			}
		})
	}
}

// helper logs on behalf of its caller, as logr documents.
func helper(l logr.Logger) {
	l.WithCallDepth(1).Info("m")
}

// TestSiblingsShareNothing: two loggers derived from one keep their own
// values, whatever the capacity of the parent's.
func TestSiblingsShareNothing(t *testing.T) {
	l, logs := observed()
	// Three WithValues leave the parent's pairs with spare capacity, where
	// an append in place would let x and y write into the same array.
	base := l.WithValues("a", 1).WithValues("b", 2).WithValues("c", 3)
	x := base.WithValues("x", 1)
	y := base.WithValues("y", 2)
	x.Info("x")
	y.Info("y")
	for i, want := range []string{"x", "y"} {
		ctx := logs.AllUntimed()[i].ContextMap()
		if _, ok := ctx[want]; !ok || len(ctx) != 4 {
			t.Fatalf("line %d fields %v, want a, b, c and %s", i, ctx, want)
		}
	}
}

// countingSink counts what reaches the underlying sink.
type countingSink struct {
	withValues, lines int
}

func (c *countingSink) Init(logr.RuntimeInfo)          {}
func (c *countingSink) Enabled(level int) bool         { return level == 0 }
func (c *countingSink) Info(int, string, ...any)       { c.lines++ }
func (c *countingSink) Error(error, string, ...any)    { c.lines++ }
func (c *countingSink) WithValues(...any) logr.LogSink { c.withValues++; return c }
func (c *countingSink) WithName(string) logr.LogSink   { return c }

func (c *countingSink) assert(t *testing.T, withValues, lines int) {
	t.Helper()
	if c.withValues != withValues || c.lines != lines {
		t.Fatalf("underlying sink: %d WithValues, %d lines; want %d, %d", c.withValues, c.lines, withValues, lines)
	}
}

// TestDeferred: values reach the underlying sink only with a line that is
// written (the point of the package: an idle reconcile writes none).
func TestDeferred(t *testing.T) {
	c := &countingSink{}
	l := New(logr.New(c)).WithValues("a", 1).WithName("n").WithValues("b", 2)
	l.V(1).Info("disabled")
	c.assert(t, 0, 0)
	l.Info("written")
	c.assert(t, 1, 1)
	New(logr.New(c)).Info("no values")
	c.assert(t, 1, 2)
}
