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

// Package pgtest gives every test its own database on a real PostgreSQL server.
//
// Tests never mock PostgreSQL and never skip because it is missing: the
// server of PROJECTION_TEST_DSN (hack/postgres.sh run -- go test ...) is used,
// or else a throwaway cluster the binary's first test starts (initdb + pg_ctl,
// as `postgres` when root, random loopback port, durability off) and Main
// stops. Each NewDB/NewDSN call creates a fresh database test_<random>,
// dropped on cleanup, so tests are isolated and may run in parallel.
//
// NewDB gives the database its schema and the roles of docs/database-role.md
// with exactly the documented grants (roles.go): the operator's code under
// test connects as projection_recovery (or projection_recovery_readonly), so
// a statement needing more than the document grants fails its test. Only the
// trade-processor's side (seeding projection_runs, live writes) and
// migration tests connect as the admin.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names the environment variable holding an administrative DSN of an
// already running server (set by hack/postgres.sh run).
const EnvDSN = "PROJECTION_TEST_DSN"

var (
	once     sync.Once
	adminDSN string
	startErr error
	cluster  *Cluster
)

// Main runs the tests and stops the cluster this binary started, if any. Use it
// from TestMain: func TestMain(m *testing.M) { pgtest.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	Shutdown()
	os.Exit(code)
}

// AdminDSN returns the DSN of the shared server's maintenance database, starting
// the server on first use. It fails the test (never skips) if it cannot.
func AdminDSN(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		if dsn := os.Getenv(EnvDSN); dsn != "" {
			adminDSN = dsn
			return
		}
		cluster, startErr = StartCluster()
		if startErr == nil {
			adminDSN = cluster.DSN
		}
	})
	if startErr != nil {
		t.Fatalf("pgtest: cannot start PostgreSQL (install the Debian postgresql package or set %s): %v", EnvDSN, startErr)
	}
	return adminDSN
}

// NewDSN creates a fresh, empty database for this test and returns its admin
// (superuser) DSN. The database is dropped (WITH FORCE) when the test ends.
// For a database with the schema and the documented roles, use NewDB.
func NewDSN(t testing.TB) string {
	t.Helper()
	admin := AdminDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("pgtest: random name: %v", err)
	}
	name := "test_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", redact(admin), err)
	}
	defer conn.Close(ctx)
	// An identifier cannot be a bind parameter; the name is generated here and
	// quoted with pgx.Identifier, never taken from input.
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("pgtest: connect to drop %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	dsn, err := WithDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// WithDatabase returns dsn with its database replaced by name. It accepts URL
// DSNs (postgres://...) and keyword/value DSNs (a later dbname= wins).
func WithDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse dsn: %w", err)
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	return dsn + " dbname=" + name, nil
}

func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
