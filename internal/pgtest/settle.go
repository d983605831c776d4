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
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// settleQuietFor bounds how long Settle waits for running autovacuum workers.
const settleQuietFor = 2 * time.Minute

// Settle leaves the cluster quiet before a benchmark starts its clock: each
// database in written (admin DSNs of the databases earlier phases wrote) is
// vacuumed and analyzed, a CHECKPOINT writes out the buffers they dirtied,
// and Settle waits until no autovacuum worker runs. Without it a timed phase
// also pays for the phase before it: autovacuum starts on the millions of
// rows that phase inserted and the checkpointer writes its dirty pages while
// the clock runs, so a ratio (a catch-up against the COPY that follows it,
// t(4N)/t(N)) moves with whatever ran just before. It changes nothing a
// phase does, only when the previous phase's background work is done.
func Settle(tb testing.TB, written ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, dsn := range written {
		if err := execAll(ctx, dsn, []string{"VACUUM (ANALYZE)"}); err != nil {
			tb.Fatalf("pgtest: settle: %s: %v", redact(dsn), err)
		}
	}
	admin := AdminDSN(tb)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		tb.Fatalf("pgtest: settle: connect %s: %v", redact(admin), err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		tb.Fatalf("pgtest: settle: CHECKPOINT: %v", err)
	}
	deadline := time.Now().Add(settleQuietFor)
	for {
		var workers int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'`).Scan(&workers); err != nil {
			tb.Fatalf("pgtest: settle: %v", err)
		}
		if workers == 0 {
			return
		}
		if time.Now().After(deadline) {
			// Noise in a figure, not a wrong one: say so and go on.
			tb.Logf("pgtest: settle: %d autovacuum workers still running after %v", workers, settleQuietFor)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
