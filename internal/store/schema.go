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

	"github.com/projection-recovery/projection-recovery/internal/codes"
)

// EnsureSchema makes sure recovery's own tables are present (NFR-APR01).
// With apply (auto-recovery on) it applies what is missing; without, it
// writes nothing and answers a SCHEMA_MISSING refusal when recovery's tables
// are absent, so a read-only manager reports the fact instead of failing
// every statement with "relation does not exist".
func (s *Store) EnsureSchema(ctx context.Context, apply bool) error {
	if apply {
		return s.Migrate(ctx)
	}
	var present bool
	err := s.pool.QueryRow(ctx, `SELECT to_regclass('projection_catchup_cursor') IS NOT NULL AND to_regclass('projection_catchup_lease') IS NOT NULL`).Scan(&present)
	if err != nil {
		return dbErr("store: schema check", err)
	}
	if !present {
		return refuse(codes.SchemaMissing, "recovery's tables are missing; run `manager migrate` or enable auto-recovery")
	}
	return nil
}
