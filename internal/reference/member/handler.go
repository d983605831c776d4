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

package member

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/projection-recovery/projection-recovery/internal/source"

	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// Log is what the handler needs of a command log; *engine.Log satisfies it.
type Log interface {
	Dir() string
	Committed() int64
	Descriptor() engine.Descriptor
}

// HandlerOptions configure NewHandler.
type HandlerOptions struct {
	// Token, when set, is required as "Authorization: Bearer <Token>" (401 otherwise).
	Token string
	// DisableCache replays from genesis for every non-idle page, literally
	// what NFR-APR02 describes. By default the replayed output for B is kept
	// and resumed when B grows (see replayTo); answers are byte-identical.
	DisableCache bool
	Logger       *slog.Logger
}

// Stats counts replay work, for tests and metrics.
type Stats struct {
	GenesisReplays   int64 // replays started from genesis
	Resumes          int64 // cached replays advanced to a larger B (or reused at the same B)
	CommandsReplayed int64 // commands executed by replays
}

// Handler serves the pinned v1 source contract (FR-APR01..04):
//
//	GET /recon/catchup-events?afterSeq=A&maxEvents=M
//	GET /recon/descriptor
type Handler struct {
	log    Log
	opts   HandlerOptions
	logger *slog.Logger
	hash   string

	mu     sync.Mutex // serialises replays; guards cached
	cached *engine.Replayer

	genesisReplays, resumes, commands atomic.Int64
}

// NewHandler serves the contract over l.
func NewHandler(l Log, opts HandlerOptions) *Handler {
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &Handler{log: l, opts: opts, logger: lg, hash: l.Descriptor().Hash()}
}

// DescriptorHash is the hash every page carries.
func (h *Handler) DescriptorHash() string { return h.hash }

