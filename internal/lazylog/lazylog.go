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

// Package lazylog defers a logger's key/value pairs until a line is written.
//
// Every reconcile gives its logger the controller, the object and a
// reconcile id (controller-runtime) and the scope (this manager), and an
// idle cycle then writes no line at all. zap encodes such values the moment
// they are added (a copy of the encoder and its buffer per call): at 1,000
// scopes that was about 8 % of an idle manager's CPU for lines never
// written. Here WithValues only remembers the pairs; they reach the
// underlying sink, in the order they were given, when a line is written.
package lazylog

import (
	"slices"

	"github.com/go-logr/logr"
)

// New returns l with its WithValues deferred. Lines, names, levels and the
// caller a line reports are those l would have written.
func New(l logr.Logger) logr.Logger {
	s := l.GetSink()
	if s == nil {
		return l
	}
	// Our Info and Error are one more frame between the caller and the
	// sink: without this the caller of every line would be this file.
	if cd, ok := s.(logr.CallDepthLogSink); ok {
		s = cd.WithCallDepth(1)
	}
	return logr.New(&sink{under: s})
}

// sink holds the pairs not yet given to under. kv is never appended to in
// place: two loggers derived from one must not share pairs.
type sink struct {
	under logr.LogSink
	kv    []any
}

// Init does nothing: under was initialised by the logger it came from.
func (s *sink) Init(logr.RuntimeInfo) {}

func (s *sink) Enabled(level int) bool { return s.under.Enabled(level) }

func (s *sink) Info(level int, msg string, kv ...any) {
	s.resolved().Info(level, msg, kv...)
}

func (s *sink) Error(err error, msg string, kv ...any) {
	s.resolved().Error(err, msg, kv...)
}

// resolved is under with the pending pairs, encoded now that a line needs
// them.
func (s *sink) resolved() logr.LogSink {
	if len(s.kv) == 0 {
		return s.under
	}
	return s.under.WithValues(s.kv...)
}

func (s *sink) WithValues(kv ...any) logr.LogSink {
	return &sink{under: s.under, kv: slices.Concat(s.kv, kv)}
}

func (s *sink) WithName(name string) logr.LogSink {
	return &sink{under: s.under.WithName(name), kv: s.kv}
}

// WithCallDepth keeps the caller right for helpers that log on behalf of
// theirs (logr.Logger.WithCallDepth).
func (s *sink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.under.(logr.CallDepthLogSink); ok {
		return &sink{under: cd.WithCallDepth(depth), kv: s.kv}
	}
	return s
}

var _ logr.CallDepthLogSink = (*sink)(nil)
