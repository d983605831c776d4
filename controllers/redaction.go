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

package controllers

import (
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// maxEventNote is the longest note events.k8s.io/v1 accepts. The API server
// refuses a longer Event, and the recorder drops it after logging the
// refusal: without the cap a long refusal or transition is lost silently.
const maxEventNote = 1024

// recordEvent is the one way this package records an Event. The note is
// redacted of secrets (every secret the object references; notes built
// from a status message that was redacted already may pass none) and cut
// to maxEventNote bytes on a rune boundary, ending in "..." so a reader sees
// it was cut. It is passed as an argument, never as the format: a message
// may contain '%'.
func recordEvent(rec events.EventRecorder, regarding, related runtime.Object, typ, reason, action, note string, secrets ...resolvedSecrets) {
	if rec == nil {
		return
	}
	rec.Eventf(regarding, related, typ, reason, action, "%s", eventNote(note, secrets...))
}

// eventNote is what recordEvent sends: redacted first, then capped, so a
// secret cut in two by the cap cannot leave its first half behind.
func eventNote(note string, secrets ...resolvedSecrets) string {
	return truncateTo(redact(note, secrets...), maxEventNote)
}

// referencedSecrets is every secret a reconciliation reads: the recovery's
// DSN, token and CA, and its own repair DSN. Whatever it reports (status,
// events, logs) is redacted of all of them; leaving the repair DSN out let
// a connection error of an apply or a rollback carry its password.
func (s *reconScope) referencedSecrets() []resolvedSecrets {
	return []resolvedSecrets{s.secrets, {dsn: s.repairDSN}}
}

// redact removes every referenced secret from msg (referencedSecrets).
func (s *reconScope) redact(msg string) string { return redact(msg, s.referencedSecrets()...) }

// redactingLogger logs through l with every message, string value, error
// and Stringer passed through redact. It wraps the logger handed to code
// that logs its own errors (the reconciliation workflow: a refused
// rollback's detail, a run record it could not store), whose text can carry
// a driver's echo of a DSN. Values given to WithValues are redacted only
// when a line is written, so an unused logger costs nothing.
func redactingLogger(l logr.Logger, redact func(string) string) logr.Logger {
	sink := l.GetSink()
	if sink == nil {
		return l
	}
	// One more frame (this sink's) between the caller and the logger.
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1)
	}
	return logr.New(redactingSink{under: sink, redact: redact})
}

type redactingSink struct {
	under  logr.LogSink
	redact func(string) string
}

// Init does nothing: the wrapped sink was initialised by its own logger,
// and initialising it again would add its call depth twice.
func (redactingSink) Init(logr.RuntimeInfo) {}

func (s redactingSink) Enabled(level int) bool { return s.under.Enabled(level) }

func (s redactingSink) Info(level int, msg string, kv ...any) {
	s.under.Info(level, s.redact(msg), s.values(kv)...)
}

func (s redactingSink) Error(err error, msg string, kv ...any) {
	if err != nil {
		err = redactedError{err: err, redact: s.redact}
	}
	s.under.Error(err, s.redact(msg), s.values(kv)...)
}

func (s redactingSink) WithValues(kv ...any) logr.LogSink {
	return redactingSink{under: s.under.WithValues(s.values(kv)...), redact: s.redact}
}

func (s redactingSink) WithName(name string) logr.LogSink {
	return redactingSink{under: s.under.WithName(name), redact: s.redact}
}

func (s redactingSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.under.(logr.CallDepthLogSink); ok {
		return redactingSink{under: cd.WithCallDepth(depth), redact: s.redact}
	}
	return s
}

// values wraps every value that can carry text (keys stay as they are).
func (s redactingSink) values(kv []any) []any {
	out := make([]any, len(kv))
	for i, v := range kv {
		out[i] = v
		if i%2 == 0 {
			continue
		}
		switch v.(type) {
		case string, error, fmt.Stringer:
			out[i] = redactedValue{v: v, redact: s.redact}
		}
	}
	return out
}

// redactedValue is a log value shown redacted, computed when encoded.
type redactedValue struct {
	v      any
	redact func(string) string
}

func (r redactedValue) String() string {
	switch v := r.v.(type) {
	case string:
		return r.redact(v)
	case error:
		return r.redact(v.Error())
	case fmt.Stringer:
		return r.redact(v.String())
	}
	return r.redact(fmt.Sprint(r.v))
}

// MarshalLog makes logr sinks that understand it (zapr) encode the
// redacted text, not the wrapped value.
func (r redactedValue) MarshalLog() any { return r.String() }

type redactedError struct {
	err    error
	redact func(string) string
}

func (e redactedError) Error() string { return e.redact(e.err.Error()) }
