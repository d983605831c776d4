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
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/catchup"
	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
	"github.com/projection-recovery/projection-recovery/internal/reference/member"
	"github.com/projection-recovery/projection-recovery/internal/source"
)

// TestConnections_PoolSharedAndClosedWhenUnused: resources on one DSN share a
// pool; a pool closes when its last resource is deleted or moves to another
// DSN (a rotated Secret), so a long-running manager does not accumulate them.
func TestConnections_PoolSharedAndClosedWhenUnused(t *testing.T) {
	ctx := context.Background()
	dsnA, dsnB := pgtest.NewDSN(t), pgtest.NewDSN(t)
	c := &Connections{ApplySchema: true} // fresh databases: the schema step creates recovery's tables
	defer func() { _ = c.ReleaseAll(ctx, "nobody") }()

	a1, err := c.Store(ctx, "ns/one", dsnA)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := c.Store(ctx, "ns/two", dsnA)
	if a1 != a2 {
		t.Fatal("two resources on one DSN must share one pool")
	}
	if err := a1.Pool().Ping(ctx); err != nil {
		t.Fatal(err)
	}

	// ns/one rotates to another DSN: the pool stays for ns/two.
	if _, err := c.Store(ctx, "ns/one", dsnB); err != nil {
		t.Fatal(err)
	}
	if err := a1.Pool().Ping(ctx); err != nil {
		t.Fatalf("pool closed while ns/two still uses it: %v", err)
	}
	// ns/two is deleted: nobody uses dsnA any more, its pool is closed.
	c.Forget("ns/two")
	if err := a1.Pool().Ping(ctx); err == nil {
		t.Fatal("the unused pool was not closed")
	}
	if len(c.stores) != 1 {
		t.Fatalf("%d pools open, want 1 (dsnB)", len(c.stores))
	}
	c.Forget("ns/one")
	if len(c.stores) != 0 {
		t.Fatalf("%d pools open after every resource was forgotten", len(c.stores))
	}
}

