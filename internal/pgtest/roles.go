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

package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The database roles of docs/database-role.md. Tests connect as them so that
// the documented grants are proven sufficient: an operator statement needing
// more fails its test with "permission denied".
const (
	// MigratorRole runs `manager migrate` and owns recovery's tables.
	MigratorRole = "projection_recovery_migrator"
	// RecoveryRole is the manager's role with auto-recovery on.
	RecoveryRole = "projection_recovery"
	// ReadOnlyRole is the manager's role with auto-recovery off.
	ReadOnlyRole = "projection_recovery_readonly"
	// ReconciliationRole applies approved reconciliation repairs: the
	// runtime role's grants plus DELETE on the projection tables and the
	// quarantine tables (recovery itself never deletes a projection row).
	ReconciliationRole = "projection_reconciliation"
)

// DocDatabase is the database name the statements of docs/database-role.md
// use; each test substitutes its own database.
const DocDatabase = "projection"

// The statements of docs/database-role.md, verbatim and in its order
// (TestDatabaseRoleDoc_StatementsAreTheOnesTestsApply keeps them equal). A
// change to the grants is a change to this list and to the document.
var (
	// RoleStatements create the roles, once per cluster (as a superuser or a
	// role with CREATEROLE). Tests use trust authentication, so no password.
	RoleStatements = []string{
		"CREATE ROLE projection_recovery_migrator LOGIN;",
		"CREATE ROLE projection_recovery LOGIN;",
		"CREATE ROLE projection_recovery_readonly LOGIN;",
		"CREATE ROLE projection_reconciliation LOGIN;",
	}
	// HardeningStatements remove PUBLIC's default database and schema rights
	// (optional in production, always applied in tests so that nothing the
	// operator does can lean on them).
	HardeningStatements = []string{
		"REVOKE ALL ON DATABASE projection FROM PUBLIC;",
		"REVOKE ALL ON SCHEMA public FROM PUBLIC;",
	}
	// DatabaseStatements grant access to the database and its schema (as the
	// database owner, before `manager migrate`).
	DatabaseStatements = []string{
		"GRANT CONNECT ON DATABASE projection TO projection_recovery_migrator;",
		"GRANT CONNECT, TEMPORARY ON DATABASE projection TO projection_recovery;",
		"GRANT CONNECT ON DATABASE projection TO projection_recovery_readonly;",
		"GRANT USAGE, CREATE ON SCHEMA public TO projection_recovery_migrator;",
		"GRANT USAGE ON SCHEMA public TO projection_recovery, projection_recovery_readonly;",
		"GRANT CONNECT, TEMPORARY ON DATABASE projection TO projection_reconciliation;",
		"GRANT USAGE ON SCHEMA public TO projection_reconciliation;",
	}
	// BaseTableStatements grant on the trade-processor's tables (as their owner).
	// UPDATE (updated_at) is not for writing: a page re-reads the selected
	// run FOR SHARE (FR-APR09: the trade-processor cannot seal or deselect it
	// until the page commits), and PostgreSQL allows a row lock only with
	// UPDATE on at least one column. One harmless column, not phase,
	// selected, descriptor or checkpoints (TestRole_RecoveryCannotChangeRuns).
	BaseTableStatements = []string{
		"GRANT SELECT ON projection_runs TO projection_recovery;",
		"GRANT UPDATE (updated_at) ON projection_runs TO projection_recovery;",
		"GRANT SELECT, INSERT, UPDATE ON trades, orders, order_events, positions TO projection_recovery;",
		"GRANT SELECT ON projection_runs, trades, orders, order_events, positions TO projection_recovery_readonly;",
		"GRANT SELECT ON projection_runs TO projection_reconciliation;",
		"GRANT UPDATE (updated_at) ON projection_runs TO projection_reconciliation;",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON trades, orders, order_events, positions TO projection_reconciliation;",
	}
	// RecoveryTableStatements grant on recovery's own tables (as
	// projection_recovery_migrator, their owner, after `manager migrate`).
	RecoveryTableStatements = []string{
		"GRANT SELECT, INSERT, UPDATE, DELETE ON projection_catchup_cursor, projection_catchup_lease, projection_catchup_basis, projection_catchup_outbox TO projection_recovery;",
		"GRANT SELECT ON projection_recovery_schema_version TO projection_recovery;",
		"GRANT SELECT ON projection_catchup_cursor, projection_catchup_lease, projection_recovery_schema_version TO projection_recovery_readonly;",
		// Migration 2 (reconciliation): the read-only role reads what detection
		// reads; runs are upserted per transition. Journal and audit are
		// append-only and only the repair role writes them: a rollback reverts,
		// as that role, what their rows say (migration 6; RollbackRun).
		"GRANT SELECT ON projection_catchup_basis, projection_catchup_outbox TO projection_recovery_readonly;",
		"GRANT SELECT, INSERT, UPDATE ON projection_reconciliation_runs TO projection_recovery;",
		"GRANT SELECT ON projection_reconciliation_journal, projection_reconciliation_audit TO projection_recovery;",
		"GRANT SELECT ON projection_reconciliation_runs, projection_reconciliation_journal, projection_reconciliation_audit TO projection_recovery_readonly;",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON projection_catchup_cursor, projection_catchup_lease, projection_catchup_basis, projection_catchup_outbox TO projection_reconciliation;",
		"GRANT SELECT, INSERT, DELETE ON projection_trade_quarantine, projection_position_quarantine TO projection_reconciliation;",
		"GRANT SELECT ON projection_recovery_schema_version TO projection_reconciliation;",
		"GRANT SELECT, INSERT, UPDATE ON projection_reconciliation_runs TO projection_reconciliation;",
		"GRANT SELECT, INSERT ON projection_reconciliation_journal, projection_reconciliation_audit TO projection_reconciliation;",
	}
)

