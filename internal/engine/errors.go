package engine

import "fmt"

// Replay refusal codes (FR-APR03: replay is strict from genesis across all
// recording terms; each of these refuses instead of serving a page built on a
// history that is not provably the whole consensus output).
const (
	// CodeMissingGenesis: the oldest retained segment does not start at seq 1
	// (the archive was trimmed from the front, or the log is not from genesis).
	// Without genesis the chain digest cannot be recomputed from d0.
	CodeMissingGenesis = "MISSING_GENESIS"
	// CodeDiscontinuity: a gap or overlap between recording terms or inside a
	// segment. Serving across it would skip or repeat commands.
	CodeDiscontinuity = "DISCONTINUITY"
	// CodeArchiveBehindBoundary: the retained commands end before the
	// committed boundary B (tail trimmed or lost); outputs up to B cannot be
	// reproduced.
	CodeArchiveBehindBoundary = "ARCHIVE_BEHIND_BOUNDARY"
)

// ReplayError is a typed replay refusal; Code is one of the Code* constants.
type ReplayError struct {
	Code   string
	Detail string
}

func (e *ReplayError) Error() string { return fmt.Sprintf("replay refused: %s: %s", e.Code, e.Detail) }
