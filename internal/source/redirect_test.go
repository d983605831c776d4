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

package source

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

const redirectToken = "s3cret-bearer"

// recorder is a member look-alike that answers every request with a valid
// idle page (so a followed redirect would look like success) and remembers
// what reached it.
type recorder struct {
	mu    sync.Mutex
	paths []string
	auths []string
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	rc.paths = append(rc.paths, r.URL.Path)
	rc.auths = append(rc.auths, r.Header.Get("Authorization"))
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(Page{ProtocolVersion: wire.ProtocolVersion, DescriptorHash: strings.Repeat("d", 64),
		Idle: true, Events: []Event{}})
}

func (rc *recorder) seen() (paths, auths []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.paths...), append([]string(nil), rc.auths...)
}

// redirector answers the catch-up path with status and a Location of
// target(r) (the rest of the request kept), and serves rc on any other path.
func redirector(status int, target func(*http.Request) string, rc *recorder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != CatchupPath {
			rc.ServeHTTP(w, r)
			return
		}
		http.Redirect(w, r, target(r), status)
	})
}

// TestFetch_RefusesRedirects: a 3xx from the source URL is never followed,
// whichever way the client was built (from TLS, or around a caller's
// http.Client as the controller builds it): nothing reaches the Location,
// the bearer token least of all, and Fetch returns a typed refusal that is
// not transient (REDIRECT_REFUSED; codes.Of maps it to SOURCE_REFUSED).
// Real servers on loopback: Go's default policy follows all three and
// re-sends the token on the first (https to http, same host).
func TestFetch_RefusesRedirects(t *testing.T) {
	target := &recorder{}
	plain := httptest.NewServer(target)
	t.Cleanup(plain.Close)
	_, port, err := net.SplitHostPort(plain.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	plainPort := ":" + port

	// Without a redirect the same client fetches, with its token.
	direct, err := NewClient(ClientConfig{BaseURL: plain.URL, Token: redirectToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.hc.CloseIdleConnections)
	if p, err := direct.Fetch(context.Background(), 0, chain.Genesis, "", 10); err != nil || !p.Idle {
		t.Fatalf("direct Fetch = %+v, %v; want the idle page", p, err)
	}
	if _, auths := target.seen(); len(auths) != 1 || auths[0] != "Bearer "+redirectToken {
		t.Fatalf("direct Fetch sent Authorization %q", auths)
	}

	cases := []struct {
		name       string
		tls        bool
		status     int
		location   func(r *http.Request) string // where the origin points
		wantTarget string                       // the Location named in the refusal
	}{
		{name: "https to http on the same host", tls: true, status: http.StatusFound,
			location:   func(r *http.Request) string { return "http://127.0.0.1" + plainPort + "/elsewhere?" + r.URL.RawQuery },
			wantTarget: "http://127.0.0.1" + plainPort + "/elsewhere"},
		{name: "to another host", status: http.StatusTemporaryRedirect,
			location:   func(r *http.Request) string { return "http://localhost" + plainPort + "/elsewhere?" + r.URL.RawQuery },
			wantTarget: "http://localhost" + plainPort + "/elsewhere"},
		{name: "same scheme, same host", tls: true, status: http.StatusPermanentRedirect,
			location:   func(r *http.Request) string { return "/v2" + CatchupPath + "?" + r.URL.RawQuery },
			wantTarget: "/v2" + CatchupPath},
		{name: "see other with userinfo", tls: true, status: http.StatusSeeOther,
			location:   func(*http.Request) string { return "http://user:pw@127.0.0.1" + plainPort + "/elsewhere" },
			wantTarget: "http://user:xxxxx@127.0.0.1" + plainPort + "/elsewhere"},
	}
	builds := []struct {
		name string
		make func(t *testing.T, base string, pool *x509.CertPool) (*Client, *http.Transport)
	}{
		{"client built from TLS", func(t *testing.T, base string, pool *x509.CertPool) (*Client, *http.Transport) {
			c, err := NewClient(ClientConfig{BaseURL: base, Token: redirectToken, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
			if err != nil {
				t.Fatal(err)
			}
			return c, c.hc.Transport.(*http.Transport)
		}},
		{"caller's http.Client with a permissive policy", func(t *testing.T, base string, pool *x509.CertPool) (*Client, *http.Transport) {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
			follow := func(*http.Request, []*http.Request) error { return nil }
			c, err := NewClient(ClientConfig{BaseURL: base, Token: redirectToken, HTTPClient: &http.Client{Transport: tr, CheckRedirect: follow}})
			if err != nil {
				t.Fatal(err)
			}
			return c, tr
		}},
	}
	for _, tc := range cases {
		for _, b := range builds {
			t.Run(tc.name+"/"+b.name, func(t *testing.T) {
				self := &recorder{}
				h := redirector(tc.status, tc.location, self)
				var origin *httptest.Server
				var pool *x509.CertPool
				if tc.tls {
					origin = httptest.NewTLSServer(h)
					pool = x509.NewCertPool()
					pool.AddCert(origin.Certificate())
				} else {
					origin = httptest.NewServer(h)
				}
				t.Cleanup(origin.Close)
				c, tr := b.make(t, origin.URL, pool)
				t.Cleanup(tr.CloseIdleConnections)
				before, _ := target.seen()

				p, err := c.Fetch(context.Background(), 0, chain.Genesis, "", 10)

				after, auths := target.seen()
				selfPaths, selfAuths := self.seen()
				if len(after) != len(before) || len(selfPaths) != 0 {
					t.Errorf("the redirect was followed: the target received %v, the origin's other paths %v", after[len(before):], selfPaths)
				}
				for _, a := range append(auths[len(before):], selfAuths...) {
					if strings.Contains(a, redirectToken) {
						t.Errorf("the bearer token reached the redirect's Location: Authorization %q", a)
					}
				}
				var re *RefusalError
				if !errors.As(err, &re) {
					t.Fatalf("Fetch = page %+v, err %v; want a *RefusalError for the %d", p, err, tc.status)
				}
				if re.Status != tc.status || re.Code != CodeRedirectRefused || IsTransient(err) {
					t.Errorf("refusal = %+v (transient %v); want status %d, code %s, not transient", re, IsTransient(err), tc.status, CodeRedirectRefused)
				}
				if !strings.Contains(re.Message, tc.wantTarget) || strings.Contains(err.Error(), "pw@") {
					t.Errorf("message %q should name Location %s, with any password redacted", err, tc.wantTarget)
				}
				t.Logf("refused: %v", err)
			})
		}
	}
}

// TestNewClient_KeepsTheCallersPolicy: NewClient installs its refusal on a
// copy; the http.Client the caller passed keeps its own CheckRedirect.
func TestNewClient_KeepsTheCallersPolicy(t *testing.T) {
	hc := &http.Client{}
	if _, err := NewClient(ClientConfig{BaseURL: "http://127.0.0.1:1", HTTPClient: hc}); err != nil {
		t.Fatal(err)
	}
	if hc.CheckRedirect != nil {
		t.Fatal("NewClient changed the caller's http.Client")
	}
}
