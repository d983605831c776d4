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
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

// benchStore is newStore with PROJECTION_BENCH_SLICE_BUDGET applied (a Go
// duration; negative: whole pages), to compare slicing modes.
func benchStore(b *testing.B) *Store {
	s := newStore(b)
	if d, err := time.ParseDuration(os.Getenv("PROJECTION_BENCH_SLICE_BUDGET")); err == nil {
		s.SetSliceBudget(d)
	}
	return s
}

func benchEvents() int {
	if v, err := strconv.Atoi(os.Getenv("PROJECTION_BENCH_EVENTS")); err == nil && v > 0 {
		return v
	}
	return 40_000 // `make test`-sized; `make bench` sets PROJECTION_BENCH_EVENTS=1000000
}

// catchUpRun catches a fresh, empty projection up from genesis over n events
// in pages of 10,000 (the contract's maximum). The source pages are generated
// before the clock starts (encoding and hashing them is the member's cost);
// the timed loop is the consumer: PreparePage (decode, verify chain) of the
// next page overlapping with ApplyPrepared of the current one, as a worker
// that fetches ahead would run.
func catchUpRun(b *testing.B, n int) (*Store, time.Duration, int) {
	s := benchStore(b)
	run := addRun(b, s, "b", PhaseActive, nil)
	took, events := applyPages(b, s, run, sourcePages(b, n))
	return s, took, events
}

// sourcePages generates n events of the seeded stream as pages of the
// contract's maximum size, before any clock starts.
func sourcePages(b *testing.B, n int) []*source.Page { return storetest.StreamPages(b, 42, n) }

// BenchmarkReverifyFromGenesis: a complete projection of N events whose
// cursor is reset (FR-APR07) is re-verified from genesis: every retained trade
// and order version is compared with its source event and nothing is
// inserted. Reports events/s of the re-verification. Unlike a bootstrap into
// an empty projection, each page here also folds every retained trade NEWER
// than the page for its keys (R1 keeps newer live trades in the position), and
// after a reset that is the rest of the history: page cost falls from
// O(history) to O(page) as the cursor advances (quadratic in N overall, with a
// small constant; a normal lossy-live lag keeps that tail short).
func BenchmarkReverifyFromGenesis(b *testing.B) {
	n := benchEvents()
	for i := 0; i < b.N; i++ {
		s := benchStore(b)
		run := addRun(b, s, "b", PhaseActive, nil)
		pages := sourcePages(b, n)
		applyPages(b, s, run, pages)
		mustExec(b, s, `DELETE FROM projection_catchup_cursor`)
		mustExec(b, s, `DELETE FROM projection_catchup_outbox`)
		took, events := applyPages(b, s, run, pages)
		var changed int
		s.pool.QueryRow(ctxb, `SELECT count(*) FROM projection_catchup_outbox`).Scan(&changed)
		if changed != 0 {
			b.Fatalf("re-verification changed %d keys", changed)
		}
		b.ReportMetric(float64(events), "events")
		b.ReportMetric(float64(events)/took.Seconds(), "events/s")
	}
}

// applyPages applies pages in order, preparing the next while applying the current.
func applyPages(b *testing.B, s *Store, run Run, pages []*source.Page) (time.Duration, int) {
	l, err := s.AcquireLease(ctxb, run.Scope, "bench", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	type prep struct {
		pp  *PreparedPage
		err error
	}
	start := time.Now()
	ahead := make(chan prep, 1)
	go func() {
		for _, p := range pages {
			pp, err := s.PreparePage(run, p)
			ahead <- prep{pp, err}
		}
		close(ahead)
	}()
	events := 0
	for pr := range ahead {
		if pr.err != nil {
			b.Fatal(pr.err)
		}
		t := time.Now()
		res, err := s.ApplyPrepared(ctxb, l, run, pr.pp)
		if err != nil {
			b.Fatalf("page after %d: %v", res.AfterSeq, err)
		}
		if os.Getenv("PROJECTION_BENCH_VERBOSE") != "" {
			b.Logf("page after %d: %d events in %v", res.AfterSeq, res.Applied, time.Since(t))
		}
		events += res.Applied
	}
	return time.Since(start), events
}

// BenchmarkCatchUpFromGenesis: catch up N events from genesis into an empty
// projection, then COPY the same trade rows into the same table (another
// scope) in the same run. Metrics: events/s of the catch-up, copy rows/s,
// ratio_to_copy = t(COPY of the same trade rows) / t(catch-up), and
// throughput_ratio = (events/s) / (COPY rows/s) (the goal is >= 0.5; each
// event is a row to verify and write, and ~77% of the events are order
// versions, so the wall-clock ratio against the trade rows alone is lower),
// and t4N/tN = per-event cost at N over per-event cost at N/4, times 4
// (linear scaling is ~4; quadratic would be ~16).
//
//	PROJECTION_BENCH_EVENTS=1000000 go test -run '^$' -bench CatchUpFromGenesis -benchtime 1x ./internal/store
func BenchmarkCatchUpFromGenesis(b *testing.B) {
	n := benchEvents()
	_ = pgtest.AdminDSN(b)
	for i := 0; i < b.N; i++ {
		_, tQuarter, eQuarter := catchUpRun(b, n/4)
		s, tFull, eFull := catchUpRun(b, n)

		rows, err := s.pool.Query(ctxb, `SELECT 'copy', trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id,
       buy_account, sell_account, ts, booking_status, written_by FROM trades WHERE scope = 'b'`)
		if err != nil {
			b.Fatal(err)
		}
		var data [][]any
		for rows.Next() {
			v, err := rows.Values()
			if err != nil {
				b.Fatal(err)
			}
			data = append(data, v)
		}
		rows.Close()
		start := time.Now()
		copied, err := s.pool.CopyFrom(ctxb, pgx.Identifier{"trades"}, []string{"scope", "trade_id", "trade_seq", "seq", "instrument",
			"price", "quantity", "buy_order_id", "sell_order_id", "buy_account", "sell_account", "ts", "booking_status", "written_by"},
			pgx.CopyFromRows(data))
		tCopy := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(eFull), "events")
		b.ReportMetric(float64(eFull)/tFull.Seconds(), "events/s")
		b.ReportMetric(float64(copied), "trade_rows")
		b.ReportMetric(float64(copied)/tCopy.Seconds(), "copy_rows/s")
		b.ReportMetric(tCopy.Seconds()/tFull.Seconds(), "ratio_to_copy")
		b.ReportMetric((float64(eFull)/tFull.Seconds())/(float64(copied)/tCopy.Seconds()), "throughput_ratio")
		b.ReportMetric((tFull.Seconds()/float64(eFull))/(tQuarter.Seconds()/float64(eQuarter))*4, "t4N/tN")
		b.Logf("N/4=%d events in %v; N=%d events in %v; COPY %d trade rows in %v", eQuarter, tQuarter, eFull, tFull, copied, tCopy)
	}
}
