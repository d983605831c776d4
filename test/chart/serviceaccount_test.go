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

package chart

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/controllers"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
	"github.com/projection-recovery/projection-recovery/internal/reference/member"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// TestChart_ManagerAsItsServiceAccount is the least-privilege proof: the
// chart is installed with watchNamespaces=[sa-a]; the real manager binary
// runs with the chart's own args and exactly the chart ServiceAccount's
// identity (a TokenRequest token, no client certificate) against real
// PostgreSQL (the documented projection_recovery role) and a reference
// member. It wins leader election through the Lease in its own namespace,
// reconciles a ProjectionRecovery in sa-a to CURRENT, creates
// the scheduled reconciliation (--reconcile-every) and writes its status,
// serves metrics behind the API server's authentication and authorization
// (metrics.secure), never meets a Forbidden, and the same identity is refused
// a Secret in sa-b, which it does not watch, while it may read the one in sa-a.
func TestChart_ManagerAsItsServiceAccount(t *testing.T) {
	cl := sharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const release, sys, nsA, nsB = "projection-recovery", "pr-system", "sa-a", "sa-b"
	cl.namespace(t, sys, nsA, nsB)

	// The manager, built now from this tree (in parallel with the install).
	var bin string
	built := make(chan error, 1)
	go func() {
		var err error
		bin, err = testenv.Binary("manager")
		built <- err
	}()

	// The cluster-scoped roles for people and the approval policy belong to
	// another release in this shared control plane (the documented
	// several-releases case); the manager's own rights are all here.
	values := []string{"--set", "watchNamespaces={" + nsA + "}", "--set", "autoRecovery.enabled=true", "--set", "reconcileEvery=1m",
		"--set", "userRoles.create=false", "--set", "approvalPolicy.create=false", "--set", "secretReferencePolicy.create=false", "--set", "metrics.secure=true",
		"--set", "leaderElection.enabled=true"}
	notes := helm(t, append([]string{"install", release, chartDir(t), "--kubeconfig", cl.kubeconfig, "--namespace", sys}, values...)...)
	for _, want := range []string{"Auto-recovery: ON", "Watching: namespaces " + nsA + " (Secrets are read only there)", "kubectl apply --server-side --force-conflicts"} {
		if !strings.Contains(notes, want) {
			t.Errorf("the install's NOTES lack %q:\n%s", want, notes)
		}
	}
	args := deploymentArgs(t, decodeObjects(t, helm(t, "get", "manifest", release, "--kubeconfig", cl.kubeconfig, "--namespace", sys)))

	// Exactly the chart ServiceAccount's identity.
	cs := kubernetes.NewForConfigOrDie(cl.cfg)
	tr, err := cs.CoreV1().ServiceAccounts(sys).CreateToken(ctx, release, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for the chart's ServiceAccount %s/%s: %v", sys, release, err)
	}
	saKubeconfig := cl.tokenKubeconfig(t, tr.Status.Token)
	saCfg, err := clientcmd.BuildConfigFromFlags("", saKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	sa := kubernetes.NewForConfigOrDie(saCfg)
	who, err := sa.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || who.Status.UserInfo.Username != "system:serviceaccount:"+sys+":"+release {
		t.Fatalf("the token authenticates as %v (%v), want the chart's ServiceAccount", who, err)
	}

	// A scope: PostgreSQL with a selected run, a member with history that the
	// live feed never delivered (nothing published: recovery has it all to do).
	scope := "sa-scope"
	db := recoverydb.New(t)
	desc := engine.TestDescriptor(scope)
	mlog, err := engine.Create(t.TempDir(), desc, engine.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := engine.NewWorkload(7, engine.WorkloadConfig{Accounts: 4, Instruments: desc.Instruments, Openings: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := member.NewMember(member.MemberConfig{Log: mlog, Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	for range 300 {
		if _, _, err := m.Step(); err != nil {
			t.Fatal(err)
		}
	}
	h := member.NewHandler(mlog, member.HandlerOptions{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	st, err := store.Open(ctx, db.Admin)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Pool().Exec(ctx, `INSERT INTO projection_runs (scope, epoch, managed, selected, phase, descriptor_hash, protocol_version)
VALUES ($1, 1, true, true, 'ACTIVE', $2, 1)`, scope, h.DescriptorHash()); err != nil {
		t.Fatal(err)
	}

	for _, ns := range []string{nsA, nsB} {
		if err := cl.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			StringData: map[string]string{"dsn": db.Recovery}}); err != nil {
			t.Fatal(err)
		}
	}
	pr := &recoveryv1.ProjectionRecovery{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "scope"},
		Spec: recoveryv1.ProjectionRecoverySpec{
			Scope:    scope,
			Source:   recoveryv1.SourceSpec{URL: "http://" + ln.Addr().String()},
			Database: recoveryv1.DatabaseSpec{DSNSecretRef: recoveryv1.SecretKeySelector{Name: "db", Key: "dsn"}},
			PageSize: 500, PagesPerCycle: 20,
			Interval: &metav1.Duration{Duration: 2 * time.Second},
			Backoff:  &recoveryv1.BackoffSpec{Base: metav1.Duration{Duration: 200 * time.Millisecond}, Cap: metav1.Duration{Duration: 2 * time.Second}},
		},
	}
	if err := cl.c.Create(ctx, pr); err != nil {
		t.Fatal(err)
	}

	if err := <-built; err != nil {
		t.Fatal(err)
	}
	// The chart's args; only the listeners move off the fixed ports (the
	// flag package keeps the last value), since other processes share this host.
	metricsAddr, completenessAddr := freeAddr(t), freeAddr(t)
	args = append(args, "--metrics-bind-address="+metricsAddr, "--health-probe-bind-address=0", "--completeness-bind-address="+completenessAddr, "--dev=false")
	mgr := exec.Command(bin, args...)
	mgr.Env = append(os.Environ(), "KUBECONFIG="+saKubeconfig)
	var logs testenv.SyncBuffer
	mgr.Stdout, mgr.Stderr = &logs, &logs
	if err := mgr.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Wait() }()
	defer func() {
		_ = mgr.Process.Signal(syscall.SIGTERM)
		select {
		case <-stopped:
		case <-time.After(40 * time.Second):
			_ = mgr.Process.Kill()
			<-stopped
		}
		if t.Failed() {
			t.Logf("manager log:\n%s", logs.String())
		}
	}()

	// CURRENT, reconciled by the ServiceAccount's manager alone.
	var got recoveryv1.ProjectionRecovery
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := cl.c.Get(ctx, client.ObjectKeyFromObject(pr), &got); err != nil {
			t.Fatal(err)
		}
		if got.Status.State == recoveryv1.StateCurrent {
			break
		}
		select {
		case err := <-stopped:
			t.Fatalf("the manager exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the recovery did not reach CURRENT within 60 s: state %q reason %q message %q", got.Status.State, got.Status.Reason, got.Status.Message)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if got.Status.VerifiedThroughSeq != mlog.Committed() {
		t.Fatalf("CURRENT at verifiedThroughSeq %d, the member committed %d", got.Status.VerifiedThroughSeq, mlog.Committed())
	}

	// It led through the Lease in the release namespace (the only place the
	// chart grants lease rights).
	lease, err := cs.CoordinationV1().Leases(sys).Get(ctx, "projection-recovery.recovery.projection.io", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatalf("the leader-election Lease in %s: %v, %+v", sys, err, lease)
	}

	// The scheduled reconciliation: created (create on projectionreconciliations,
	// an owner reference to the recovery) and its dry run's status written.
	var rec recoveryv1.ProjectionReconciliation
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		err := cl.c.Get(ctx, client.ObjectKey{Namespace: nsA, Name: controllers.ScheduledReconciliationName(pr.Name)}, &rec)
		if err == nil && rec.Status.ObservedGeneration > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scheduled reconciliation was not created and reported within 30 s (%v, status %+v)", err, rec.Status)
		}
	}

	// The same identity: its watched namespace's Secret yes, another's no.
	if _, err := sa.CoreV1().Secrets(nsA).Get(ctx, "db", metav1.GetOptions{}); err != nil {
		t.Fatalf("the ServiceAccount may not get the Secret in its watched namespace %s: %v", nsA, err)
	}
	if _, err := sa.CoreV1().Secrets(nsB).Get(ctx, "db", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("get Secret %s/db as the ServiceAccount = %v, want Forbidden", nsB, err)
	}
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Namespace: nsB, Verb: "get", Resource: "secrets"},
		{Verb: "list", Resource: "secrets"},
		{Namespace: sys, Verb: "get", Resource: "secrets"},
		{Namespace: nsA, Verb: "update", Group: recoveryv1.GroupVersion.Group, Resource: "projectionrecoveries"},
	} {
		ssar, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ssar.Status.Allowed {
			t.Errorf("the ServiceAccount may %s %s in %q; least privilege says no", ra.Verb, ra.Resource, ra.Namespace)
		}
	}
	// metrics.secure: a scrape is authenticated and authorized by the API
	// server (the manager's tokenreviews/subjectaccessreviews rights): no
	// token 401, a token without the metrics-reader role 403, with it 200.
	scraper := tokenFor(ctx, t, cs, cl, sys, "scraper")
	if err := cl.c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scraper"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: release + "-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sys, Name: "scraper"}}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who   string
		token string
		want  int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"the manager's own token (not a metrics reader)", tr.Status.Token, http.StatusForbidden},
		{"a ServiceAccount bound to <fullname>-metrics-reader", scraper, http.StatusOK},
	} {
		if got := scrape(ctx, t, metricsAddr, tc.token); got != tc.want {
			t.Errorf("GET https://%s/metrics with %s: %d, want %d", metricsAddr, tc.who, got, tc.want)
		}
	}

	// The completeness endpoint lists every namespace's scopes: with
	// metrics.secure it is behind the same filter, and its own role. The
	// scraper's metrics-reader does not open it, the chart's
	// <release>-completeness-reader does; a refusal names no scope.
	reader := tokenFor(ctx, t, cs, cl, sys, "completeness-reader")
	if err := cl.c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "completeness-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: release + "-completeness-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sys, Name: "completeness-reader"}}}); err != nil {
		t.Fatal(err)
	}
	waitNonResourceAllowed(ctx, t, cs, "system:serviceaccount:"+sys+":completeness-reader", completenessPath)
	for _, tc := range []struct {
		who   string
		token string
		want  int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"the manager's own token", tr.Status.Token, http.StatusForbidden},
		{"the scraper (metrics-reader only)", scraper, http.StatusForbidden},
		{"a ServiceAccount bound to <fullname>-completeness-reader", reader, http.StatusOK},
	} {
		code, body := getTLS(ctx, t, completenessAddr, completenessPath, tc.token)
		switch {
		case code != tc.want:
			t.Errorf("GET https://%s%s with %s: %d, want %d", completenessAddr, completenessPath, tc.who, code, tc.want)
		case code != http.StatusOK && strings.Contains(body, scope):
			t.Errorf("GET %s with %s was refused with %d, yet the answer names scope %s: %q", completenessPath, tc.who, code, scope, body)
		case code == http.StatusOK && !strings.Contains(body, `"scope": "`+scope+`"`):
			t.Errorf("GET %s with %s: the answer does not list scope %s:\n%s", completenessPath, tc.who, scope, body)
		}
	}

	// Every call the manager made was authorized: its rights suffice.
	if l := strings.ToLower(logs.String()); strings.Contains(l, "forbidden") {
		t.Fatalf("the manager met a Forbidden:\n%s", grepLines(logs.String(), "orbidden"))
	}
}

