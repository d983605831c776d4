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
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/projection-recovery/projection-recovery/internal/completeness"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// TestCompleteness_SecureBehindTheAPIServer: with --metrics-secure the
// completeness endpoint is served over HTTPS behind the same authentication
// and authorization as metrics, done by a real kube-apiserver (envtest):
// TokenReview, then a SubjectAccessReview for get on the non-resource URL
// /v2/projection-completeness. No token is 401 and a ServiceAccount token
// without that right 403, and neither answer names a scope; a token whose
// ServiceAccount is bound to a role granting it gets the JSON. Without
// --metrics-secure the endpoint stays plain HTTP, as documented.
func TestCompleteness_SecureBehindTheAPIServer(t *testing.T) {
	env, cfg, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(cfg)

	const ns, scope = "default", "team-a-secret-scope"
	noRole := saToken(ctx, t, cs, ns, "no-role")
	reader := saToken(ctx, t, cs, ns, "completeness-reader")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "completeness-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{completeness.Path}, Verbs: []string{"get"}}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "completeness-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "completeness-reader"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The filter caches a denial for 30 s: ask the reader's first question
	// only once the API server's RBAC has the binding.
	waitAllowed(ctx, t, cs, "system:serviceaccount:"+ns+":completeness-reader")

	reg := completeness.NewRegistry(nil)
	reg.CycleStarted("team-a", "orders", scope, time.Now(), false)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { utilnet.CloseIdleConnectionsFor(hc.Transport) })

	t.Run("metrics-secure", func(t *testing.T) {
		addr := serveCompleteness(t, options{metricsSecure: true, completenessAddr: freeAddr(t)}, reg, cfg, hc)
		for _, tc := range []struct {
			who   string
			token string
			want  int
		}{
			{"no token", "", http.StatusUnauthorized},
			{"a ServiceAccount without the role", noRole, http.StatusForbidden},
			{"a ServiceAccount bound to the completeness reader role", reader, http.StatusOK},
		} {
			t.Run(tc.who, func(t *testing.T) {
				got := getCompleteness(ctx, t, addr, tc.token)
				if got.scheme != "https" {
					t.Fatalf("%s: served over plain HTTP without authentication: status %d, body names the scope: %t", tc.who, got.code, strings.Contains(got.body, scope))
				}
				if got.code != tc.want {
					t.Fatalf("%s: status %d, want %d (body %q)", tc.who, got.code, tc.want, got.body)
				}
				if tc.want != http.StatusOK {
					if strings.Contains(got.body, scope) || strings.Contains(got.body, "team-a") {
						t.Fatalf("%s was refused with %d yet the answer names the scope: %q", tc.who, got.code, got.body)
					}
					return
				}
				assertScopes(t, got.body, scope)
			})
		}
	})
	t.Run("plain HTTP without metrics-secure", func(t *testing.T) {
		addr := serveCompleteness(t, options{completenessAddr: freeAddr(t)}, reg, cfg, hc)
		got := getCompleteness(ctx, t, addr, "")
		if got.scheme != "http" || got.code != http.StatusOK {
			t.Fatalf("without --metrics-secure: %s status %d, want plain HTTP 200", got.scheme, got.code)
		}
		assertScopes(t, got.body, scope)
	})
}

// serveCompleteness runs completenessServer as the manager would and stops
// it when the test ends; it returns the address.
func serveCompleteness(t *testing.T, o options, reg *completeness.Registry, cfg *rest.Config, hc *http.Client) string {
	t.Helper()
	srv, err := completenessServer(o, reg.Handler(), cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the completeness server stopped with %v", err)
		}
	})
	return o.completenessAddr
}

type answer struct {
	scheme string
	code   int
	body   string
}

// getCompleteness GETs the endpoint with token as bearer (none when ""),
// over HTTPS (the certificate is self-signed) or, when the server speaks
// plain HTTP, over HTTP; it retries while the server starts.
func getCompleteness(ctx context.Context, t *testing.T, addr, token string) answer {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true} //nolint:gosec // self-signed test server
	hc := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	scheme := "https"
	var lastErr error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+completeness.Path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
				scheme = "http"
			}
			lastErr = err
			continue
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return answer{scheme: scheme, code: resp.StatusCode, body: string(b)}
	}
	t.Fatalf("the completeness endpoint %s never answered: %v", addr, lastErr)
	return answer{}
}

func assertScopes(t *testing.T, body string, want string) {
	t.Helper()
	var a completeness.Answer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("the answer is not the completeness JSON: %v\n%s", err, body)
	}
	if len(a.Scopes) != 1 || a.Scopes[0].Scope != want {
		t.Fatalf("scopes %+v, want %s", a.Scopes, want)
	}
}

// saToken creates ServiceAccount ns/name and returns a token for it.
func saToken(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// waitAllowed polls until the API server allows user get on the
// completeness path.
func waitAllowed(ctx context.Context, t *testing.T, cs kubernetes.Interface, user string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:authenticated"},
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: completeness.Path, Verb: "get"}}}, metav1.CreateOptions{})
		if err == nil && sar.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New(sar.Status.Reason)
			}
			t.Fatalf("%s is still not allowed get on %s: %v", user, completeness.Path, err)
		}
	}
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
