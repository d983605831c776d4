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

package reconstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/notify"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// DefaultRepairLease is the duration of the scope's lease a repair takes.
// It bounds one handler's transaction (the lease is renewed between actions
// once half of it has passed), and how long a crashed repair keeps the
// recovery worker out of the scope.
const DefaultRepairLease = 30 * time.Second

// Lease owner prefixes: a repair and a rehearsal are told apart from the
// recovery worker (its manager identity) in projection_catchup_lease.owner.
// recon's lease.fresh check knows them (a session's released lease is not
// a claim held past expiry).
const (
	RepairOwnerPrefix    = recon.RepairLeaseOwnerPrefix
	RehearsalOwnerPrefix = recon.RehearsalLeaseOwnerPrefix
)

// RunnerConfig wires one deployment of reconciliation on PostgreSQL.
type RunnerConfig struct {
	// Store connects as projection_reconciliation (docs/database-role.md):
	// the repair handlers, the scope's lease, and the run, journal and audit
	// records are written through it.
	Store *store.Store
	// ReadPool is detection's pool; SELECT suffices
	// (projection_recovery_readonly). nil: Store's pool.
	ReadPool *pgxpool.Pool
	// Source is the verifying client of the scope's member.
	Source Fetcher
	// PageEvents is the provider's page size (0: DefaultPageEvents).
	PageEvents int
	// MaxSnapshotRecords caps each side of a read (Provider.MaxRecords; 0:
	// DefaultMaxSnapshotRecords) and SnapshotDeadline bounds it
	// (Provider.Deadline; 0: DefaultSnapshotDeadline): past either, the run
	// is refused snapshot_too_large. MaxFindings caps the findings a report
	// lists (recon.Snapshot.MaxFindings; 0: recon.DefaultMaxFindings).
	MaxSnapshotRecords int64
	SnapshotDeadline   time.Duration
	MaxFindings        int
	// Permission decides who may approve (apply or roll back) a repair.
	Permission recon.Permission
	// Telemetry receives one record per run; nil: a log-only Telemetry on Log.
	Telemetry *Telemetry
	// Clock is the injected clock of every age check and plan expiry (nil:
	// time.Now). Pass the same one to dry runs and applies.
	Clock func() time.Time
	// StaleAfter is the staleness window of detection (required).
	StaleAfter time.Duration
	// LeaseDuration is the repair lease's duration (0: DefaultRepairLease).
	LeaseDuration time.Duration
	// TriggerCycle, Publish and Publisher are the controller's hooks
	// (trigger_cycle, republish, the outbox publisher's status); nil hooks
	// make their actions fail, never pretend.
	TriggerCycle func(ctx context.Context, scope string) error
	Publish      func(ctx context.Context, n notify.Notification) error
	Publisher    func() *recon.PublisherStatus
	Log          logr.Logger
}

// Runner runs reconciliation on PostgreSQL (dry runs, rehearsals, applies,
// rollbacks): recon.Workflow wired to the provider, the handlers, the
// durable runs, journal and audit trail, and a session that holds the
// scope's fenced lease around every repair.
type Runner struct {
	core    *recon.Workflow
	store   *store.Store
	read    *pgxpool.Pool // detection's
	dry     *Handlers     // the same handlers in DryRun mode (rehearsals)
	runs    *Runs
	journal *Journal
	audit   *Auditor
	tel     *Telemetry
	clock   func() time.Time
	leases  *leaseSession
	log     logr.Logger
	// withdrawn: per scope, the verified-through its reverts withdrew
	// (Handlers.Withdrawn) since the scope's last Rollback began.
	withdrawn withdrawals
}

// withdrawals records the certificates reverts withdrew, per scope.
type withdrawals struct {
	mu      sync.Mutex
	through map[string]int64
}

func (w *withdrawals) add(scope string, through int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.through == nil {
		w.through = map[string]int64{}
	}
	w.through[scope] = max(w.through[scope], through)
}

// take returns and forgets what was withdrawn of scope.
func (w *withdrawals) take(scope string) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.through[scope]
	delete(w.through, scope)
	return t
}