// Stats returns the replay counters.
func (h *Handler) Stats() Stats {
	return Stats{GenesisReplays: h.genesisReplays.Load(), Resumes: h.resumes.Load(), CommandsReplayed: h.commands.Load()}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.opts.Token != "" && !h.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="projection-recovery"`)
		writeError(w, http.StatusUnauthorized, source.CodeUnauthorized, "missing or wrong bearer token", 0)
		return
	}
	switch r.URL.Path {
	case source.CatchupPath, source.DescriptorPath:
	default:
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no such endpoint: "+r.URL.Path, 0)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "only GET", 0)
		return
	}
	if r.URL.Path == source.DescriptorPath {
		writeJSON(w, http.StatusOK, struct {
			DescriptorHash  string `json:"descriptorHash"`
			ProtocolVersion int    `json:"protocolVersion"`
			BoundarySeq     int64  `json:"boundarySeq"`
		}{h.hash, wire.ProtocolVersion, h.log.Committed()})
		return
	}
	h.catchup(w, r)
}

func (h *Handler) authorized(r *http.Request) bool {
	got := r.Header.Get("Authorization")
	want := "Bearer " + h.opts.Token
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// parseParams reads afterSeq and maxEvents: each required exactly once, a
// base-10 integer without sign, afterSeq >= 0, 1 <= maxEvents <= MaxPageEvents.
func parseParams(raw string) (afterSeq int64, maxEvents int, err error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return 0, 0, fmt.Errorf("malformed query: %v", err)
	}
	get := func(name string, max int64) (int64, error) {
		vs := q[name]
		if len(vs) != 1 {
			return 0, fmt.Errorf("%s is required exactly once", name)
		}
		s := vs[0]
		if s == "" || s[0] == '+' || s[0] == '-' {
			if len(s) > 0 && s[0] == '-' {
				return 0, fmt.Errorf("%s must not be negative", name)
			}
			return 0, fmt.Errorf("%s must be a non-negative base-10 integer", name)
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q is not a base-10 integer in int64 range", name, s)
		}
		if v > max {
			return 0, fmt.Errorf("%s %d exceeds the maximum %d", name, v, max)
		}
		return v, nil
	}
	if afterSeq, err = get("afterSeq", 1<<62); err != nil {
		return 0, 0, err
	}
	m, err := get("maxEvents", source.MaxPageEvents)
	if err != nil {
		return 0, 0, err
	}
	if m < 1 {
		return 0, 0, fmt.Errorf("maxEvents must be at least 1")
	}
	return afterSeq, int(m), nil
}

func (h *Handler) catchup(w http.ResponseWriter, r *http.Request) {
	a, m, err := parseParams(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, source.CodeBadRequest, err.Error(), 0)
		return
	}
	// FR-APR01: B is captured once, before any replay; commands committed
	// while this request runs are not served by it (outputs after B ignored).
	b := h.log.Committed()
	if a > b {
		// FR-APR04: the consumer is ahead of what this member has committed.
		writeError(w, http.StatusConflict, source.CodeAfterSeqBeyondBoundary,
			fmt.Sprintf("afterSeq %d is beyond the committed boundary %d", a, b), b)
		return
	}
	if a == b {
		// FR-APR04: idle, answered without any replay. No digests: computing
		// them would need the replay this clause exists to avoid.
		writeJSON(w, http.StatusOK, &source.Page{ProtocolVersion: wire.ProtocolVersion, DescriptorHash: h.hash,
			BoundarySeq: b, AfterSeq: a, ThroughSeq: a, Idle: true, Events: []source.Event{}})
		return
	}
	page, refusal, err := h.buildPage(a, m, b)
	switch {
	case err != nil:
		h.logger.Error("replay failed", "afterSeq", a, "boundarySeq", b, "err", err)
		writeError(w, http.StatusInternalServerError, source.CodeReplayFailed, err.Error(), b)
	case refusal != nil:
		h.logger.Info("catch-up refused", "code", refusal.Code, "afterSeq", a, "boundarySeq", b, "message", refusal.Message)
		writeError(w, http.StatusConflict, refusal.Code, refusal.Message, b)
	default:
		writeJSON(w, http.StatusOK, page)
	}
}

// buildPage replays through b and cuts the page (a, T]. It holds the replay
// lock until the page is copied out, so a concurrent resume cannot move the
// slices under it.
func (h *Handler) buildPage(a int64, m int, b int64) (*source.Page, *source.RefusalBody, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, err := h.replayTo(b)
	if err != nil {
		var re *engine.ReplayError
		if errors.As(err, &re) {
			return nil, &source.RefusalBody{Code: re.Code, Message: re.Detail, BoundarySeq: b}, nil
		}
		return nil, nil, err
	}
	// FR-APR02: T is the last command boundary whose events fit; commands
	// with zero outputs are covered for free. T <= B by construction.
	t := r.MaxThrough(a, m)
	if t == a {
		n := len(r.Events(a, a+1))
		return nil, &source.RefusalBody{Code: source.CodeCommandExceedsPage, BoundarySeq: b,
			Message: fmt.Sprintf("command %d has %d events, more than maxEvents %d; pages hold whole commands only", a+1, n, m)}, nil
	}
	evs := r.Events(a, t)
	out := make([]source.Event, len(evs))
	for i, e := range evs {
		out[i] = source.Event{Seq: e.Seq, Wire: e.Wire}
	}
	// FR-APR03: the page carries the chain digest through afterSeq and through throughSeq.
	return &source.Page{ProtocolVersion: wire.ProtocolVersion, DescriptorHash: h.hash, BoundarySeq: b, AfterSeq: a, ThroughSeq: t,
		DigestAfter: r.Digest(a), DigestThrough: r.Digest(t), Events: out}, nil, nil
}

// replayTo returns a strict genesis replay through exactly b (FR-APR03).
//
// With the cache (default), the replay for the previous boundary is kept and
// advanced when B grows: the same strict reader continues from its file
// position, and it first proves the files it already read are unchanged
// (engine.ErrStale otherwise, and then a replay from genesis runs and refuses
// with the precise code). A cached replay beyond b (B went backwards, e.g. a
// replaced log) is discarded. Outputs are a pure function of the committed
// commands, so cached and fresh answers are byte-identical (tested).
// Caller holds h.mu.
func (h *Handler) replayTo(b int64) (*engine.Replayer, error) {
	if !h.opts.DisableCache && h.cached != nil && h.cached.Through() <= b {
		before := h.cached.CommandsApplied()
		err := h.cached.Advance(b)
		h.commands.Add(h.cached.CommandsApplied() - before)
		if err == nil {
			h.resumes.Add(1)
			return h.cached, nil
		}
		h.cached = nil
		if !errors.Is(err, engine.ErrStale) {
			return nil, err
		}
	}
	h.cached = nil
	r, err := engine.NewReplayer(h.log.Dir())
	if err != nil {
		return nil, err
	}
	h.genesisReplays.Add(1)
	err = r.Advance(b)
	h.commands.Add(r.CommandsApplied())
	if err != nil {
		return nil, err
	}
	if !h.opts.DisableCache {
		h.cached = r
	}
	return r, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"code":"INTERNAL","message":"encode response"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

func writeError(w http.ResponseWriter, status int, code, msg string, b int64) {
	writeJSON(w, status, source.RefusalBody{Code: code, Message: msg, BoundarySeq: b})
}
