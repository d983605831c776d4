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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// The envtest tier: a real kube-apiserver + etcd with the generated CRDs,
// started once and only by the tests that need it (the pure tests of this
// package run without a control plane). No controller runs: the tests write
// the status themselves through the status subresource, as the controller
// would, and run the plugin in-process against a kubeconfig file.
var (
	envOnce  sync.Once
	envErr   error
	testEnv  *envtest.Environment
	restCfg  *rest.Config
	adminCli client.Client
)

func TestMain(m *testing.M) {
	code := m.Run()
	if testEnv != nil {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}
	os.Exit(code)
}

func startEnv(t *testing.T) {
	t.Helper()
	envOnce.Do(func() {
		testEnv, restCfg, envErr = testenv.Start()
		if envErr != nil {
			return
		}
		adminCli, envErr = client.New(restCfg, client.Options{Scheme: scheme})
	})
	if envErr != nil {
		t.Fatalf("envtest: %v", envErr)
	}
}

// kubeconfigFor provisions a user the API server authenticates by a client
// certificate and writes its kubeconfig; the plugin reads it like any
// user's ~/.kube/config.
func kubeconfigFor(t *testing.T, name string, groups ...string) string {
	t.Helper()
	u, err := testEnv.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		t.Fatalf("adding user %s: %v", name, err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		t.Fatalf("kubeconfig of %s: %v", name, err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

type result struct {
	code        int
	out, errOut string
}

// plugin runs `kubectl projection ARGS` in-process with stdin in.
func plugin(t *testing.T, kubeconfig, ns string, in io.Reader, args ...string) result {
	t.Helper()
	if in == nil {
		in = strings.NewReader("")
	}
	var out, errOut bytes.Buffer
	all := append([]string{"--kubeconfig", kubeconfig, "--namespace", ns}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := run(ctx, all, genericiooptions.IOStreams{In: in, Out: &out, ErrOut: &errOut})
	r := result{code, out.String(), errOut.String()}
	t.Logf("kubectl projection %s -> exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, r.out, r.errOut)
	return r
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, got)
		}
	}
}

// grantReadOnly lets user get and list resource (our API group) in ns, and
// nothing else: a user the API server refuses any write.
func grantReadOnly(t *testing.T, ctx context.Context, ns, user, resource string) {
	t.Helper()
	name := user + "-reads-" + resource
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{recoveryv1.GroupVersion.Group},
			Resources: []string{resource}, Verbs: []string{"get", "list"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := adminCli.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

func newNamespace(t *testing.T, ctx context.Context) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "plugin-"}}
	if err := adminCli.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func createRecovery(t *testing.T, ctx context.Context, ns, name string, st recoveryv1.ProjectionRecoveryStatus) {
	t.Helper()
	r := &recoveryv1.ProjectionRecovery{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: recoveryv1.ProjectionRecoverySpec{
			Scope:    name,
			Source:   recoveryv1.SourceSpec{URL: "http://member-0.trading.svc:8090"},
			Database: recoveryv1.DatabaseSpec{DSNSecretRef: recoveryv1.SecretKeySelector{Name: "db", Key: "dsn"}},
		},
	}
	if err := adminCli.Create(ctx, r); err != nil {
		t.Fatalf("creating ProjectionRecovery %s: %v", name, err)
	}
	r.Status = st
	if err := adminCli.Status().Update(ctx, r); err != nil {
		t.Fatalf("writing the status of ProjectionRecovery %s: %v", name, err)
	}
}

func createReconciliation(t *testing.T, ctx context.Context, ns, name string, st recoveryv1.ProjectionReconciliationStatus) {
	t.Helper()
	r := &recoveryv1.ProjectionReconciliation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       recoveryv1.ProjectionReconciliationSpec{RecoveryRef: recoveryv1.RecoveryReference{Name: "venue-a"}},
	}
	if err := adminCli.Create(ctx, r); err != nil {
		t.Fatalf("creating ProjectionReconciliation %s: %v", name, err)
	}
	r.Status = st
	if err := adminCli.Status().Update(ctx, r); err != nil {
		t.Fatalf("writing the status of ProjectionReconciliation %s: %v", name, err)
	}
}

func getRecon(t *testing.T, ctx context.Context, ns, name string) *recoveryv1.ProjectionReconciliation {
	t.Helper()
	var r recoveryv1.ProjectionReconciliation
	if err := adminCli.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// driftStatus is what the controller writes after a dry run that found drift
// and an apply that succeeded: a report that is not clean, a live plan, an
// outcome with its correlation id.
func driftStatus(expires time.Time) recoveryv1.ProjectionReconciliationStatus {
	last := metav1.Now()
	exp := metav1.NewTime(expires)
	return recoveryv1.ProjectionReconciliationStatus{
		RunState:  recoveryv1.RunReported,
		LastRunAt: &last,
		Report: &recoveryv1.ReportSummary{
			Clean: false, Findings: 2,
			ByKind: []recoveryv1.CountByName{{Name: "missing", Count: 1}, {Name: "inconsistent", Count: 1}},
			Top: []recoveryv1.FindingSummary{
				{ID: "trade_exists@venue-a/t-17", Invariant: "trade_exists", Kind: "missing", Cause: "live_feed_gap confidence=high: event 17 never reached the projector"},
				{ID: "position_matches@acct-9", Invariant: "position_matches", Kind: "inconsistent", Cause: "derived_from_missing_trade confidence=high: acct-9 misses t-17"},
			},
		},
		Plan: &recoveryv1.PlanSummary{
			PlanID: "plan-7f3a", Fingerprint: "sha256:ab12", Expires: &exp, Actions: 2,
			Items: []recoveryv1.PlannedAction{testItem("insert-trade:t-17"), testItem("rederive-position:acct-9")}, Manual: 0, WouldSucceed: true,
			Binding: "sha256:0b1d",
		},
		Outcome: &recoveryv1.OutcomeSummary{Operation: "apply", Result: "ok", Applied: 2, Verified: 2, VerificationRan: true, CorrelationID: "corr-91", Approver: "carol", At: &last},
	}
}

func TestEnvtest_PluginStatusReportPlan(t *testing.T) {
	startEnv(t)
	ctx := context.Background()
	ns := newNamespace(t, ctx)
	kc := kubeconfigFor(t, "alice@example.com", "system:masters")
	verified := metav1.NewTime(time.Now().Add(-30 * time.Second))

	createRecovery(t, ctx, ns, "venue-a", recoveryv1.ProjectionRecoveryStatus{
		State: recoveryv1.StateCatchingUp, VerifiedThroughSeq: 2192, ObservedBoundarySeq: 4000, Lag: 1808, LastSuccessfulVerification: &verified})
	r := plugin(t, kc, ns, nil, "status")
	if r.code != ExitOK {
		t.Fatalf("status exit %d, want 0", r.code)
	}
	mustContain(t, "status", r.out, "venue-a", "CATCHING_UP", "2192", "4000", "1808", "s ago")

	createRecovery(t, ctx, ns, "venue-b", recoveryv1.ProjectionRecoveryStatus{
		State: recoveryv1.StateBlocked, Reason: "ORPHAN_TRADE", VerifiedThroughSeq: 10, ObservedBoundarySeq: 20, Lag: 10})
	r = plugin(t, kc, ns, nil, "status")
	if r.code != ExitRefused {
		t.Fatalf("status with a BLOCKED scope: exit %d, want 3", r.code)
	}
	mustContain(t, "status", r.out, "venue-a", "venue-b", "BLOCKED", "ORPHAN_TRADE", "never")

	r = plugin(t, kc, ns, nil, "status", "-o", "json")
	if r.code != ExitRefused {
		t.Fatalf("status -o json with a BLOCKED scope: exit %d, want 3 (same decision as the table)", r.code)
	}
	var list recoveryv1.ProjectionRecoveryList
	if err := json.Unmarshal([]byte(r.out), &list); err != nil || len(list.Items) != 2 || list.Kind != "ProjectionRecoveryList" {
		t.Fatalf("status -o json: %v, %d items, kind %q", err, len(list.Items), list.Kind)
	}

	createReconciliation(t, ctx, ns, "recon-a", driftStatus(time.Now().Add(10*time.Minute)))
	r = plugin(t, kc, ns, nil, "report", "recon-a")
	if r.code != ExitRefused {
		t.Fatalf("report of a projection that is not clean: exit %d, want 3", r.code)
	}
	mustContain(t, "report", r.out, "NOT CLEAN, 2 findings",
		"cause: live_feed_gap confidence=high: event 17 never reached the projector",
		"cause: derived_from_missing_trade confidence=high: acct-9 misses t-17")

	r = plugin(t, kc, ns, nil, "report", "recon-a", "-o", "yaml")
	mustContain(t, "report -o yaml", r.out, "kind: ProjectionReconciliation", "clean: false")
	if r.code != ExitRefused {
		t.Fatalf("report -o yaml of a projection that is not clean: exit %d, want 3", r.code)
	}

	r = plugin(t, kc, ns, nil, "plan", "recon-a")
	if r.code != ExitOK {
		t.Fatalf("plan exit %d, want 0", r.code)
	}
	mustContain(t, "plan", r.out, "Plan:          plan-7f3a", "sha256:ab12", "insert-trade:t-17", "~ quantity  1 → 2", "Preflight:     ok")

	r = plugin(t, kc, ns, nil, "report", "missing")
	if r.code != ExitError || !strings.Contains(r.errOut, "not found") {
		t.Fatalf("report of a missing resource: exit %d, want 1 with the API's not found", r.code)
	}
}

// patchingReader simulates a controller writing a new plan while the user
// types: it changes the status on the first Read, then yields what the
// user typed.
type patchingReader struct {
	once  sync.Once
	do    func()
	typed *strings.Reader
}

func (p *patchingReader) Read(b []byte) (int, error) {
	p.once.Do(p.do)
	return p.typed.Read(b)
}

func TestEnvtest_PluginApproveAndRollback(t *testing.T) {
	startEnv(t)
	ctx := context.Background()
	ns := newNamespace(t, ctx)
	const user = "alice@example.com"
	kc := kubeconfigFor(t, user, "system:masters")
	createReconciliation(t, ctx, ns, "recon-a", driftStatus(time.Now().Add(10*time.Minute)))

	// A wrong --plan-id refuses without patching.
	r := plugin(t, kc, ns, nil, "approve", "recon-a", "--plan-id", "plan-0000")
	if r.code != ExitRefused || !strings.Contains(r.errOut, `--plan-id "plan-0000" is not the current plan "plan-7f3a"`) {
		t.Fatalf("approve with a wrong planId: exit %d, want 3 with the refusal", r.code)
	}
	if a := getRecon(t, ctx, ns, "recon-a").Spec.Approval; a != nil {
		t.Fatalf("a refused approval was written: %+v", a)
	}

	// A wrong typed planId refuses without patching; so does no input.
	for _, typed := range []string{"plan-7f3b\n", ""} {
		r = plugin(t, kc, ns, strings.NewReader(typed), "approve", "recon-a")
		if r.code != ExitRefused || !strings.Contains(r.out, "Type the planId to approve it as "+user) {
			t.Fatalf("approve with %q typed: exit %d, want 3 after the prompt", typed, r.code)
		}
		if a := getRecon(t, ctx, ns, "recon-a").Spec.Approval; a != nil {
			t.Fatalf("a refused approval was written: %+v", a)
		}
	}

	// A new plan written while the user types: the patch carries the
	// resourceVersion shown, so nothing is approved.
	pr := &patchingReader{typed: strings.NewReader("plan-7f3a\n"), do: func() {
		cur := getRecon(t, ctx, ns, "recon-a")
		cur.Status.Plan.PlanID = "plan-8000"
		if err := adminCli.Status().Update(ctx, cur); err != nil {
			t.Errorf("writing a new plan: %v", err)
		}
	}}
	r = plugin(t, kc, ns, pr, "approve", "recon-a")
	if r.code != ExitError || !strings.Contains(r.errOut, "changed since it was shown") {
		t.Fatalf("approve across a plan change: exit %d, want 1 (conflict)", r.code)
	}
	if a := getRecon(t, ctx, ns, "recon-a").Spec.Approval; a != nil {
		t.Fatalf("an approval of a superseded plan was written: %+v", a)
	}

	// The right planId (typed) approves as the API server's user.
	r = plugin(t, kc, ns, strings.NewReader("plan-8000\n"), "approve", "recon-a", "--max-actions", "5")
	if r.code != ExitOK {
		t.Fatalf("approve exit %d, want 0", r.code)
	}
	got := getRecon(t, ctx, ns, "recon-a").Spec.Approval
	if got == nil || got.PlanID != "plan-8000" || got.Approver != user || got.MaxActions != 5 || got.Binding != "sha256:0b1d" {
		t.Fatalf("spec.approval = %+v, want planId plan-8000, the plan's binding sha256:0b1d, approver %s (the SelfSubjectReview user), maxActions 5", got, user)
	}

	// --plan-id for scripts.
	r = plugin(t, kc, ns, nil, "approve", "recon-a", "--plan-id", "plan-8000")
	if r.code != ExitOK {
		t.Fatalf("approve --plan-id exit %d, want 0", r.code)
	}

	// rollback --yes sets spec.rollback and replaces the approval (the CEL
	// rule forbids both).
	r = plugin(t, kc, ns, nil, "rollback", "recon-a", "--yes", "--max-actions", "7")
	if r.code != ExitOK {
		t.Fatalf("rollback --yes exit %d, want 0", r.code)
	}
	spec := getRecon(t, ctx, ns, "recon-a").Spec
	if spec.Rollback == nil || spec.Rollback.CorrelationID != "corr-91" || spec.Rollback.Approver != user || spec.Rollback.Binding != "sha256:0b1d" ||
		spec.Rollback.MaxActions != 7 || spec.Approval != nil {
		t.Fatalf("spec after rollback: rollback %+v approval %+v; want rollback {corr-91, sha256:0b1d, %s, maxActions 7} and no approval", spec.Rollback, spec.Approval, user)
	}

	// rollback --run names a run status does not show (a crashed apply a
	// plan_stale refusal named): typed to confirm, written as asked.
	r = plugin(t, kc, ns, strings.NewReader("corr-crashed\n"), "rollback", "recon-a", "--run", "corr-crashed")
	if r.code != ExitOK || !strings.Contains(r.out, "run corr-crashed is not in status") || !strings.Contains(r.out, "withdraws that verification") {
		t.Fatalf("rollback --run exit %d, want 0 with the run named; out %q", r.code, r.out)
	}
	if rb := getRecon(t, ctx, ns, "recon-a").Spec.Rollback; rb == nil || rb.CorrelationID != "corr-crashed" || rb.Approver != user {
		t.Fatalf("spec.rollback after rollback --run: %+v, want {corr-crashed, %s}", rb, user)
	}

	// An expired plan is refused client-side, nothing patched.
	createReconciliation(t, ctx, ns, "recon-expired", driftStatus(time.Now().Add(-2*time.Minute)))
	r = plugin(t, kc, ns, nil, "approve", "recon-expired", "--plan-id", "plan-7f3a")
	if r.code != ExitRefused || !strings.Contains(r.errOut, "plan plan-7f3a expired") {
		t.Fatalf("approve of an expired plan: exit %d, want 3 with the expiry", r.code)
	}
	if a := getRecon(t, ctx, ns, "recon-expired").Spec.Approval; a != nil {
		t.Fatalf("an expired plan was approved: %+v", a)
	}
	r = plugin(t, kc, ns, nil, "plan", "recon-expired")
	if r.code != ExitRefused || !strings.Contains(r.out, "EXPIRED") {
		t.Fatalf("plan of an expired plan: exit %d, want 3", r.code)
	}
}

// TestEnvtest_PluginShowsTheAPIServersRefusal: a user who may read but not
// patch gets the API server's own words and exit 3, and nothing changes.
func TestEnvtest_PluginShowsTheAPIServersRefusal(t *testing.T) {
	startEnv(t)
	ctx := context.Background()
	ns := newNamespace(t, ctx)
	createReconciliation(t, ctx, ns, "recon-a", driftStatus(time.Now().Add(10*time.Minute)))
	grantReadOnly(t, ctx, ns, "bob", "projectionreconciliations")
	kc := kubeconfigFor(t, "bob")
	r := plugin(t, kc, ns, nil, "approve", "recon-a", "--plan-id", "plan-7f3a")
	if r.code != ExitRefused || !strings.Contains(r.errOut, `User "bob" cannot patch resource "projectionreconciliations"`) {
		t.Fatalf("approve without the right: exit %d, want 3 with the API server's message", r.code)
	}
	if a := getRecon(t, ctx, ns, "recon-a").Spec.Approval; a != nil {
		t.Fatalf("a refused approval was written: %+v", a)
	}
}

// TestEnvtest_PluginStatusWatch: --watch redraws from successive
// observations: while the cursor advances, the CATCHING_UP scope gets a bar,
// a rate and an ETA; the watch ends cleanly (exit 0) when interrupted.
func TestEnvtest_PluginStatusWatch(t *testing.T) {
	startEnv(t)
	ctx := context.Background()
	ns := newNamespace(t, ctx)
	kc := kubeconfigFor(t, "alice@example.com", "system:masters")
	createRecovery(t, ctx, ns, "venue-a", recoveryv1.ProjectionRecoveryStatus{
		State: recoveryv1.StateCatchingUp, VerifiedThroughSeq: 1000, ObservedBoundarySeq: 100000, Lag: 99000, EventCount: 3000})

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out, errOut testenv.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(wctx, []string{"--kubeconfig", kc, "--namespace", ns, "status", "--watch", "--interval", "200ms"},
			genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	}()
	// Advance the cursor like a controller would, then wait for a frame
	// with a known rate and ETA.
	deadline := time.Now().Add(30 * time.Second)
	for seq := int64(2000); !strings.Contains(out.String(), "ev/s  ETA ") || strings.Contains(lastFrame(out.String()), "rate ?"); seq += 1000 {
		if time.Now().After(deadline) {
			t.Fatalf("no frame with a rate and an ETA within 30s:\n%s", out.String())
		}
		var cur recoveryv1.ProjectionRecovery
		if err := adminCli.Get(ctx, client.ObjectKey{Namespace: ns, Name: "venue-a"}, &cur); err != nil {
			t.Fatal(err)
		}
		// Three events per sequence number: the rate shown is in events.
		cur.Status.VerifiedThroughSeq, cur.Status.Lag, cur.Status.EventCount = seq, 100000-seq, 3*seq
		if err := adminCli.Status().Update(ctx, &cur); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Fatalf("interrupted watch: exit %d, want 0; stderr %s", code, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not stop when interrupted")
	}
	frame := lastFrame(out.String())
	t.Logf("last frame:\n%s", frame)
	mustContain(t, "watch frame", frame, "CATCHING_UP", "ev/s  ETA ")
	mustContain(t, "watch frame", frame, ns+"/venue-a [")
	if strings.Contains(frame, " 0.0 ev/s") || strings.Contains(frame, "ETA ?") {
		t.Errorf("the watch frame shows no event rate or no ETA while the events grow:\n%s", frame)
	}
}

// lastFrame is the output after the last frame header.
func lastFrame(s string) string {
	i := strings.LastIndex(s, "Ctrl-C to stop")
	if i < 0 {
		return ""
	}
	return s[i:]
}

// testItem is a reversible planned action with one changed field.
func testItem(id string) recoveryv1.PlannedAction {
	b, a := "1", "2"
	return recoveryv1.PlannedAction{ID: id, Kind: "rederive_position", Effect: "update", Risk: "low", Reversible: true,
		Changes: []recoveryv1.FieldChange{{Field: "quantity", Before: &b, After: &a}}}
}