// NewRunner validates cfg and wires the runner.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("reconstore: workflow needs a store (projection_reconciliation)")
	case cfg.Source == nil:
		return nil, errors.New("reconstore: workflow needs a source client")
	case cfg.Permission == nil:
		return nil, errors.New("reconstore: workflow needs a permission checker")
	case cfg.StaleAfter <= 0:
		return nil, errors.New("reconstore: workflow needs a positive staleAfter")
	case cfg.LeaseDuration < 0:
		return nil, errors.New("reconstore: negative lease duration")
	case cfg.MaxSnapshotRecords < 0 || cfg.SnapshotDeadline < 0 || cfg.MaxFindings < 0:
		return nil, errors.New("reconstore: negative snapshot cap, snapshot deadline or finding cap")
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = DefaultRepairLease
	}
	read := cfg.ReadPool
	if read == nil {
		read = cfg.Store.Pool()
	}
	tel := cfg.Telemetry
	if tel == nil {
		tel = &Telemetry{log: cfg.Log}
	}
	pool := cfg.Store.Pool()
	leases := &leaseSession{st: cfg.Store, ttl: cfg.LeaseDuration, clock: time.Now, prefix: RepairOwnerPrefix, log: cfg.Log}
	journal, audit := &Journal{Pool: pool}, &Auditor{Pool: pool}
	h := &Handlers{Store: cfg.Store, Lease: sessionLease, TriggerCycle: cfg.TriggerCycle, Publish: cfg.Publish, Journal: journal, Audit: audit}
	dry := *h
	dry.DryRun = true
	w := &Runner{store: cfg.Store, read: read, dry: &dry, runs: &Runs{Pool: pool}, journal: journal, audit: audit,
		tel: tel, clock: cfg.Clock, leases: leases, log: cfg.Log}
	h.Withdrawn = func(scope string, through int64) {
		w.withdrawn.add(scope, through)
		w.log.Info("a revert withdrew the scope's completeness certificate: the recovery re-verifies from genesis",
			"scope", scope, "verifiedThrough", through)
	}
	w.core = &recon.Workflow{
		Provider: &Provider{Pool: read, Source: cfg.Source, PageEvents: cfg.PageEvents, Clock: cfg.Clock,
			StaleAfter: cfg.StaleAfter, Publisher: cfg.Publisher, MaxRecords: cfg.MaxSnapshotRecords, Deadline: cfg.SnapshotDeadline},
		MaxFindings: cfg.MaxFindings,
		Handlers:    h.Registry(),
		Permission:  cfg.Permission,
		Journal:     w.journal,
		Auditor:     w.audit,
		Runs:        w.runs,
		Session:     leases,
		Clock:       cfg.Clock,
		StaleAfter:  cfg.StaleAfter,
		Log:         cfg.Log,
	}
	return w, nil
}

// CatchUpUnderWay names a scope of this database whose catch-up is under
// way (moved within recon.CatchUpActiveWithin), "" when none: what a
// scheduled dry run waits for (recon.ScheduledWait). Read as detection.
func (w *Runner) CatchUpUnderWay(ctx context.Context) (string, error) {
	scope, err := store.CursorCatchingUp(ctx, w.read, recon.CatchUpActiveWithin)
	if err != nil {
		return "", fmt.Errorf("reconstore: reading which scopes are catching up: %w", err)
	}
	return scope, nil
}

// Journal, Audit and Runs are the workflow's durable records.
func (w *Runner) Journal() *Journal { return w.journal }
func (w *Runner) Audit() *Auditor   { return w.audit }
func (w *Runner) Runs() *Runs       { return w.runs }

// DryRun is one dry run: its run record, report and plan.
type DryRun struct {
	*recon.DryRunResult
}

// Rehearsal is the plan's handlers executed in transactions that are
// rolled back.
type Rehearsal struct {
	// Ran is false when the rehearsal could not run at all (Reason says why,
	// e.g. the recovery worker holds the scope's lease: transient).
	Ran     bool
	Reason  string
	Actions []ActionRehearsal
}

// ActionRehearsal is one action's rehearsal: Error is "" when its handler
// ran every statement under the write lock and the fence without error.
type ActionRehearsal struct {
	ActionID string
	Kind     recon.ActionKind
	Error    string
}

// WouldSucceed reports whether the rehearsal ran and every action passed.
func (r Rehearsal) WouldSucceed() bool {
	if !r.Ran {
		return false
	}
	for _, a := range r.Actions {
		if a.Error != "" {
			return false
		}
	}
	return true
}

