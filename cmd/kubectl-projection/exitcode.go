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

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The exit codes a script can rely on (documented in the root --help). They
// are a contract: a CI job gating on `kubectl projection report` must tell
// "drift found" (3) from "could not ask" (1) from "wrong invocation" (2).
const (
	ExitOK      = 0 // done; for report: the projection is clean
	ExitError   = 1 // could not do it: no cluster, not found, network, conflict
	ExitUsage   = 2 // wrong invocation: unknown command or flag, missing NAME
	ExitRefused = 3 // not clean, refused (client-side or by the API server) or blocked
)

// exitError carries an exit code with the error to print. Commands return
// it; run maps every other error once, in exitCode.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// refused marks a refusal (exit 3): a client-side guard said no, or the
// answer is "not clean / blocked".
func refused(format string, args ...any) error {
	return &exitError{code: ExitRefused, err: fmt.Errorf(format, args...)}
}

// usageErr marks a wrong invocation (exit 2).
func usageErr(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: ExitUsage, err: err}
}

// silentRefusal is exit 3 with nothing more to print: the command already
// printed why (a report that is not clean, a blocked scope).
var errSilentRefusal = &exitError{code: ExitRefused, err: errors.New("")}

// readFailed marks a failed read as an error (1), forbidden included: a
// read the API server forbids means "could not ask", not a refusal of what
// was asked, so a script gating on report or status never takes missing
// permissions for drift (3), nor drift for missing permissions.
func readFailed(err error) error {
	if err != nil && apierrors.IsForbidden(err) {
		return &exitError{code: ExitError, err: err}
	}
	return err
}

// exitCode maps an error to the documented exit code. An API server refusal
// of a write (admission: Forbidden; validation: Invalid) is a refusal, 3, so
// a script can tell "you may not" from "could not ask"; reads go through
// readFailed. A NotFound or a conflict is
// an error, 1. started is false when cobra failed before any command ran
// (flag parsing, argument count, unknown command): that is usage, 2.
func exitCode(err error, started bool) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if !started {
		return ExitUsage
	}
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		return ExitRefused
	}
	return ExitError
}
