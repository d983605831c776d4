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
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/projection-recovery/projection-recovery/internal/codes"
)

// The unprobed first attempt (FR-APR06; docs/design/page-transaction.md,
// "The unprobed first attempt"). A probe of a page row the window did not
// show can only find a refusal, and every such row would also collide with
// the slice's COPY on its key. So a slice first runs without those probes;
// a refusal or a unique violation rolls it back and it runs again probing
// everything, which names the refusal as a probed slice does. This rests on
// the keys being enforced (keysEnforcedSQL, checked in every slice before a
// probe is skipped): without them a skipped row would be duplicated, not
// refused.

// errUnprobedKey: a COPY of an unprobed slice collided with a retained row
// on a key that a skipped probe would have found; the slice runs again with
// every probe (it never reaches a caller).
var errUnprobedKey = errors.New("store: a retained row holds a key of the unprobed slice")

// keysEnforcedSQL reports whether the keys the unprobed attempt rests on are
// enforced: a unique index whose key columns are exactly the key's (in any
// order; INCLUDE columns do not count), valid, checked at once (not
// deferrable), on every row (no predicate, no expression).
const keysEnforcedSQL = `
SELECT coalesce(bool_or(u.rel = 'trades'::regclass AND u.cols = '{scope,trade_id}'), false)
   AND coalesce(bool_or(u.rel = 'order_events'::regclass AND u.cols = '{order_id,scope,version}'), false)
   AND coalesce(bool_or(u.rel = 'orders'::regclass AND u.cols = '{order_id,scope}'), false)
  FROM (SELECT i.indrelid AS rel,
               ARRAY(SELECT a.attname::text FROM pg_attribute a
                      WHERE a.attrelid = i.indrelid AND a.attnum = ANY ((i.indkey::int2[])[0:i.indnkeyatts - 1])
                      ORDER BY a.attname) AS cols
          FROM pg_index i
         WHERE i.indrelid IN ('trades'::regclass, 'order_events'::regclass, 'orders'::regclass)
           AND i.indisunique AND i.indisvalid AND i.indimmediate AND i.indpred IS NULL AND i.indexprs IS NULL) u`

// unprobed reports whether the slice may skip a probe that can only find a
// refusal: not when told to probe everything, and only over tables whose
// keys are enforced, read once per slice at the first probe it would skip (a
// slice whose window showed every page row reads nothing more). Called only
// from checkTrades and checkOrders, after checkLegacy (see above for why
// there).
func (w *pageTx) unprobed(ctx context.Context) (bool, error) {
	if w.probeAll {
		return false, nil
	}
	if !w.keysRead {
		var enforced bool
		if err := w.tx.QueryRow(ctx, keysEnforcedSQL).Scan(&enforced); err != nil {
			return false, dbErr("store: read the keys of trades, order_events and orders", err)
		}
		w.keysRead, w.probeAll = true, !enforced
	}
	return !w.probeAll, nil
}

// copyErr maps a failed COPY of the slice's missing trades or order versions:
// in a slice that skipped probes, a unique violation is what a probe would
// have found (errUnprobedKey: run again probed); otherwise it is what it is.
func (w *pageTx) copyErr(what string, err error) error {
	var pgErr *pgconn.PgError
	if w.skipped && errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation
		return fmt.Errorf("%w: %s: %w", errUnprobedKey, what, err)
	}
	return dbErr(what, err)
}

// reprobe decides whether a slice that skipped probes and failed with err
// runs again with every probe: when it was refused (the probed run names the
// refusal, which may be another one) or collided on a key. Not when the
// database went away: that is retried as a whole, by the caller.
func reprobe(skipped bool, err error) bool {
	if !skipped || err == nil {
		return false
	}
	if errors.Is(err, errUnprobedKey) {
		return true
	}
	var r *codes.Refusal
	return errors.As(err, &r) && r.Code != codes.DatabaseUnavailable
}

// currentOrderProbes is what an unprobed slice probes of orderProbes' lists:
// the ids whose current orders row is wanted, with whether each was born in
// the slice; versions reports whether a page version is among what
// orderProbes listed (what skipping would skip).
func currentOrderProbes(ids []string, lo, hi []int64, cur, born []bool) (curIDs []string, curBorn []bool, versions bool) {
	curIDs, curBorn = make([]string, 0, len(ids)), make([]bool, 0, len(ids))
	for i, id := range ids {
		if cur[i] {
			curIDs, curBorn = append(curIDs, id), append(curBorn, born[i])
		}
		if lo[i] <= hi[i] {
			versions = true
		}
	}
	return curIDs, curBorn, versions
}

// ordersBeyondSQL: does an orders row of the scope lie beyond a seq? One
// backward probe of orders (scope, seq).
// withoutBornHere drops from ids the orders born in the slice (bornHere[i]:
// the slice holds version 1 of ids[i]; born of them) when no orders row of
// the scope lies beyond the slice's window (see above), and marks the slice
// as having skipped probes; otherwise it returns ids as they are.
func (w *pageTx) withoutBornHere(ctx context.Context, ids []string, bornHere []bool, born int) ([]string, error) {
	var beyond bool
	if err := w.tx.QueryRow(ctx, ordersBeyondSQL, w.scope, w.p.through).Scan(&beyond); err != nil {
		return nil, dbErr("store: orders beyond the slice", err)
	}
	if beyond {
		return ids, nil
	}
	kept := make([]string, 0, len(ids)-born)
	for i, id := range ids {
		if !bornHere[i] {
			kept = append(kept, id)
		}
	}
	w.skipped = true
	return kept, nil
}