// DryRun reads the scope once, detects, explains and plans (recon), and
// stores the run's report and plan so the plan an approver echoes can be
// read back as it was shown. Its only writes are its own run record: it
// takes no lease, moves no fence and takes no projection write lock (the
// read is one read-only REPEATABLE READ transaction), so a scheduled dry
// run never stalls a page or a live write. It does not rehearse: Rehearse
// takes the lease and the write lock and runs only when asked.
func (w *Runner) DryRun(ctx context.Context, scope string) (*DryRun, error) {
	return w.DryRunWith(ctx, scope, recon.DryRunOptions{})
}

// DryRunWith is DryRun with options: opt.Pace paces its detection (a
// scheduled dry run; recon.Pace).
func (w *Runner) DryRunWith(ctx context.Context, scope string, opt recon.DryRunOptions) (*DryRun, error) {
	start := time.Now()
	res, err := w.core.DryRunWith(ctx, scope, opt)
	out := &DryRun{DryRunResult: res}
	if err == nil {
		if serr := w.runs.SaveResult(ctx, res); serr != nil {
			// The run is reported; only its stored copy of the plan is missing.
			w.log.Error(serr, "store the dry run's report and plan", "scope", scope, "run", res.Run.ID)
		}
	}
	w.tel.DryRun(scope, out, err, time.Since(start))
	return out, err
}

// Rehearse executes every action of plan through its handler in DryRun mode
// (the apply's write lock, fence and statements, then ROLLBACK) under the
// scope's lease taken as RehearsalOwnerPrefix+id; when the lease cannot be
// taken nothing is rehearsed. A plan that releases the lease is rehearsed
// without taking it, since taking it is the unapproved release itself
// (docs/design/repairs.md, "Rehearsing a plan").
func (w *Runner) Rehearse(ctx context.Context, plan *recon.Plan, id string) Rehearsal {
	if plan == nil || len(plan.Actions) == 0 {
		return Rehearsal{Ran: true}
	}
	hctx, without := ctx, ""
	for _, a := range plan.Actions {
		if a.Kind == recon.ActionReleaseLease {
			without = "not rehearsed: the scope's lease is held past expiry and taking it for a rehearsal would release it (irreversible): "
		}
	}
	if without == "" {
		s := *w.leases
		s.prefix = RehearsalOwnerPrefix
		c, end, err := s.Begin(ctx, plan.Scope, id)
		if err != nil {
			return Rehearsal{Reason: err.Error()}
		}
		defer end()
		hctx = c
	}
	reg := w.dry.Registry()
	r := Rehearsal{Ran: true}
	for _, a := range plan.Actions {
		ar := ActionRehearsal{ActionID: a.ID, Kind: a.Kind}
		if h := reg[a.Kind]; h == nil {
			ar.Error = "no handler for " + string(a.Kind)
		} else if err := h.Apply(hctx, a); err != nil {
			ar.Error = err.Error()
			if a.Kind != recon.ActionReleaseLease {
				ar.Error = without + ar.Error
			}
		}
		r.Actions = append(r.Actions, ar)
	}
	return r
}

// Apply executes an approved plan (recon.Workflow.Apply: every guard, then
// the handlers under the scope's lease, taken as RepairOwnerPrefix+the
// correlation id). When the recovery worker holds the lease it refuses with
// lease_unavailable (transient) and writes nothing.
func (w *Runner) Apply(ctx context.Context, plan *recon.Plan, opt recon.ApplyOptions) (*recon.Outcome, error) {
	out, err := w.core.Apply(ctx, plan, opt)
	w.tel.Apply(out, err)
	return out, err
}

// Rollback reverts a successful apply from its outcome (recon), under the
// scope's lease.
//
// A revert that puts a record back into the scope's verified window
// withdraws its certificate (store.WithdrawTx, in the revert's
// transaction); the outcome's WithdrawnThrough says which.
func (w *Runner) Rollback(ctx context.Context, o *recon.Outcome, principal string) (*recon.RollbackOutcome, error) {
	start := time.Now()
	scope := ""
	if o != nil {
		scope = o.Scope
	}
	w.withdrawn.take(scope)
	ro, err := w.core.Rollback(ctx, o, principal)
	if ro != nil {
		ro.WithdrawnThrough = w.withdrawn.take(scope)
	}
	w.tel.Rollback(scope, ro, err, time.Since(start))
	return ro, err
}

