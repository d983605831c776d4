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
	"time"

	"github.com/jackc/pgx/v5"
)

// hooks are the store's one test-hook mechanism: the zero value, which
// production never changes, runs nothing. In-package tests set fields of
// Store.hooks to interleave deterministically with a page transaction
// (FR-APR08 fence test, database loss mid-page) or to switch an
// optimisation off and compare with the behaviour it must reproduce.
type hooks struct {
	// Stops in a slice's transaction, in order (applyTx): around the lease
	// check (step 3), after the first read of the run (step 4), and once
	// the cursor has moved (step 8), before COMMIT.
	beforeLeaseLock  pageHook
	afterLeaseLocked pageHook
	afterRunRead     pageHook
	beforeCommit     pageHook
	// commit replaces tx.Commit of a page (e.g. to lose the connection
	// while COMMIT is in flight); outcomeTimeout, when set, bounds the
	// re-read that decides a failed commit's outcome (commitOutcomeTimeout).
	commit         pageHook
	outcomeTimeout time.Duration
	// foldAll turns deferral off: every slice folds every key in full
	// (deferred.go), the behaviour deferral must reproduce.
	foldAll bool
	// probeAll turns the unprobed first attempt off: every slice probes
	// every page row its window did not show (page_unprobed.go).
	probeAll bool
	// currentProbes, when set, is told how many current orders rows each
	// slice attempt probes outside the full probe (page_unprobed.go).
	currentProbes func(n int)
}

// pageHook is one stop of a test in a page transaction; nil runs nothing.
type pageHook func(ctx context.Context, tx pgx.Tx) error

func (h pageHook) run(ctx context.Context, tx pgx.Tx) error {
	if h == nil {
		return nil
	}
	return h(ctx, tx)
}
