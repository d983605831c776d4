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
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"

	"github.com/projection-recovery/projection-recovery/internal/completeness"
)

// completenessServer serves the completeness endpoint on
// --completeness-bind-address. Its answer lists every watched namespace's
// scopes, so with --metrics-secure it is served as metrics are: over HTTPS,
// behind controller-runtime's authentication and authorization filter (the
// API server authenticates the bearer token with a TokenReview and
// authorizes get on the non-resource URL /v2/projection-completeness with a
// SubjectAccessReview). Without it, anyone who reaches the port reads them.
// The filter is the one metrics use, built from the manager's client: no
// authorizer of our own to get wrong. Plain HTTP stays the default.
func completenessServer(o options, h http.Handler, cfg *rest.Config, hc *http.Client) (manager.Runnable, error) {
	if !o.metricsSecure {
		return httpServer(o.completenessAddr, h, nil), nil
	}
	filter, err := filters.WithAuthenticationAndAuthorization(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("completeness endpoint: building the authentication and authorization filter: %w", err)
	}
	h, err = filter(ctrl.Log.WithName("completeness").WithValues("path", completeness.Path), h)
	if err != nil {
		return nil, fmt.Errorf("completeness endpoint: adding the authentication and authorization filter: %w", err)
	}
	tlsCfg, err := selfSignedTLS()
	if err != nil {
		return nil, fmt.Errorf("completeness endpoint: %w", err)
	}
	return httpServer(o.completenessAddr, h, tlsCfg), nil
}

// selfSignedTLS is a TLS configuration with a certificate generated now, as
// controller-runtime's metrics server uses when it is given none: it
// encrypts the bearer token on the wire (a scraper skips verification, as
// for metrics).
func selfSignedTLS() (*tls.Config, error) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKeyWithFixtures("localhost", []net.IP{{127, 0, 0, 1}}, nil, "")
	if err != nil {
		return nil, fmt.Errorf("generating a self-signed certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the self-signed certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// httpServer serves h on addr as a manager runnable that stops with it:
// over TLS when tlsCfg is set, plain HTTP otherwise. Over TLS it speaks
// HTTP/1.1 only: HTTP/2's stream-reset floods (CVE-2023-44487) cost the
// server before the filter can refuse an unauthenticated caller, which is
// why controller-runtime's scaffolding turns it off for metrics too.
func httpServer(addr string, h http.Handler, tlsCfg *tls.Config) manager.RunnableFunc {
	return func(ctx context.Context) error {
		srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second, TLSConfig: tlsCfg,
			// A non-nil empty map: no protocol upgrade, so no HTTP/2.
			TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
		errc := make(chan error, 1)
		go func() {
			if tlsCfg != nil {
				errc <- srv.ListenAndServeTLS("", "") // the certificate is in tlsCfg
				return
			}
			errc <- srv.ListenAndServe()
		}()
		select {
		case err := <-errc:
			return fmt.Errorf("completeness endpoint on %s: %w", addr, err)
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return srv.Shutdown(sctx)
		}
	}
}
