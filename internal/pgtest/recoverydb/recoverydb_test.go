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

package recoverydb_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
)

func TestMain(m *testing.M) { pgtest.MainLeakChecked(m) }

// TestCreate: the demo's and the soak's bring-up gives a database what New
// gives a test (schema, roles, documented grants), also on a server whose
// roles exist already (a second database, or a cluster a test binary
// provisioned before).
func TestCreate(t *testing.T) {
	server := pgtest.AdminDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, round := range []string{"first", "roles exist"} {
		t.Run(round, func(t *testing.T) {
			var b [6]byte
			if _, err := rand.Read(b[:]); err != nil {
				t.Fatal(err)
			}
			name := "create_" + hex.EncodeToString(b[:])
			db, err := recoverydb.Create(ctx, server, name)
			t.Cleanup(func() { drop(t, server, name) })
			if err != nil {
				t.Fatal(err)
			}
			if db.Name != name {
				t.Fatalf("database %q, want %q", db.Name, name)
			}
			cases := []struct {
				role, dsn, stmt string
				refused         bool
			}{
				{"recovery reads its cursor", db.Recovery, `SELECT count(*) FROM projection_catchup_cursor`, false},
				{"recovery reads the runs", db.Recovery, `SELECT count(*) FROM projection_runs`, false},
				{"read-only cannot write a cursor", db.ReadOnly, `DELETE FROM projection_catchup_cursor`, true},
				{"recovery never deletes a trade", db.Recovery, `DELETE FROM trades`, true},
				{"reconciliation may delete a trade", db.Reconciliation, `DELETE FROM trades`, false},
			}
			for _, c := range cases {
				err := exec(ctx, c.dsn, c.stmt)
				if refused := err != nil && strings.Contains(err.Error(), "permission denied"); refused != c.refused || (err != nil && !refused) {
					t.Errorf("%s: %s: %v", c.role, c.stmt, err)
				}
			}
		})
	}
}

func exec(ctx context.Context, dsn, stmt string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, stmt)
	return err
}

func drop(t *testing.T, server, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := exec(ctx, server, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Errorf("drop %s: %v", name, err)
	}
}
