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

package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"

	"github.com/projection-recovery/projection-recovery/internal/codes"
)

// Recovery's own schema (NFR-APR01) is versioned: numbered goose migrations
// embedded from migrations/, recorded in a version table of recovery's own.
// The trade-processor's base tables are not recovery's and never a migration
// (EnsureBaseSchema is a test and demo fixture).
//
// Decisions, each of which a later migration must keep:
//   - Forward only. Migrations are additive and rerunnable (IF NOT EXISTS,
//     never DROP/ALTER/DELETE of existing data), carry no Down section, and
//     nothing here ever runs one: an older binary meeting a newer schema must
//     not downgrade it, because a newer manager may be running on it.
//   - A schema NEWER than this binary is accepted (additive migrations leave
//     every table an older binary uses as it was) and logged once per Store;
//     `manager migrate --status` reports it.
//   - A schema OLDER than this binary (or with a gap) is SCHEMA_MISSING with
//     apply=false: the manager writes nothing and says to run `manager migrate`.

//go:embed migrations/*.sql
var migrationFiles embed.FS

// VersionTable records which of recovery's migrations a database has. It is
// recovery's own (not goose's default goose_db_version) so that a
// trade-processor using goose for its own schema on the same database keeps
// its history apart.
const VersionTable = "projection_recovery_schema_version"

// migrationLockID keys the PostgreSQL session advisory lock that serialises
// concurrent migrators (two managers starting together, or a manager and a
// DBA's `manager migrate`). It is ASCII "precover", deliberately not goose's
// default lock id, so a trade-processor migrating its own schema with goose
// neither blocks nor is blocked by recovery.
const migrationLockID int64 = 0x7072_6563_6f76_6572

// SchemaVersion compares recovery's schema in a database with the migrations
// this binary carries.
type SchemaVersion struct {
	// Current is the highest migration version applied in the database (0:
	// none, including a database without the version table, even when a
	// release before versioned migrations created recovery's tables by hand).
	Current int64
	// Required is the latest migration version this binary carries.
	Required int64
	// Pending lists this binary's migrations not applied in the database,
	// ascending. Usually those above Current; a lower one is a gap.
	Pending []int64
}

// Missing reports that this binary needs migrations the database lacks.
func (v SchemaVersion) Missing() bool { return len(v.Pending) > 0 }

// Newer reports a database migrated by a newer binary than this one.
func (v SchemaVersion) Newer() bool { return v.Current > v.Required }

// AppliedMigration is one migration applied by ApplyMigrations.
type AppliedMigration struct {
	Version  int64
	Name     string // file name, e.g. 00001_ri06-automatic-recovery.sql
	Duration time.Duration
}

// migrationsFS is migrations/ as the root goose reads.
func migrationsFS() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil { // unreachable: the directory is embedded at build time
		panic(err)
	}
	return sub
}

