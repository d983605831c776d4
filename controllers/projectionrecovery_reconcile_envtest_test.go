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
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/completeness"
)

// The tests below drive Reconcile directly (no manager watches their
// resources) against the real apiserver, a real member and PostgreSQL, to
// pin down the controller's rules: what one reconcile returns and writes.

const directShard = "direct" // no manager watches this shard

// directReconciler is a reconciler no manager runs, so no manager's shutdown
// closes its connections either: the test's cleanup releases its leases and
// closes the pools it opened (before the fixture's database is dropped, whose
// cleanup was registered first).
func directReconciler(t testing.TB, owner string) *ProjectionRecoveryReconciler {
	r := &ProjectionRecoveryReconciler{Client: scopeIndexedClient{k8sClient}, APIReader: k8sClient, AutoRecovery: true, Owner: owner,
		Clock: clock.RealClock{}, Connections: &Connections{}, Registry: completeness.NewRegistry(nil),
		Metrics: NewMetrics(prometheus.NewRegistry())}
	t.Cleanup(func() { releaseAll(t, r.Connections, owner) })
	return r
}

// releaseAll is the manager's shutdown step for connections a test drives
// without a manager.
func releaseAll(t testing.TB, c *Connections, owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.ReleaseAll(ctx, owner); err != nil {
		t.Errorf("releasing %s's leases: %v", owner, err)
	}
}

// scopeIndexedClient serves the manager cache's spec.scope field index
// (setupScopeClaim) on a direct API client, which has no such index: it lists
// without the field selector and filters. Everything else goes straight through.
type scopeIndexedClient struct{ client.Client }

func (c scopeIndexedClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	scope, indexed := "", false
	if lo.FieldSelector != nil {
		scope, indexed = lo.FieldSelector.RequiresExactMatch(scopeIndexField)
	}
	if ref, byRef := "", false; lo.FieldSelector != nil {
		if ref, byRef = lo.FieldSelector.RequiresExactMatch(recoveryRefIndexField); byRef {
			return c.listByRecoveryRef(ctx, list, lo, ref)
		}
	}
	prl, ok := list.(*recoveryv1.ProjectionRecoveryList)
	if !indexed || !ok {
		return c.Client.List(ctx, list, opts...)
	}
	lo.FieldSelector = nil
	if err := c.Client.List(ctx, prl, lo); err != nil {
		return err
	}
	kept := prl.Items[:0]
	for _, it := range prl.Items {
		if it.Spec.Scope == scope {
			kept = append(kept, it)
		}
	}
	prl.Items = kept
	return nil
}

// listByRecoveryRef serves setupRepairWatch's index the same way.
func (c scopeIndexedClient) listByRecoveryRef(ctx context.Context, list client.ObjectList, lo *client.ListOptions, ref string) error {
	prl, ok := list.(*recoveryv1.ProjectionReconciliationList)
	if !ok {
		return c.Client.List(ctx, list, lo)
	}
	lo.FieldSelector = nil
	if err := c.Client.List(ctx, prl, lo); err != nil {
		return err
	}
	kept := prl.Items[:0]
	for _, it := range prl.Items {
		if it.Spec.RecoveryRef.Name == ref {
			kept = append(kept, it)
		}
	}
	prl.Items = kept
	return nil
}

// logLines captures what Reconcile logs at the default level.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) ctx() context.Context {
	return logf.IntoContext(context.Background(), funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 0}))
}

func (l *logLines) matching(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range l.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

func reconcileUntil(t *testing.T, ctx context.Context, r *ProjectionRecoveryReconciler, obj *recoveryv1.ProjectionRecovery, state recoveryv1.RecoveryState) *recoveryv1.ProjectionRecovery {
	t.Helper()
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)}
	for i := 0; i < 50; i++ {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
		if got := getRecovery(t, obj.Namespace, obj.Name); got.Status.State == state {
			return got
		}
	}
	t.Fatalf("not %s after 50 reconciles: %+v", state, getRecovery(t, obj.Namespace, obj.Name).Status)
	return nil
}