// tokenFor creates ServiceAccount ns/name and returns a token for it.
func tokenFor(ctx context.Context, t *testing.T, cs kubernetes.Interface, cl *cluster, ns, name string) string {
	t.Helper()
	if err := cl.c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// freeAddr is a loopback address with a port free at the time of the call.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrape GETs /metrics over HTTPS with token as bearer; it returns the
// status code.
func scrape(ctx context.Context, t *testing.T, addr, token string) int {
	t.Helper()
	code, _ := getTLS(ctx, t, addr, "/metrics", token)
	return code
}

// completenessPath is the completeness endpoint's (internal/completeness.Path).
const completenessPath = "/v2/projection-completeness"

// getTLS GETs path over HTTPS (the manager's certificates are self-signed)
// with token as bearer, retrying while the server starts; it returns the
// status code and the body. A server answering in plain HTTP fails the test.
func getTLS(ctx context.Context, t *testing.T, addr, path, token string) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}} //nolint:gosec // self-signed test server
	var lastErr error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
				t.Fatalf("%s%s is served over plain HTTP, without authentication", addr, path)
			}
			lastErr = err
			continue
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	t.Fatalf("%s%s never answered: %v", addr, path, lastErr)
	return 0, ""
}

// waitNonResourceAllowed polls until the API server's RBAC allows user get
// on path: the manager's filter caches a denial for 30 s, so a question
// asked before the binding is in effect would be refused for that long.
func waitNonResourceAllowed(ctx context.Context, t *testing.T, cs kubernetes.Interface, user, path string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:authenticated"},
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"}}}, metav1.CreateOptions{})
		if err == nil && sar.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still not allowed get on %s (%v)", user, path, err)
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
