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
	"time"

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

// TestSettle: after Settle, the rows a phase wrote leave autovacuum nothing
// to do (vacuumed and analyzed, no modification since) and no autovacuum
// worker runs, so the next timed phase does not pay for them.
func TestSettle(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDSN(t)
	p := pgtest.Pool(t, dsn)
	if _, err := p.Exec(ctx, `CREATE TABLE written AS SELECT g AS x FROM generate_series(1, 50000) g`); err != nil {
		t.Fatal(err)
	}
	pgtest.Settle(t, dsn)
	var vacuumed, analyzed bool
	var modified int64
	for i := 0; i < 50; i++ { // the statistics of VACUUM arrive asynchronously
		if err := p.QueryRow(ctx, `SELECT last_vacuum IS NOT NULL, last_analyze IS NOT NULL, n_mod_since_analyze
FROM pg_stat_user_tables WHERE relname = 'written'`).Scan(&vacuumed, &analyzed, &modified); err != nil {
			t.Fatal(err)
		}
		if vacuumed && analyzed && modified == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !vacuumed || !analyzed || modified != 0 {
		t.Fatalf("after Settle: vacuumed %v, analyzed %v, %d rows modified since", vacuumed, analyzed, modified)
	}
	var workers int
	if err := p.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'`).Scan(&workers); err != nil {
		t.Fatal(err)
	}
	if workers > 1 { // one may have started since; Settle waited for those that ran
		t.Fatalf("%d autovacuum workers right after Settle", workers)
	}
}