// TestReconcile_CancelledCycleWritesNoStatus: a reconcile whose context is
// cancelled (manager shutdown) mid-cycle writes no status and returns no
// error, so a clean shutdown logs no "Reconciler error"; a state transition
// is logged once at the default level, an idle reconcile logs nothing.
func TestReconcile_CancelledCycleWritesNoStatus(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "cancelled", 40, 0.2)
	obj := f.recovery(ns, "cancelled", map[string]string{shardLabel: directShard}, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.PageSize = 10000
	})
	r := directReconciler(t, "cancelled")
	logs := &logLines{}
	ctx := logs.ctx()
	got := reconcileUntil(t, ctx, r, obj, recoveryv1.StateCurrent)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)}
	if _, err := r.Reconcile(ctx, req); err != nil { // idle: nothing to log
		t.Fatal(err)
	}

	writes := r.Metrics.StatusWrites()
	f.delay.Store(int64(time.Minute)) // the member hangs: the cycle blocks in its fetch
	defer f.delay.Store(0)
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		for f.inFlight.Load() == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	res, err := r.Reconcile(cctx, req)
	if err != nil || res != (ctrl.Result{}) {
		t.Fatalf("cancelled reconcile returned (%+v, %v), want no result and no error", res, err)
	}
	after := getRecovery(t, ns, obj.Name)
	if after.ResourceVersion != got.ResourceVersion || r.Metrics.StatusWrites() != writes {
		t.Fatalf("a cancelled cycle wrote status: %+v", after.Status)
	}

	// One info line for the transition to CURRENT, none for the idle or the
	// cancelled reconcile.
	if lines := logs.matching(`"scope"="cancelled"`, `"to"="CURRENT"`); len(lines) != 1 {
		t.Fatalf("want one info line for the transition to CURRENT, got %d: %q", len(lines), logs.matching(""))
	}
	if lines := logs.matching(`"to"=`); len(lines) != 1 {
		t.Fatalf("transitions logged: %q, want only the one to CURRENT", lines)
	}
}

// failingSecrets fails every Secret read with a transient API error.
type failingSecrets struct{ client.Reader }

func (failingSecrets) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return apierrors.NewServiceUnavailable("secrets are unavailable")
}

// TestReconcile_PhaseErrorKeepsStatusAndDoesNotRequeue: a phase error
// returns the error alone (never together with a RequeueAfter), keeps the
// previous conditions and does not claim the new generation was observed.
func TestReconcile_PhaseErrorKeepsStatusAndDoesNotRequeue(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "phaseerr", 30, 0.2)
	obj := f.recovery(ns, "phaseerr", map[string]string{shardLabel: directShard}, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.PageSize = 10000
	})
	r := directReconciler(t, "phaseerr")
	got := reconcileUntil(t, context.Background(), r, obj, recoveryv1.StateCurrent)

	orig := got.DeepCopy()
	got.Spec.Interval = &metav1.Duration{Duration: 3 * time.Second} // a new generation
	if err := k8sClient.Patch(context.Background(), got, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	r.APIReader = failingSecrets{}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
	if err == nil || res != (ctrl.Result{}) {
		t.Fatalf("reconcile = (%+v, %v), want the error alone", res, err)
	}
	after := getRecovery(t, ns, obj.Name)
	if after.Status.ObservedGeneration != orig.Status.ObservedGeneration || !equality.Semantic.DeepEqual(after.Status.Conditions, orig.Status.Conditions) {
		t.Fatalf("a failed phase changed status: observedGeneration %d → %d, conditions %+v → %+v",
			orig.Status.ObservedGeneration, after.Status.ObservedGeneration, orig.Status.Conditions, after.Status.Conditions)
	}
}

// staleReads serves one fixed, out-of-date copy of the resource: what a
// manager's cache holds when another manager wrote status since.
type staleReads struct {
	client.Client
	stale *recoveryv1.ProjectionRecovery
}

