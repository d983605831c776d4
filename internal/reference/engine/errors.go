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

package engine

import (
	"fmt"

	"github.com/projection-recovery/projection-recovery/internal/source"
)

// Replay refusal codes (FR-APR03: replay is strict from genesis across all
// recording terms; each of these refuses instead of serving a page built on a
// history that is not provably the whole consensus output).
const (
	// CodeMissingGenesis: the oldest retained segment does not start at seq 1
	// (the archive was trimmed from the front, or the log is not from genesis).
	// Without genesis the chain digest cannot be recomputed from d0.
	CodeMissingGenesis = source.CodeMissingGenesis
	// CodeDiscontinuity: a gap or overlap between recording terms or inside a
	// segment. Serving across it would skip or repeat commands.
	CodeDiscontinuity = source.CodeDiscontinuity
	// CodeArchiveBehindBoundary: the retained commands end before the
	// committed boundary B (tail trimmed or lost); outputs up to B cannot be
	// reproduced.
	CodeArchiveBehindBoundary = source.CodeArchiveBehindBoundary
)

// ReplayError is a typed replay refusal; Code is one of the Code* constants.
type ReplayError struct {
	Code   string
	Detail string
}

func (e *ReplayError) Error() string { return fmt.Sprintf("replay refused: %s: %s", e.Code, e.Detail) }
