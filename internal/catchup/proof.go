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

package catchup

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// The idle proof (docs/source-contract.md, "What the operator checks on
// every page"). An idle answer (afterSeq == boundary, FR-APR04) carries no
// digest: it says the member committed as many commands as were verified,
// not the same ones. A member that lost its log and traded another history
// back to exactly the verified sequence answers idle too, and a CURRENT
// certificate over it cannot be taken back, while a refusal can. So an idle
// answer certifies the cursor only when this manager knows the member's
// chain through it is the verified one (proofDue); otherwise the cycle asks
// for that chain first (source.Client.ChainThrough, FR-APR03) and refuses
// HISTORY_REWRITTEN when it differs.

// DefaultProofPeriod bounds how long an idle scope is certified on one proof:
// a member that loses its log and trades back to exactly the verified
// sequence between two idle probes, unseen, is caught within it.
const DefaultProofPeriod = 10 * time.Minute

// ProofLedger is what one manager knows of each scope's member chain: where
// (sequence, digest, client) and when the member last proved it, and whether
// this manager saw something since that voids it (the member's boundary
// behind the cursor, a member that did not answer). Keys are resources
// (Cycle.Resource). It is memory only: the durable record of such an event is
// the cursor's state (a non-CURRENT cursor always owes a proof), so a manager
// that restarts, or another manager, starts from the cursor and an empty
// ledger, which owes a proof too. A nil *ProofLedger knows nothing.
type ProofLedger struct {
	mu      sync.Mutex
	entries map[string]proofEntry
}

type proofEntry struct {
	client *source.Client
	seq    int64
	digest string
	at     time.Time
	// owed, when set, is what this manager saw that voids the proof.
	owed string
}

// NewProofLedger returns an empty ledger.
func NewProofLedger() *ProofLedger { return &ProofLedger{entries: map[string]proofEntry{}} }