func (c staleReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if pr, ok := obj.(*recoveryv1.ProjectionRecovery); ok {
		c.stale.DeepCopyInto(pr)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestReconcile_StatusWriteIsOptimisticallyLocked: status computed from an
// out-of-date read never overwrites what another manager wrote since; the
// conflict requeues without an error.
func TestReconcile_StatusWriteIsOptimisticallyLocked(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "locked", 30, 0.2)
	obj := f.recovery(ns, "locked", map[string]string{shardLabel: directShard}, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.PageSize = 10000
	})
	r := directReconciler(t, "locked")
	got := reconcileUntil(t, context.Background(), r, obj, recoveryv1.StateCurrent)

	stale := got.DeepCopy()
	stale.Status.Message = "an older message" // this manager's view differs from what it computes
	other := got.DeepCopy()
	other.Status.Message = "written by another manager"
	if err := k8sClient.Status().Update(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	r.Client = staleReads{Client: scopeIndexedClient{k8sClient}, stale: stale}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
	if err != nil || res.RequeueAfter <= 0 {
		t.Fatalf("reconcile on a stale read = (%+v, %v), want a requeue without error", res, err)
	}
	if after := getRecovery(t, ns, obj.Name); after.Status.Message != other.Status.Message {
		t.Fatalf("the other manager's status was overwritten from a stale read: %q", after.Status.Message)
	}
}

// TestEnvtest_TwoManagersStatusDoesNotFlap: two managers on one scope. A
// watch sees the state only move forward (CATCHING_UP → CURRENT, never back,
// never RETRYING/LEASE_HELD), and once CURRENT no status write at all while
// both keep checking at every interval.
func TestEnvtest_TwoManagersStatusDoesNotFlap(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "noflap", 300, 0.3)
	lbl, sel := shard(t, "noflap")
	for _, owner := range []string{"noflap-a", "noflap-b"} {
		stop, _, err := startManager(owner, sel, true, "")
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
	}
	wc, err := client.NewWithWatch(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := wc.Watch(ctx, &recoveryv1.ProjectionRecoveryList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	obj := f.recovery(ns, "noflap", lbl, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.PageSize, s.PagesPerCycle = 32, 2
		s.Interval = &metav1.Duration{Duration: time.Second}
	})
	var states []recoveryv1.RecoveryState
	var writes, writesAfterCurrent int
	var prev *recoveryv1.ProjectionRecoveryStatus
	var currentAt time.Time
	deadline := time.After(120 * time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			o, isPR := ev.Object.(*recoveryv1.ProjectionRecovery)
			if !isPR || ev.Type != watch.Modified || o.Name != obj.Name {
				continue
			}
			if prev != nil && equality.Semantic.DeepEqual(*prev, o.Status) {
				continue // metadata only (finalizer)
			}
			st := o.Status
			prev = &st
			writes++
			if !currentAt.IsZero() && time.Since(currentAt) > time.Second {
				writesAfterCurrent++
				t.Errorf("status written after CURRENT settled: %s/%s %q", st.State, st.Reason, st.Message)
			}
			if n := len(states); st.State != "" && (n == 0 || states[n-1] != st.State) {
				states = append(states, st.State)
			}
			if currentAt.IsZero() && st.State == recoveryv1.StateCurrent && st.VerifiedThroughSeq == f.boundary() {
				currentAt = time.Now()
			}
		case <-time.After(200 * time.Millisecond):
			done = !currentAt.IsZero() && time.Since(currentAt) > 6*time.Second // six intervals on both managers
		case <-deadline:
			t.Fatalf("not CURRENT within the deadline; states %v", states)
		}
	}
	t.Logf("states %v, %d status writes, %d after CURRENT", states, writes, writesAfterCurrent)
	for i, s := range states {
		if s != recoveryv1.StateCatchingUp && s != recoveryv1.StateCurrent || (i > 0 && states[i-1] == recoveryv1.StateCurrent) {
			t.Fatalf("states flapped: %v", states)
		}
	}
}