// leaseSession is recon.Session on the scope's fenced lease (FR-APR08): a
// repair writes under the lease exactly like a page, so the recovery
// worker's page and a repair never interleave, and a repair whose lease was
// taken over can never commit (store.WithScopeWrite checks owner and fence
// under the row lock).
type leaseSession struct {
	st     *store.Store
	ttl    time.Duration
	clock  func() time.Time // local monotonic clock: when to renew
	prefix string
	log    logr.Logger
}

var _ recon.Session = (*leaseSession)(nil)

type leaseKey struct{}

// heldLease is the lease of one run, shared by its handler calls.
type heldLease struct {
	s     *leaseSession
	lease store.Lease
	at    time.Time // when the statement that set lease's expiry was sent
}

// sessionOwner is the lease owner of one session: prefix, the run's
// correlation id (what an operator reading projection_catchup_lease needs),
// and a nonce of this session. AcquireLease lets the same owner re-take an
// unexpired lease without a new fence (a manager re-acquiring its own
// lease), so an owner must never be shared by two sessions: without the
// nonce, two rollbacks of one run (two managers executing one
// spec.rollback; a rollback's correlation id is its apply's) both held the
// lease at once, reverted concurrently and recorded every revert twice.
func sessionOwner(prefix, correlationID string) (string, error) {
	var nonce [6]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", fmt.Errorf("reconstore: a lease owner nonce: %w", err)
	}
	return prefix + correlationID + "#" + hex.EncodeToString(nonce[:]), nil
}

// Begin takes the scope's lease as sessionOwner. Another owner's
// unexpired lease (the recovery worker mid-cycle) refuses with LEASE_HELD:
// nothing is written and the apply answers lease_unavailable. The end
// function releases it (expires it now; the row and its fence stay, so the
// worker's next AcquireLease increments the fence).
func (s *leaseSession) Begin(ctx context.Context, scope, correlationID string) (context.Context, func(), error) {
	owner, err := sessionOwner(s.prefix, correlationID)
	if err != nil {
		return nil, nil, err
	}
	sent := s.clock()
	l, err := s.st.AcquireLease(ctx, scope, owner, s.ttl)
	if err != nil {
		return nil, nil, fmt.Errorf("reconstore: take the lease of %q as %q: %w", scope, owner, err)
	}
	h := &heldLease{s: s, lease: l, at: sent}
	end := func() {
		if err := s.st.ReleaseLease(context.WithoutCancel(ctx), h.lease); err != nil {
			// It expires on its own after ttl.
			s.log.Info("could not release the repair lease", "scope", scope, "owner", owner, "err", err.Error())
		}
	}
	return withRun(context.WithValue(ctx, leaseKey{}, h), correlationID), end, nil
}

// sessionLease is Handlers.Lease of a workflow: the run's lease, renewed
// first when half its duration has passed since the statement that set its
// expiry (measured on the local monotonic clock from before that statement,
// so clock skew with the database cannot overstate what is left). A handler
// outside a session has no lease and writes nothing.
func sessionLease(ctx context.Context, scope string) (store.Lease, error) {
	h, _ := ctx.Value(leaseKey{}).(*heldLease)
	switch {
	case h == nil:
		return store.Lease{}, errors.New("reconstore: no repair session: handlers write only inside an apply, rollback or rehearsal")
	case h.lease.Scope != scope:
		return store.Lease{}, fmt.Errorf("reconstore: the session holds the lease of %q, not %q", h.lease.Scope, scope)
	}
	// The handlers of one run are called one after the other: no lock.
	if h.s.clock().Sub(h.at) < h.s.ttl/2 {
		return h.lease, nil
	}
	sent := h.s.clock()
	l, err := h.s.st.RenewLease(ctx, h.lease, h.s.ttl)
	if err != nil {
		// Expired or taken over between two actions: the run fails here
		// (and its reverts with it), never writes under a lease it lost.
		return store.Lease{}, fmt.Errorf("reconstore: renew the repair lease of %q: %w", scope, err)
	}
	h.lease, h.at = l, sent
	return l, nil
}
