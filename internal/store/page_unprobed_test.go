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
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/reference/enginetest"
	. "github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// countAttempts counts the slice attempts of s (each takes the lease lock once).
func countAttempts(s *Store) *atomic.Int32 {
	var n atomic.Int32
	s.hooks.beforeLeaseLock = func(context.Context, pgx.Tx) error { n.Add(1); return nil }
	return &n
}

// FR-APR06 (page_unprobed.go): a slice that skips the probes which can only
// find a refusal refuses exactly as a slice that probes everything (same
// code, same message, nothing written), and when a skipped probe would have
// found the row, it got there by running again probed (two attempts).
func TestUnprobed_RefusesAsTheProbedSlice(t *testing.T) {
	mismatch := *evOrder.Order
	mismatch.Remaining = Dec("1")
	for _, tc := range []struct {
		name     string
		seed     func(t *testing.T, s *Store)
		want     codes.Code
		attempts int32 // of the unprobed store; the probed one always takes 1
	}{
		{"a page trade retained after the window: the COPY collides", func(t *testing.T, s *Store) {
			seedTrade(t, s, "s", evTrade1, i64(99), "BOOKED")
		}, codes.TradeProvenanceConflict, 2},
		{"a page order version retained after the window, no current row: the COPY collides", func(t *testing.T, s *Store) {
			seedOrder(t, s, "s", evOrder, i64(7))
			mustExec(t, s, `DELETE FROM orders`)
		}, codes.OrderProvenanceConflict, 2},
		{"a skipped trade conflict beside an order row mismatch in the window: the trade is named", func(t *testing.T, s *Store) {
			seedTrade(t, s, "s", evTrade1, i64(99), "BOOKED")
			seedOrder(t, s, "s", wire.Event{Type: wire.TypeOrder, Order: &mismatch}, i64(2))
		}, codes.TradeProvenanceConflict, 2},
		{"the window refuses a later trade, the probe an earlier one: the earliest is named", func(t *testing.T, s *Store) {
			seedTrade(t, s, "s", evTrade1, i64(99), "BOOKED")
			seedTrade(t, s, "s", evTrade2, i64(2), "BOOKED")
		}, codes.TradeProvenanceConflict, 1},
		{"the current row of an order born in the page, before the window, no version: the COPY of orders collides", func(t *testing.T, s *Store) {
			seedOrder(t, s, "s", evOrder, i64(0))
			mustExec(t, s, `DELETE FROM order_events`)
		}, codes.OrderProvenanceConflict, 2},
		{"a refusal after a skipped probe that would have found nothing: run again, same refusal", func(t *testing.T, s *Store) {
			seedOrder(t, s, "s", wire.Event{Type: wire.TypeOrder, Order: &mismatch}, i64(2))
		}, codes.OrderRowMismatch, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got [2]*codes.Refusal
			for i, probeAll := range []bool{true, false} {
				f := newFixture(t)
				f.s.hooks.probeAll = probeAll
				tc.seed(t, f.s)
				n := countAttempts(f.s)
				got[i] = refused(t, f.s, f.l, f.run, f.page(), tc.want)
				want := int32(1)
				if !probeAll {
					want = tc.attempts
				}
				if n.Load() != want {
					t.Errorf("probeAll=%v: %d attempts, want %d", probeAll, n.Load(), want)
				}
			}
			if got[0].Error() != got[1].Error() {
				t.Errorf("probed: %v\nunprobed: %v", got[0], got[1])
			}
		})
	}
}

