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

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
)

// Found by the fault soak (seed 728019442): after an immediate restart an
// order's version went from 5 back to 2, because the soak's cluster ran with
// synchronous_commit=off and lost commits it had acknowledged. A cluster
// started with synchronous_commit=on keeps every acknowledged commit through
// Restart (a crash as its clients see it), as a production server does.
func TestCluster_RestartKeepsAcknowledgedCommits(t *testing.T) {
	c, err := pgtest.StartCluster("synchronous_commit=on")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	var setting string
	if err := conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&setting); err != nil || setting != "on" {
		t.Fatalf("synchronous_commit = %q (%v), want on: the setting did not override the default", setting, err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE v (n int)"); err != nil {
		t.Fatal(err)
	}
	const commits = 500
	for i := 1; i <= commits; i++ {
		if _, err := conn.Exec(ctx, "INSERT INTO v VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
	}
	_ = conn.Close(ctx)
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, c.DSN)
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM v").Scan(&n); err != nil || n != commits {
		t.Fatalf("%d of %d acknowledged commits survived the restart (%v)", n, commits, err)
	}
}