// KnownMigrations lists the versions of the migrations this binary carries,
// ascending.
func KnownMigrations() []int64 {
	names, err := fs.Glob(migrationsFS(), "*.sql")
	if err != nil { // unreachable: a constant, valid pattern
		panic(err)
	}
	out := make([]int64, 0, len(names))
	for _, n := range names {
		v, err := goose.NumericComponent(n)
		if err != nil { // unreachable: TestMigrations_FilesAreNumbered
			panic(fmt.Sprintf("store: migration %s has no version: %v", n, err))
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// SchemaVersion reads recovery's schema version. It writes nothing: no
// version table is created, no lock is taken (goose's own GetVersions would
// create the table), so a read-only role and apply=false may call it.
func (s *Store) SchemaVersion(ctx context.Context) (SchemaVersion, error) {
	known := KnownMigrations()
	v := SchemaVersion{Required: known[len(known)-1]}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, VersionTable).Scan(&exists); err != nil {
		return v, dbErr("store: schema version", err)
	}
	applied := map[int64]bool{}
	if exists {
		// goose's own reader of its table, so its row layout stays goose's.
		st, err := database.NewStore(goose.DialectPostgres, VersionTable)
		if err != nil {
			return v, fmt.Errorf("store: schema version: %w", err)
		}
		db := stdlib.OpenDBFromPool(s.pool)
		defer db.Close() // returns the connection to the pool; the pool stays open
		rows, err := st.ListMigrations(ctx, db)
		if err != nil {
			return v, dbErr("store: schema version", err)
		}
		// Newest row first: the first row of a version decides whether it is
		// applied (older goose releases recorded a rollback as a new row).
		for _, r := range rows {
			if _, seen := applied[r.Version]; !seen {
				applied[r.Version] = r.IsApplied
			}
		}
	}
	for ver, ok := range applied {
		if ok && ver > v.Current {
			v.Current = ver
		}
	}
	for _, ver := range known {
		if !applied[ver] {
			v.Pending = append(v.Pending, ver)
		}
	}
	return v, nil
}

// Migrate applies recovery's missing migrations (see ApplyMigrations).
func (s *Store) Migrate(ctx context.Context) error {
	_, err := s.ApplyMigrations(ctx)
	return err
}

// ApplyMigrations applies, in order, every migration of this binary that the
// database lacks and returns those it applied (none when current or newer).
// Concurrent callers serialise on a session advisory lock and the later one
// applies nothing. Each migration runs in its own transaction: a failed one
// leaves the database at the previous version. The role needs CREATE on the
// schema (docs/database-role.md).
func (s *Store) ApplyMigrations(ctx context.Context) ([]AppliedMigration, error) {
	// Own connections, not the pool's: the session lock lives as long as its
	// connection, and closing these guarantees it is released even if
	// unlocking failed, where a pooled connection would keep it for ever and
	// block every later migration.
	db := stdlib.OpenDB(*s.pool.Config().ConnConfig.Copy())
	defer db.Close()
	db.SetMaxOpenConns(2)
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(migrationLockID),
		lock.WithLockTimeout(1, 600), // poll every second, give up after 10 minutes
		lock.WithUnlockTimeout(1, 60),
	)
	if err != nil {
		return nil, fmt.Errorf("store: migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrationsFS(),
		goose.WithTableName(VersionTable),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true), // only our embedded files, never Go migrations another import registered
	)
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	results, err := p.Up(ctx)
	var partial *goose.PartialError
	if errors.As(err, &partial) {
		results = partial.Applied
	}
	applied := make([]AppliedMigration, 0, len(results))
	for _, r := range results {
		applied = append(applied, AppliedMigration{Version: r.Source.Version, Name: path.Base(r.Source.Path), Duration: r.Duration})
	}
	if err != nil {
		return applied, dbErr("store: apply migrations", err)
	}
	return applied, nil
}

// EnsureSchema makes sure recovery's schema is at least this binary's
// (NFR-APR01). The schema is the migrate step's (`manager migrate` as the
// schema owner); the runtime roles only get grants. With apply
// (auto-recovery on) and a role that may create tables in the schema (a
// disposable database's superuser, as the demo runs) it applies what is
// missing itself; without apply it writes nothing and answers a SCHEMA_MISSING refusal naming the
// current and required versions, so a read-only manager reports the fact
// instead of failing every statement with "relation does not exist". A role
// that may not create tables gets the same refusal with apply, instead of a
// bare permission error. A newer schema is fine (see the top of this file).
func (s *Store) EnsureSchema(ctx context.Context, apply bool) error {
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if v.Newer() && s.schemaNewerLogged.CompareAndSwap(false, true) {
		logr.FromContextOrDiscard(ctx).Info("recovery's database schema is newer than this manager; running on it (migrations are additive and never downgraded)",
			"schemaVersion", v.Current, "managerSchemaVersion", v.Required)
	}
	if !v.Missing() {
		return nil
	}
	if !apply {
		return refuse(codes.SchemaMissing, "recovery's schema is at version %d, this manager requires %d (pending migrations %v); run `manager migrate` as the schema owner (docs/database-role.md)",
			v.Current, v.Required, v.Pending)
	}
	cannotCreate := func(err error) error {
		return &codes.Refusal{Code: codes.SchemaMissing, Err: err, Detail: fmt.Sprintf(
			"recovery's schema is at version %d, this manager requires %d, and its database role may not create tables; run `manager migrate` as the schema owner (docs/database-role.md)",
			v.Current, v.Required)}
	}
	// Asked first, read-only: the documented runtime role has no CREATE, and
	// letting goose find out would take the migration lock and retry its
	// version table for seconds before failing.
	var canCreate bool
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(has_schema_privilege(current_schema(), 'CREATE'), false)`).Scan(&canCreate); err != nil {
		return dbErr("store: schema privilege check", err)
	}
	if !canCreate {
		return cannotCreate(nil)
	}
	if _, err := s.ApplyMigrations(ctx); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege, e.g. on an existing table
			return cannotCreate(err)
		}
		return err
	}
	return nil
}