// A clean page commits in one unprobed attempt and writes what a probed
// slice writes, through a whole stream of pages.
func TestUnprobed_CommitsWhatTheProbedSliceCommits(t *testing.T) {
	t.Parallel()
	pages := enginetest.StreamPages(t, 7, 3_000)
	var dumps [2]string
	for i, probeAll := range []bool{true, false} {
		s := newStore(t)
		s.hooks.probeAll = probeAll
		run := addRun(t, s, "s", PhaseActive, nil)
		l := lease(t, s, "s", "a")
		n := countAttempts(s)
		slices := 0
		for _, p := range pages {
			res, err := s.ApplyPage(ctxb, l, run, p)
			if err != nil {
				t.Fatal(err)
			}
			slices += res.Slices
		}
		if int(n.Load()) != slices {
			t.Errorf("probeAll=%v: %d attempts for %d slices", probeAll, n.Load(), slices)
		}
		dumps[i] = snapshot(t, s)
	}
	if dumps[0] != dumps[1] {
		t.Errorf("the unprobed slices wrote another projection than the probed ones")
	}
}

// What the unprobed attempt rests on is read from the catalog in every
// slice: without a unique key on exactly trades (scope, trade_id) the slice
// probes everything, and a page trade retained after the window is refused
// in one attempt instead of being inserted twice.
func TestUnprobed_OnlyWhereTheKeysAreEnforced(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ddl      string
		attempts int32
	}{
		{"the base schema's primary key", ``, 2},
		{"a unique index over the same columns, in another order, with INCLUDE", `
ALTER TABLE trades DROP CONSTRAINT trades_pkey;
CREATE UNIQUE INDEX trades_id_scope ON trades (trade_id, scope) INCLUDE (seq)`, 2},
		{"no key", `ALTER TABLE trades DROP CONSTRAINT trades_pkey`, 1},
		{"a partial unique index", `
ALTER TABLE trades DROP CONSTRAINT trades_pkey;
CREATE UNIQUE INDEX trades_booked ON trades (scope, trade_id) WHERE booking_status = 'BOOKED'`, 1},
		{"a unique index over more columns", `
ALTER TABLE trades DROP CONSTRAINT trades_pkey;
CREATE UNIQUE INDEX trades_id_seq ON trades (scope, trade_id, seq)`, 1},
		{"a deferrable key", `
ALTER TABLE trades DROP CONSTRAINT trades_pkey;
ALTER TABLE trades ADD CONSTRAINT trades_key UNIQUE (scope, trade_id) DEFERRABLE INITIALLY DEFERRED`, 1},
		{"no key on order_events", `ALTER TABLE order_events DROP CONSTRAINT order_events_pkey`, 1},
		{"no key on orders", `ALTER TABLE orders DROP CONSTRAINT orders_pkey`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			if tc.ddl != "" {
				if _, err := adminOf(t, f.s).Exec(ctxb, tc.ddl, pgx.QueryExecModeSimpleProtocol); err != nil {
					t.Fatal(err)
				}
			}
			seedTrade(t, f.s, "s", evTrade1, i64(99), "BOOKED")
			n := countAttempts(f.s)
			refused(t, f.s, f.l, f.run, f.page(), codes.TradeProvenanceConflict)
			if n.Load() != tc.attempts {
				t.Errorf("%d attempts, want %d", n.Load(), tc.attempts)
			}
		})
	}
}

