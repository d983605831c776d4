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
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// DefaultMaxActions is the blast radius: more selected actions than this is
// an incident, not a routine repair (raise ApplyOptions.MaxActions
// deliberately, or apply in batches with Only).
const DefaultMaxActions = 50

// Workflow runs dry runs, applies and rollbacks for one deployment. It owns
// no storage: everything it reads or writes goes through its interfaces.
// Dry runs (DryRun) never call a Handler, the Journal or the Auditor; there
// is no call that plans and applies.
type Workflow struct {
	Provider   SnapshotProvider
	Handlers   Handlers
	Permission Permission
	Journal    Journal
	Auditor    Auditor
	// Session brackets the handler calls of each apply and rollback
	// (optional; see Session).
	Session Session
	Runs    RunStore // optional: dry-run lifecycle persistence
	// Clock is injected: every age check (staleness, plan expiry) uses it.
	// Pass the same clock to dry runs and applies.
	Clock      func() time.Time
	StaleAfter time.Duration
	// MaxFindings is stamped on every snapshot (Snapshot.MaxFindings; 0:
	// DefaultMaxFindings).
	MaxFindings int
	Log         logr.Logger
}

// validate checks the configuration a write path needs.
func (w *Workflow) validate(write bool) error {
	switch {
	case w.Provider == nil:
		return errors.New("no snapshot provider")
	case w.Clock == nil:
		return errors.New("no clock")
	case w.StaleAfter <= 0:
		return errors.New("staleAfter must be positive")
	case write && w.Permission == nil:
		return errors.New("no permission checker")
	case write && w.Journal == nil:
		return errors.New("no journal")
	case write && w.Auditor == nil:
		return errors.New("no auditor")
	}
	return nil
}

// read reads the scope and stamps the injected clock on a shallow copy (the
// provider's value is left as it returned it). A nil snapshot or one of
// another scope is unavailable, never half-used.
func (w *Workflow) read(ctx context.Context, scope string) (*Snapshot, error) {
	s, err := w.Provider.Read(ctx, scope)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errors.New("provider returned no snapshot")
	}
	if s.Scope != scope {
		return nil, fmt.Errorf("provider returned scope %q for %q", s.Scope, scope)
	}
	cp := *s
	cp.Now, cp.StaleAfter, cp.MaxFindings = w.Clock(), w.StaleAfter, w.MaxFindings
	return &cp, nil
}

// readCode is the result code of a failed read: snapshot_too_large when the
// provider refused the scope's size or deadline, else unavailable (the
// read's own code, snapshot_unavailable).
func readCode(unavailable ResultCode, err error) ResultCode {
	if errors.Is(err, ErrSnapshotTooLarge) {
		return ResultSnapshotTooLarge
	}
	return unavailable
}

// HistoryProvider is a SnapshotProvider that streams: Open returns the
// scope's small tables and its history, which the workflow detects over
// once (DetectHistory) before it calls release. Detection then holds state
// per key, never the history, whatever the scope's age.
type HistoryProvider interface {
	SnapshotProvider
	Open(ctx context.Context, scope string) (s *Snapshot, h History, release func(), err error)
}

// scopeRead is one read of a scope, ready to detect: streamed (history set,
// release ends the provider's read; calling it again is a no-op) or
// materialised.
type scopeRead struct {
	snap    *Snapshot
	history History
	release func()
}

// open reads the scope (a HistoryProvider's small tables, or a whole
// snapshot) and stamps the injected clock and caps on a copy.
func (w *Workflow) open(ctx context.Context, scope string) (*scopeRead, error) {
	hp, ok := w.Provider.(HistoryProvider)
	if !ok {
		s, err := w.read(ctx, scope)
		if err != nil {
			return nil, err
		}
		return &scopeRead{snap: s, release: func() {}}, nil
	}
	s, h, release, err := hp.Open(ctx, scope)
	if err != nil {
		return nil, err
	}
	release = sync.OnceFunc(release)
	if s == nil || h == nil || s.Scope != scope {
		if release != nil {
			release()
		}
		return nil, fmt.Errorf("provider opened no history for scope %q", scope)
	}
	cp := *s
	cp.Now, cp.StaleAfter, cp.MaxFindings = w.Clock(), w.StaleAfter, w.MaxFindings
	return &scopeRead{snap: &cp, history: h, release: release}, nil
}

// detect detects over the read once, unpaced. A failure of the history is
// a read failure (detectCode), not a detection bug.
func (r *scopeRead) detect(ctx context.Context) (*Report, error) {
	rep, _, err := r.detectPaced(ctx, Pace{})
	return rep, err
}

// detectPaced is detect at pace (a materialised read is never paced: it
// was read whole already).
func (r *scopeRead) detectPaced(ctx context.Context, pace Pace) (*Report, PaceStats, error) {
	if r.history == nil {
		rep, err := Detect(r.snap)
		return rep, PaceStats{}, err
	}
	return DetectHistoryPaced(ctx, r.snap, r.history, pace)
}

