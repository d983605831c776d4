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

package pgtest_test

import (
	"context"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.MainLeakChecked(m) }

// Each test gets its own database: a table created in one is absent in another.
func TestIsolatedDatabases(t *testing.T) {
	ctx := context.Background()
	a := pgtest.Pool(t, pgtest.NewDSN(t))
	b := pgtest.Pool(t, pgtest.NewDSN(t))
	if _, err := a.Exec(ctx, `CREATE TABLE only_in_a (x int)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database b sees a's table")
	}
}

func TestWithDatabase(t *testing.T) {
	got, err := pgtest.WithDatabase("postgres://u@127.0.0.1:5/postgres?sslmode=disable", "x")
	if err != nil || got != "postgres://u@127.0.0.1:5/x?sslmode=disable" {
		t.Fatalf("got %q %v", got, err)
	}
	if got, _ := pgtest.WithDatabase("host=h port=5", "x"); got != "host=h port=5 dbname=x" {
		t.Fatalf("got %q", got)
	}
}