// DB is one test's fresh database and a DSN for each role on it.
type DB struct {
	Name string
	// Admin is the cluster's superuser: the trade-processor (owner of the
	// base tables, writer of projection_runs) and the test's god view for
	// seeding and asserting. Never the operator.
	Admin string
	// Migrator is projection_recovery_migrator, the owner of recovery's tables.
	Migrator string
	// Recovery is projection_recovery: what a manager with auto-recovery on connects as.
	Recovery string
	// ReadOnly is projection_recovery_readonly: a manager with auto-recovery off.
	ReadOnly string
	// Reconciliation is projection_reconciliation: an approved
	// reconciliation apply (internal/reconstore's handlers).
	Reconciliation string
}

// Setup creates a test database's schema the way production gets it. It
// lives with the caller because the schema is the store's (pgtest cannot
// import the store: the store's tests import pgtest).
type Setup struct {
	// Base creates the trade-processor's tables, connected as Admin (their owner).
	Base func(ctx context.Context, adminDSN string) error
	// Migrate applies recovery's migrations, connected as the migrator role
	// (proving the documented migrator grants suffice).
	Migrate func(ctx context.Context, migratorDSN string) error
}

// NewDB creates a fresh database, applies the documented hardening and
// database grants, runs setup.Base as the admin and setup.Migrate as the
// migrator, then applies the documented table grants: the base tables' as
// the admin, recovery's tables' as the migrator (their owner). The database
// is dropped when the test ends.
func NewDB(t testing.TB, setup Setup) DB {
	t.Helper()
	if setup.Base == nil || setup.Migrate == nil {
		t.Fatal("pgtest: NewDB needs Setup.Base and Setup.Migrate (use NewDSN for an empty database)")
	}
	admin := NewDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ensureRoles(t)
	db, err := provision(ctx, admin, setup)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return db
}

// Provision is NewDB's bring-up outside a test (the demo, the soak) on a
// database that exists: the documented roles (created when missing), then
// the hardening, grants, base schema and migrations as NewDB applies them.
// adminDSN is a superuser's postgres:// URL on that database; the database
// is the caller's to drop.
func Provision(ctx context.Context, adminDSN string, setup Setup) (DB, error) {
	if setup.Base == nil || setup.Migrate == nil {
		return DB{}, errors.New("pgtest: Provision needs Setup.Base and Setup.Migrate")
	}
	if err := createRoles(ctx, adminDSN); err != nil {
		return DB{}, fmt.Errorf("pgtest: creating roles: %w", err)
	}
	db, err := provision(ctx, adminDSN, setup)
	if err != nil {
		return DB{}, fmt.Errorf("pgtest: %w", err)
	}
	return db, nil
}