// detectCode is the result code of a failed detection: the history's read
// failing is snapshot_unavailable (snapshot_too_large past its cap or
// deadline), anything else is a detection bug.
func detectCode(err error) ResultCode {
	switch {
	case errors.Is(err, ErrSnapshotTooLarge):
		return ResultSnapshotTooLarge
	case errors.Is(err, ErrHistory):
		return ResultSnapshotUnavailable
	}
	return ResultInternal
}

// DryRunResult is one dry run: its run record, report and plan.
type DryRunResult struct {
	Run    Run
	Report *Report
	Plan   *Plan
	// Pacing is what DryRunOptions.Pace did (zero: unpaced).
	Pacing PaceStats
}

// DryRunOptions are one dry run's options.
type DryRunOptions struct {
	// Pace paces its detection (Pace; the zero value is unpaced): a
	// scheduled dry run yields the CPU to the live path.
	Pace Pace
}

// DryRun reads the scope once, detects, explains and plans, unpaced
// (DryRunWith).
func (w *Workflow) DryRun(ctx context.Context, scope string) (*DryRunResult, error) {
	return w.DryRunWith(ctx, scope, DryRunOptions{})
}

// DryRunWith reads the scope once, detects, explains and plans. It writes
// nothing but its own run record (RunStore). A provider error fails the run
// with snapshot_unavailable and yields NO report: never act on a partial one.
// A paced detection whose estimate runs past ctx's deadline fails
// snapshot_too_large (ErrPacedPastDeadline) with the estimate.
func (w *Workflow) DryRunWith(ctx context.Context, scope string, opt DryRunOptions) (*DryRunResult, error) {
	if err := w.validate(false); err != nil {
		return nil, fail(ResultInternal, err, "workflow")
	}
	now := w.Clock()
	run := Run{ID: "recon-" + scope + "-" + strconv.FormatInt(now.UnixNano(), 36), Scope: scope, Phase: RunPending, StartedAt: now, UpdatedAt: now}
	log := w.Log.WithValues("scope", scope, "run", run.ID)
	step := func(to RunPhase) error {
		if err := run.Transition(to, w.Clock()); err != nil {
			return fail(ResultInternal, err, "run lifecycle")
		}
		if w.Runs != nil {
			if err := w.Runs.Save(ctx, run); err != nil {
				return fail(ResultInternal, err, "save run %s in phase %s", run.ID, to)
			}
		}
		return nil
	}
	end := func(code ResultCode, err error, detail string) (*DryRunResult, error) {
		to := RunFailed
		if ctx.Err() != nil {
			code, to = ResultCancelled, RunCancelled
		}
		run.Code, run.Detail = code, detail
		if run.Phase.CanTransition(to) {
			_ = run.Transition(to, w.Clock())
			if w.Runs != nil {
				// The run record is best effort here: the run already failed.
				if serr := w.Runs.Save(context.WithoutCancel(ctx), run); serr != nil {
					log.Error(serr, "save failed run")
				}
			}
		}
		log.Info("reconciliation dry run failed", "code", code, "detail", detail)
		return &DryRunResult{Run: run}, fail(code, err, "%s", detail)
	}
	if w.Runs != nil {
		if err := w.Runs.Save(ctx, run); err != nil {
			return nil, fail(ResultInternal, err, "save run %s", run.ID)
		}
	}
	if err := step(RunCollecting); err != nil {
		return end(ResultInternal, err, "collecting")
	}
	rd, err := w.open(ctx, scope)
	if err != nil {
		return end(readCode(ResultSnapshotUnavailable, err), err, "read snapshot")
	}
	defer rd.release()
	snap := rd.snap
	if err := step(RunAnalyzing); err != nil {
		return end(ResultInternal, err, "analyzing")
	}
	report, paced, err := rd.detectPaced(ctx, opt.Pace)
	rd.release() // the read's transaction is not held while the run is recorded
	if err != nil {
		res, ferr := end(detectCode(err), err, "detect")
		res.Pacing = paced
		return res, ferr
	}
	plan, err := PlanRepairs(report, snap)
	if err != nil {
		return end(ResultInternal, err, "plan")
	}
	run.Findings, run.Clean, run.PlanID = len(report.Findings), report.Clean, plan.PlanID
	if err := step(RunReported); err != nil {
		return end(ResultInternal, err, "reported")
	}
	log.V(1).Info("reconciliation dry run", "findings", len(report.Findings), "clean", report.Clean,
		"actions", len(plan.Actions), "manual", len(plan.Manual), "plan", plan.PlanID,
		"paceShare", paced.Share, "busy", paced.Busy.String(), "slept", paced.Slept.String())
	return &DryRunResult{Run: run, Report: report, Plan: plan, Pacing: paced}, nil
}