// The current rows of orders born in a slice are not probed while no orders
// row lies beyond the slice (a bootstrap into an empty projection), and are
// probed where rows do (a re-verification): each slice commits in one
// attempt either way, and the projection is what a probed slice writes.
func TestUnprobed_SkipsTheCurrentRowsOfOrdersBornInTheSlice(t *testing.T) {
	t.Parallel()
	pages := enginetest.StreamPages(t, 11, 3_000)
	var dumps [2]string
	for i, probeAll := range []bool{true, false} {
		s := newStore(t)
		s.hooks.probeAll = probeAll
		s.SetSliceEvents(400)
		var probed atomic.Int64
		s.hooks.currentProbes = func(n int) { probed.Add(int64(n)) }
		run := addRun(t, s, "s", PhaseActive, nil)
		l := lease(t, s, "s", "a")
		n := countAttempts(s)
		apply := func() (slices, orders int) {
			for _, p := range pages {
				res, err := s.ApplyPage(ctxb, l, run, p)
				if err != nil {
					t.Fatal(err)
				}
				slices += res.Slices
			}
			for _, p := range pages {
				for _, e := range p.Events {
					if ev, err := wire.Decode(e.Wire); err == nil && ev.Order != nil {
						orders++
					}
				}
			}
			return slices, orders
		}
		slices, versions := apply()
		if int(n.Load()) != slices {
			t.Errorf("probeAll=%v: bootstrap in %d attempts for %d slices", probeAll, n.Load(), slices)
		}
		if !probeAll && (probed.Load() == 0 || probed.Load() > int64(versions)/10) {
			t.Errorf("bootstrap: %d current rows probed for %d order versions; want only those of orders born before their slice", probed.Load(), versions)
		}
		dumps[i] = snapshot(t, s)
		mustExec(t, s, `DELETE FROM projection_catchup_cursor`)
		n.Store(0)
		probed.Store(0)
		slices, _ = apply()
		if int(n.Load()) != slices {
			t.Errorf("probeAll=%v: re-verification in %d attempts for %d slices", probeAll, n.Load(), slices)
		}
		if !probeAll && probed.Load() == 0 {
			t.Error("re-verification: no current row probed; orders beyond the window must be")
		}
		if got := projection(t, s); !strings.HasPrefix(dumps[i], got) {
			t.Errorf("probeAll=%v: the re-verification changed the projection", probeAll)
		}
	}
	if dumps[0] != dumps[1] {
		t.Errorf("the unprobed slices wrote another projection than the probed ones")
	}
}

func TestCurrentOrderProbes(t *testing.T) {
	for _, tc := range []struct {
		name         string
		ids          []string
		lo, hi       []int64
		cur, born    []bool
		want         []string
		wantBorn     []bool
		wantVersions bool
	}{
		{"nothing", nil, nil, nil, nil, nil, []string{}, []bool{}, false},
		{"a bootstrap: every version and every current row", []string{"a", "b"}, []int64{1, 2}, []int64{3, 2}, []bool{true, true}, []bool{true, false},
			[]string{"a", "b"}, []bool{true, false}, true},
		{"current rows only", []string{"a", "b"}, []int64{1, 1}, []int64{0, 0}, []bool{true, false}, []bool{false, true}, []string{"a"}, []bool{false}, false},
		{"a version whose current row the window showed", []string{"a", "b"}, []int64{1, 4}, []int64{0, 4}, []bool{true, false}, []bool{true, true},
			[]string{"a"}, []bool{true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, born, versions := currentOrderProbes(tc.ids, tc.lo, tc.hi, tc.cur, tc.born)
			if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(born, tc.wantBorn) || versions != tc.wantVersions {
				t.Errorf("got %v, %v, %v; want %v, %v, %v", got, born, versions, tc.want, tc.wantBorn, tc.wantVersions)
			}
		})
	}
}

func TestReprobe(t *testing.T) {
	collided := fmt.Errorf("%w: store: insert missing trades: %w", errUnprobedKey, &pgconn.PgError{Code: "23505"})
	for _, tc := range []struct {
		name    string
		skipped bool
		err     error
		want    bool
	}{
		{"committed", true, nil, false},
		{"a refusal after a skipped probe", true, refuse(codes.OrderRowMismatch, "x"), true},
		{"a collision on a key", true, dbErr("store: apply page", collided), true},
		{"a refusal, nothing skipped", false, refuse(codes.OrderRowMismatch, "x"), false},
		{"the database went away", true, dbErr("store: apply page", &pgconn.PgError{Code: "57P01"}), false},
		{"another error", true, errors.New("boom"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reprobe(tc.skipped, tc.err); got != tc.want {
				t.Errorf("reprobe(%v, %v) = %v, want %v", tc.skipped, tc.err, got, tc.want)
			}
		})
	}
}