// CreateDatabase creates database name on the server adminDSN reaches and
// returns adminDSN on it. The name is quoted, never spliced as text.
func CreateDatabase(ctx context.Context, adminDSN, name string) (string, error) {
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return "", fmt.Errorf("pgtest: connect to %s: %w", redact(adminDSN), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return WithDatabase(adminDSN, name)
}

// provision applies the grants, schema and migrations to the database
// admin names (the roles exist).
func provision(ctx context.Context, admin string, setup Setup) (DB, error) {
	db := DB{Admin: admin}
	u, err := url.Parse(admin)
	if err != nil {
		return DB{}, fmt.Errorf("parse admin dsn: %w", err)
	}
	db.Name = strings.TrimPrefix(u.Path, "/")
	for role, dst := range map[string]*string{MigratorRole: &db.Migrator, RecoveryRole: &db.Recovery, ReadOnlyRole: &db.ReadOnly, ReconciliationRole: &db.Reconciliation} {
		if *dst, err = WithUser(admin, role); err != nil {
			return DB{}, err
		}
	}
	var dbStatements []string
	for _, list := range [][]string{HardeningStatements, DatabaseStatements} {
		for _, s := range list {
			dbStatements = append(dbStatements, forDatabase(s, db.Name))
		}
	}
	steps := []struct {
		what string
		run  func() error
	}{
		{"database grants (admin)", func() error { return execAll(ctx, admin, dbStatements) }},
		{"base schema (admin)", func() error { return setup.Base(ctx, admin) }},
		{"migrations (" + MigratorRole + ")", func() error { return setup.Migrate(ctx, db.Migrator) }},
		{"base table grants (admin)", func() error { return execAll(ctx, admin, BaseTableStatements) }},
		{"recovery table grants (" + MigratorRole + ")", func() error { return execAll(ctx, db.Migrator, RecoveryTableStatements) }},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			return DB{}, fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return db, nil
}

// Pool opens a pool on dsn, closed when the test ends.
func Pool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("pgtest: parse dsn: %v", err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// WithUser returns the URL dsn connecting as user instead (same server,
// database and options; no password: the test cluster trusts loopback).
func WithUser(dsn, user string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("a role DSN needs a postgres:// URL DSN in %s", EnvDSN)
	}
	u.User = url.User(user)
	return u.String(), nil
}

// forDatabase puts the test's database name where the document says
// "DATABASE projection". The name is generated by NewDSN and quoted.
func forDatabase(stmt, name string) string {
	return strings.Replace(stmt, "DATABASE "+DocDatabase+" ", "DATABASE "+pgx.Identifier{name}.Sanitize()+" ", 1)
}

func execAll(ctx context.Context, dsn string, stmts []string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

var rolesOnce sync.Once
var rolesErr error

// ensureRoles creates the roles once per test binary.
func ensureRoles(t testing.TB) {
	t.Helper()
	admin := AdminDSN(t)
	rolesOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rolesErr = createRoles(ctx, admin)
	})
	if rolesErr != nil {
		t.Fatalf("pgtest: creating roles: %v", rolesErr)
	}
}

// createRoles creates the documented roles that do not exist yet. Roles are
// cluster-wide and several test binaries share one cluster (hack/postgres.sh
// run), so another binary creating the same role at the same moment is
// expected and not an error.
func createRoles(ctx context.Context, admin string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, s := range RoleStatements {
		_, err := conn.Exec(ctx, s)
		var pgErr *pgconn.PgError
		// 42710 duplicate_object: exists already; 23505: created concurrently.
		if err != nil && !(errors.As(err, &pgErr) && (pgErr.Code == "42710" || pgErr.Code == "23505")) {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}