func (l *ProofLedger) get(key string) (proofEntry, bool) {
	if l == nil {
		return proofEntry{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[key]
	return e, ok
}

// proven records that the member of cl proved the chain through seq to be
// digest at now (a proof page, or a committed page ending there).
func (l *ProofLedger) proven(key string, cl *source.Client, seq int64, digest string, now time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries[key] = proofEntry{client: cl, seq: seq, digest: digest, at: now}
}

// owe voids key's proof: why is what was seen.
func (l *ProofLedger) owe(key, why string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entries[key]
	if e.owed == "" {
		e.owed = why
	}
	l.entries[key] = e
}

// Forget drops key (its resource is gone).
func (l *ProofLedger) Forget(key string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.entries, key)
}

// proofDue says why an idle page at the cursor cur cannot certify it without
// the member proving its chain through cur first, "" when it can: the chain
// through 0 is genesis by definition; otherwise the cursor must be CURRENT
// (a cursor any manager left RETRYING, BLOCKED or CATCHING_UP may have seen
// the member fail or fall behind) and this manager must have seen this
// member (cl) prove this very cursor less than period ago, with nothing
// seen since that voids it. Pure: the ledger entry is read by the caller.
func proofDue(cur store.Cursor, e proofEntry, known bool, cl *source.Client, now time.Time, period time.Duration) string {
	switch {
	case cur.VerifiedThroughSeq == 0:
		return ""
	case cur.State != store.StateCurrent:
		state := cur.State
		if cur.BlockedReason != "" {
			state += " " + cur.BlockedReason
		}
		return fmt.Sprintf("the cursor records %s, not CURRENT", state)
	case e.owed != "":
		return e.owed
	case !known || e.client != cl:
		return "this manager has not seen this member prove it yet"
	case e.seq != cur.VerifiedThroughSeq || e.digest != cur.ChainDigest:
		return fmt.Sprintf("this manager last saw the member prove sequence %d, not %d", e.seq, cur.VerifiedThroughSeq)
	case now.Sub(e.at) >= period:
		return fmt.Sprintf("its last proof is older than %s", period)
	}
	return ""
}

// proveIdle makes the idle page of the cycle c certify the cursor cur only
// when the member's chain through it is the verified one (see proofDue).
// Its error carries the code of the outcome: HISTORY_REWRITTEN (BLOCKED)
// when the chains differ, the source client's when the proof page fails
// (a member that is down or behind again: RETRYING).
func (e *Engine) proveIdle(ctx context.Context, log logr.Logger, c *Cycle, cl *source.Client, cur store.Cursor) error {
	entry, known := e.Proofs.get(c.Resource)
	now := e.Clock.Now()
	why := proofDue(cur, entry, known, cl, now, e.proofPeriod())
	if why == "" {
		return nil
	}
	v := cur.VerifiedThroughSeq
	log.V(1).Info("proving the member's chain before an idle answer certifies it", "verified", v, "why", why)
	proof, err := cl.ChainThrough(ctx, v, cur.DescriptorHash, c.Limits.PageSize)
	if err != nil {
		e.Proofs.owe(c.Resource, why)
		return fmt.Errorf("the member answered idle at the verified sequence %d, but %s: its chain through %d must be proven before the scope is CURRENT again, and the page ending there failed: %w", v, why, v, err)
	}
	if proof.Digest != cur.ChainDigest {
		e.Proofs.owe(c.Resource, fmt.Sprintf("its chain through %d was %s, not the verified %s", v, proof.Digest, cur.ChainDigest))
		return codes.Newf(codes.HistoryRewritten, "the member answered idle at the verified sequence %d (%s), but its chain through %d is %s, not the verified %s: it serves another history than the one verified (a log lost and traded again, or another member); nothing is certified", v, why, v, proof.Digest, cur.ChainDigest)
	}
	e.Proofs.proven(c.Resource, cl, v, cur.ChainDigest, now)
	return nil
}

func (e *Engine) proofPeriod() time.Duration {
	if e.ProofPeriod > 0 {
		return e.ProofPeriod
	}
	return DefaultProofPeriod
}

// probeFailed reports a cycle that failed before it could write a page (the
// probe from the cursor, or the idle proof): the member did not answer, was
// behind the cursor, or serves another history. Each of these voids the idle
// proof, so it is remembered here and, with auto-recovery on, recorded on the
// SQL cursor when the cursor says otherwise: a non-CURRENT cursor owes a
// proof to every manager, including one that restarts (proofDue). The lease
// is taken only for that write and released after it.
func (e *Engine) probeFailed(ctx context.Context, log logr.Logger, st *store.Store, c *Cycle, res Result, err error) Result {
	cur := res.Cursor
	var re *source.RefusalError
	behind := errors.As(err, &re) && re.Code == source.CodeAfterSeqBeyondBoundary
	res = failed(log, res, err, c.Redact)
	if res.State != StateRetrying && res.State != StateBlocked {
		return res
	}
	switch {
	case behind:
		e.Proofs.owe(c.Resource, fmt.Sprintf("its boundary %d was seen behind the verified cursor %d since its last proof", re.BoundarySeq, cur.VerifiedThroughSeq))
	case codes.Of(err) != codes.HistoryRewritten:
		e.Proofs.owe(c.Resource, fmt.Sprintf("it failed to answer (%s) since its last proof", res.Reason))
	}
	switch codes.Code(res.Reason) {
	case codes.LeaseLost, codes.LeaseHeld, codes.DatabaseUnavailable, codes.SchemaMissing:
		return res
	}
	if !e.AutoRecovery || !cur.Exists || (cur.State == string(res.State) && cur.BlockedReason == res.Reason) {
		return res
	}
	lease, lerr := st.AcquireLease(ctx, c.Scope, c.LeaseOwner, c.Limits.LeaseDuration)
	if lerr == nil {
		lerr = st.RecordOutcome(ctx, lease, c.Scope, string(res.State), codes.Code(res.Reason), res.Boundary)
		if rerr := st.ReleaseLease(ctx, lease); rerr != nil {
			log.V(1).Info("could not release the lease after recording the outcome; it expires on its own", "err", rerr.Error())
		}
	}
	if lerr != nil {
		log.V(1).Info("could not record the outcome on the cursor", "state", res.State, "code", res.Reason, "err", lerr.Error())
		return res
	}
	res.Cursor.State, res.Cursor.BlockedReason = string(res.State), res.Reason
	return res
}

// behindCursor says what a probe refused AFTER_SEQ_BEYOND_BOUNDARY means
// for the scope (the status message while the proof is pending); any other
// error is returned as is.
func behindCursor(err error, cur store.Cursor) error {
	var re *source.RefusalError
	if !errors.As(err, &re) || re.Code != source.CodeAfterSeqBeyondBoundary || cur.VerifiedThroughSeq == 0 {
		return err
	}
	return fmt.Errorf("the member's boundary %d is behind the verified cursor %d (a lagging replica, or a member that restarted with a shorter log): nothing is written, and once it is back its chain through %d is proven before the scope is CURRENT again: %w",
		re.BoundarySeq, cur.VerifiedThroughSeq, cur.VerifiedThroughSeq, err)
}
