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

// Package recoverydb gives a test a database built as production has it:
// the trade-processor's tables created by their owner, recovery's migrations
// applied as projection_recovery_migrator, and the roles of
// docs/database-role.md with exactly their grants (pgtest.NewDB with the
// store's schema). The store's own tests cannot import it (it imports the
// store) and build the same Setup in their helpers. Create does the same
// outside a test (the demo, the soak).
package recoverydb

import (
	"context"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// Setup creates the base tables (store.EnsureBaseSchema) and applies
// recovery's migrations (store.Migrate).
var Setup = pgtest.Setup{
	Base:    func(ctx context.Context, dsn string) error { return with(ctx, dsn, (*store.Store).EnsureBaseSchema) },
	Migrate: func(ctx context.Context, dsn string) error { return with(ctx, dsn, (*store.Store).Migrate) },
}

// New returns a fresh database with the schema and a DSN per role.
func New(t testing.TB) pgtest.DB {
	t.Helper()
	return pgtest.NewDB(t, Setup)
}

// Create creates database name on the server serverDSN (a superuser's
// postgres:// URL) reaches and brings it up as New does: the store bring-up
// of the demo and the soak, which run outside a test.
func Create(ctx context.Context, serverDSN, name string) (pgtest.DB, error) {
	admin, err := pgtest.CreateDatabase(ctx, serverDSN, name)
	if err != nil {
		return pgtest.DB{}, err
	}
	return pgtest.Provision(ctx, admin, Setup)
}

func with(ctx context.Context, dsn string, f func(*store.Store, context.Context) error) error {
	s, err := store.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer s.Close()
	return f(s, ctx)
}
