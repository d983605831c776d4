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

// Command replaycheck is `make e2e`'s proof of CURRENT on the node: every
// position of the scope in the profile's PostgreSQL equals an independent
// replay of the member's whole log (storetest.VerifyAgainstSource, the
// demo's check). It prints the line the e2e script greps for.
//
//	replaycheck --member http://10.96.0.12:8090 --dsn postgres://... --scope local
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

func main() {
	member := flag.String("member", "", "the member's base URL")
	dsn := flag.String("dsn", "", "the projection's PostgreSQL DSN")
	scope := flag.String("scope", "local", "the projection scope")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after")
	flag.Parse()
	if *member == "" || *dsn == "" {
		fmt.Fprintln(os.Stderr, "replaycheck: --member and --dsn are required")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	keys, err := check(ctx, *member, *dsn, *scope)
	if err != nil {
		fmt.Fprintln(os.Stderr, "replaycheck:", err)
		os.Exit(1)
	}
	fmt.Printf("==> all %d position keys equal an independent replay of the member's log\n", keys)
}

func check(ctx context.Context, member, dsn, scope string) (int, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return 0, fmt.Errorf("connecting to the projection: %w", err)
	}
	defer pool.Close()
	return storetest.VerifyAgainstSource(ctx, member, pool, scope)
}