// memberWithConnCount serves a small reference member over TLS and counts
// the TCP connections open to it. The spec and secrets reach it with its CA.
func memberWithConnCount(t *testing.T) (spec *recoveryv1.SourceSpec, sec resolvedSecrets, open *atomic.Int64) {
	t.Helper()
	desc := engine.TestDescriptor("conns")
	lg, err := engine.BuildLog(t.TempDir(), desc, 1, engine.WorkloadConfig{Instruments: desc.Instruments, Openings: true}, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	open = &atomic.Int64{}
	srv := httptest.NewUnstartedServer(member.NewHandler(lg, member.HandlerOptions{}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return &recoveryv1.SourceSpec{URL: srv.URL, TLS: &recoveryv1.SourceTLS{}}, resolvedSecrets{ca: ca}, open
}

func withToken(sec resolvedSecrets, token string) resolvedSecrets {
	sec.token = token
	return sec
}

func fetchOnce(t *testing.T, c *Connections, resource string, spec *recoveryv1.SourceSpec, sec resolvedSecrets) *source.Client {
	t.Helper()
	cl, err := c.Client(resource, spec, sec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Fetch(context.Background(), 0, chain.Genesis, "", 10); err != nil {
		t.Fatal(err)
	}
	return cl
}

func waitOpen(t *testing.T, open *atomic.Int64, want int64, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for open.Load() != want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := open.Load(); got != want {
		t.Fatalf("%s: %d connections open to the member, want %d", what, got, want)
	}
}

// TestConnections_ClientsTiedToResources: source clients are shared by the
// resources with the same source configuration and dropped, with their idle
// keep-alive connections closed, when the last of them is deleted or moves to
// another configuration (a rotated token, a new URL), so a long-running
// manager does not keep one client and one connection per token it ever saw.
func TestConnections_ClientsTiedToResources(t *testing.T) {
	spec, sec, open := memberWithConnCount(t)
	c := &Connections{}

	a := fetchOnce(t, c, "ns/one", spec, sec)
	if b := fetchOnce(t, c, "ns/two", spec, sec); a != b {
		t.Fatal("two resources with one source configuration must share one client")
	}
	waitOpen(t, open, 1, "one shared client")

	// ns/one's token Secret is rotated (the member ignores tokens): the
	// first client stays for ns/two.
	fetchOnce(t, c, "ns/one", spec, withToken(sec, "rotated-1"))
	if len(c.clients) != 2 {
		t.Fatalf("%d clients cached, want 2", len(c.clients))
	}
	waitOpen(t, open, 2, "two clients in use")

	// Rotated again: nobody uses the "rotated-1" client any more.
	fetchOnce(t, c, "ns/one", spec, withToken(sec, "rotated-2"))
	if len(c.clients) != 2 {
		t.Fatalf("%d clients cached after a second rotation, want 2 (the unused one dropped)", len(c.clients))
	}
	waitOpen(t, open, 2, "the dropped client's idle connection closed")

	c.Forget("ns/two")
	waitOpen(t, open, 1, "ns/two forgotten")
	c.Forget("ns/one")
	waitOpen(t, open, 0, "every resource forgotten")
	if len(c.clients) != 0 {
		t.Fatalf("%d clients cached after every resource was forgotten", len(c.clients))
	}

	// A spec that became unusable releases the client it replaced.
	fetchOnce(t, c, "ns/three", spec, sec)
	if _, err := c.Client("ns/three", spec, resolvedSecrets{ca: []byte("not a certificate")}); err == nil {
		t.Fatal("an unusable CA bundle was accepted")
	}
	if len(c.clients) != 0 {
		t.Fatalf("%d clients cached after the only user's spec became unusable", len(c.clients))
	}
	waitOpen(t, open, 0, "the replaced client's connection closed")
}

// TestConnections_RequestTimeoutIsTheClients: spec.source.requestTimeout is
// fixed in a client when it is built, so a changed timeout gets its own
// client (the old one dropped with its connection once unused), and
// resources that differ only by it do not share one.
func TestConnections_RequestTimeoutIsTheClients(t *testing.T) {
	spec, sec, open := memberWithConnCount(t)
	c := &Connections{}
	long := *spec
	long.RequestTimeout = &metav1.Duration{Duration: 10 * time.Minute}

	a := fetchOnce(t, c, "ns/one", spec, sec)
	if b := fetchOnce(t, c, "ns/two", &long, sec); a == b {
		t.Fatal("resources with different request timeouts share one client")
	}
	waitOpen(t, open, 2, "one client per timeout")
	if again := fetchOnce(t, c, "ns/one", &long, sec); again == a {
		t.Fatal("a changed request timeout kept the client built with the old one")
	}
	if len(c.clients) != 1 {
		t.Fatalf("%d clients cached, want 1 (the default-timeout client is unused)", len(c.clients))
	}
	waitOpen(t, open, 1, "the unused client's connection closed")
}

// TestConnections_TokenOverHTTPRefused: a bearer token is never sent over
// plain http, even for a resource the API server stored before the CRD
// refused it: the client is not built and the spec is reported invalid.
func TestConnections_TokenOverHTTPRefused(t *testing.T) {
	c := &Connections{}
	plain := &recoveryv1.SourceSpec{URL: "http://member-0.exchange.svc:8090"}
	_, err := c.Client("ns/one", plain, resolvedSecrets{token: "secret-token-123"})
	var inv *catchup.InvalidSpecError
	if !errors.As(err, &inv) || !strings.Contains(inv.Msg, "requires an https:// url") || strings.Contains(inv.Msg, "secret-token-123") {
		t.Fatalf("err = %v, want an invalid spec naming the https requirement, without the token", err)
	}
	if len(c.clients) != 0 {
		t.Fatalf("a client was built (%d cached)", len(c.clients))
	}
	// Without a token, http is fine; with https, a token is fine.
	if _, err := c.Client("ns/one", plain, resolvedSecrets{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client("ns/two", &recoveryv1.SourceSpec{URL: "https://member-0.exchange.svc:8443"}, resolvedSecrets{token: "secret-token-123"}); err != nil {
		t.Fatal(err)
	}
}

// schemaChecks counts the schema step's statements on a pool.
type schemaChecks struct{ n atomic.Int64 }

func (s *schemaChecks) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "to_regclass") || strings.Contains(d.SQL, "projection-recovery:migrate") {
		s.n.Add(1)
	}
	return ctx
}

func (s *schemaChecks) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func recoveryTableCount(t *testing.T, dsn string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM information_schema.tables
WHERE table_schema = current_schema() AND table_name LIKE 'projection\_catchup\_%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConnections_SchemaStepOncePerPool (NFR-APR01): Store runs the schema
// step when it hands out a pool. With auto-recovery off, a database without
// recovery's tables is a SCHEMA_MISSING refusal and nothing is created; the
// check is not cached, so it passes once the tables exist. With
// auto-recovery on the tables are created. Success is cached per pool: later
// calls run no schema statement.
func TestConnections_SchemaStepOncePerPool(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDSN(t)
	checks := &schemaChecks{}
	off := &Connections{Tracer: checks}
	defer func() { _ = off.ReleaseAll(ctx, "nobody") }()

	for i := 0; i < 2; i++ {
		_, err := off.Store(ctx, "ns/one", dsn)
		if code := codes.Of(err); code != codes.SchemaMissing {
			t.Fatalf("call %d: code %q (err %v), want SCHEMA_MISSING", i+1, code, err)
		}
	}
	if n := checks.n.Load(); n != 2 {
		t.Fatalf("%d schema checks for two calls, want 2 (a failure is not cached)", n)
	}
	if n := recoveryTableCount(t, dsn); n != 0 {
		t.Fatalf("auto-recovery off created %d tables", n)
	}

	on := &Connections{ApplySchema: true}
	defer func() { _ = on.ReleaseAll(ctx, "nobody") }()
	if _, err := on.Store(ctx, "ns/one", dsn); err != nil {
		t.Fatalf("auto-recovery on: %v", err)
	}
	if n := recoveryTableCount(t, dsn); n != 4 {
		t.Fatalf("auto-recovery on: %d recovery tables, want 4", n)
	}

	// The off manager's next call finds the tables; later calls do not check again.
	st, err := off.Store(ctx, "ns/one", dsn)
	if err != nil {
		t.Fatalf("after the tables were created: %v", err)
	}
	before := checks.n.Load()
	for i := 0; i < 3; i++ {
		if _, err := off.Store(ctx, "ns/two", dsn); err != nil {
			t.Fatal(err)
		}
	}
	if n := checks.n.Load() - before; n != 0 {
		t.Fatalf("%d schema statements after the step succeeded, want 0 (cached per pool)", n)
	}
	if _, err := st.ReadCursor(ctx, "any"); err != nil {
		t.Fatal(err)
	}
}

// TestConnections_UnreachableDatabaseIsUnavailable: a database that cannot
// be reached fails the schema step as DATABASE_UNAVAILABLE (RETRYING), not
// as a missing schema, and never leaks the DSN's password.
func TestConnections_UnreachableDatabaseIsUnavailable(t *testing.T) {
	c := &Connections{}
	defer func() { _ = c.ReleaseAll(context.Background(), "nobody") }()
	_, err := c.Store(context.Background(), "ns/one", "postgres://app:pw-s3cr3t@127.0.0.1:1/db?connect_timeout=2")
	if code := codes.Of(err); code != codes.DatabaseUnavailable {
		t.Fatalf("code %q (err %v), want DATABASE_UNAVAILABLE", code, err)
	}
	if _, err := c.Store(context.Background(), "ns/one", "host=127.0.0.1 port=notaport password=pw-s3cr3t"); codes.Of(err) != codes.DatabaseUnavailable || strings.Contains(err.Error(), "pw-s3cr3t") {
		t.Fatalf("unparsable DSN: %v", err)
	}
}

// TestConnections_NothingOpensAfterShutdown: the manager's shutdown (Close;
// ReleaseAll for the recovery controller) closes every pool and every
// client's idle connection, and a reconcile still in flight afterwards is
// refused a pool (DATABASE_UNAVAILABLE) instead of opening one that nobody
// would close.
func TestConnections_NothingOpensAfterShutdown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		shutdown func(*Connections) error
	}{
		{"Close", func(c *Connections) error { c.Close(); return nil }},
		{"ReleaseAll", func(c *Connections) error { return c.ReleaseAll(context.Background(), "nobody") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := pgtest.NewDSN(t)
			spec, sec, open := memberWithConnCount(t)
			c := &Connections{ApplySchema: true} // a fresh database: the schema step creates recovery's tables
			st, err := c.Store(ctx, "ns/one", dsn)
			if err != nil {
				t.Fatal(err)
			}
			fetchOnce(t, c, "ns/one", spec, sec)
			waitOpen(t, open, 1, "one client in use")

			if err := tc.shutdown(c); err != nil {
				t.Fatal(err)
			}
			if err := st.Pool().Ping(ctx); err == nil {
				t.Fatal("the pool is still open after shutdown")
			}
			waitOpen(t, open, 0, "the client's idle connection closed at shutdown")
			if _, err := c.Store(ctx, "ns/one", dsn); codes.Of(err) != codes.DatabaseUnavailable {
				t.Fatalf("Store after shutdown: %v, want DATABASE_UNAVAILABLE", err)
			}
			if len(c.stores) != 0 {
				t.Fatalf("%d pools open after shutdown", len(c.stores))
			}
		})
	}
}
