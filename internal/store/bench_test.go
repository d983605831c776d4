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
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/reference/enginetest"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// benchStore is newStore with PROJECTION_BENCH_SLICE_BUDGET applied (a Go
// duration; negative: whole pages), to compare slicing modes.
func benchStore(b testing.TB) *Store {
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
	a := applyPages(b, s, run, sourcePages(b, n))
	return s, a.took, a.events
}

// sourcePages generates n events of the seeded stream as pages of the
// contract's maximum size, before any clock starts.
func sourcePages(b testing.TB, n int) []*source.Page { return enginetest.StreamPages(b, 42, n) }

// BenchmarkReverifyFromGenesis: a complete projection of N events whose
// cursor is reset (FR-APR07) is re-verified from genesis: every retained trade
// and order version is compared with its source event and nothing is
// inserted. Reports events/s of the re-verification. Unlike a bootstrap into
// an empty projection, every retained trade NEWER than a page is part of its
// keys' fold (R1 keeps newer live trades in the position), and after a reset
// that is the rest of the history: folded on every page, the re-verification
// was quadratic. Deferred derivation (deferred.go) folds each key in full once
// and again before CURRENT. Reports t4N/tN as the catch-up benchmark does
// (goal ≤ 4.4, docs/performance.md) and the keys the pages deferred.
func BenchmarkReverifyFromGenesis(b *testing.B) {
	n := benchEvents()
	for i := 0; i < b.N; i++ {
		tQuarter, eQuarter, _ := reverifyRun(b, n/4)
		took, events, deferred := reverifyRun(b, n)
		b.ReportMetric(float64(events), "events")
		b.ReportMetric(float64(deferred), "deferred_keys")
		b.ReportMetric(float64(events)/took.Seconds(), "events/s")
		b.ReportMetric((took.Seconds()/float64(events))/(tQuarter.Seconds()/float64(eQuarter))*4, "t4N/tN")
	}
}

// reverifyRun catches a fresh projection up over n events, resets its cursor
// and times the re-verification from genesis, which must change nothing.
// Outside the timing it checks what the re-verification claims: the scope is
// CURRENT with no key left deferred, and every position equals an
// independent replay of the source events (a fast wrong answer is no figure).
func reverifyRun(b *testing.B, n int) (took time.Duration, events int, deferred int) {
	s := benchStore(b)
	run := addRun(b, s, "b", PhaseActive, nil)
	pages := sourcePages(b, n)
	applyPages(b, s, run, pages)
	mustExec(b, s, `DELETE FROM projection_catchup_cursor`)
	mustExec(b, s, `DELETE FROM projection_catchup_outbox`)
	// The projection re-verified is a settled one, as months of history
	// are: the build's autovacuum and checkpoint are not timed.
	pgtest.Settle(b, adminDSNOf(b, s))
	a := applyPages(b, s, run, pages)
	took, events, deferred = a.took, a.events, a.deferred
	var changed, left int
	var state string
	if err := s.pool.QueryRow(ctxb, `SELECT (SELECT count(*) FROM projection_catchup_outbox),
       (SELECT count(*) FROM projection_catchup_basis WHERE deferred),
       (SELECT state FROM projection_catchup_cursor WHERE scope = $1)`, run.Scope).Scan(&changed, &left, &state); err != nil {
		b.Fatal(err)
	}
	if changed != 0 || left != 0 || state != "CURRENT" {
		b.Fatalf("re-verification: %d keys changed, %d left deferred, state %s", changed, left, state)
	}
	storetest.AssertPositions(b, s.pool, run.Scope, decodedEvents(b, pages))
	return took, events, deferred
}

// decodedEvents decodes the pages' wire events for the replay oracle.
func decodedEvents(b *testing.B, pages []*source.Page) []wire.Event {
	var evs []wire.Event
	for _, p := range pages {
		for _, e := range p.Events {
			ev, err := wire.Decode(e.Wire)
			if err != nil {
				b.Fatal(err)
			}
			evs = append(evs, ev)
		}
	}
	return evs
}

// applyPages applies pages in order, preparing and merging the next ones
// (PreparedPage.Merge, up to its bound) while applying the current unit, as
// the manager's fetch ahead does (PROJECTION_BENCH_MERGE=0: one page per
// unit).
func applyPages(b testing.TB, s *Store, run Run, pages []*source.Page) applied {
	l, err := s.AcquireLease(ctxb, run.Scope, "bench", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	maxPages := 0 // Merge's own bound
	if os.Getenv("PROJECTION_BENCH_MERGE") == "0" {
		maxPages = 1
	}
	start := time.Now()
	units := s.PrepareUnits(ctxb, run, pages, maxPages)
	var a applied
	for u := range units {
		if u.Err != nil {
			b.Fatal(u.Err)
		}
		unit, t := u.Unit, time.Now()
		res, err := s.ApplyPrepared(ctxb, l, run, unit)
		if err != nil {
			b.Fatalf("page after %d: %v", res.AfterSeq, err)
		}
		if os.Getenv("PROJECTION_BENCH_VERBOSE") != "" {
			// Not b.Logf: the benchmark's log is cut after a few lines.
			fmt.Fprintf(os.Stderr, "unit of %d pages after %d: %d events, %d deferred, in %v\n", unit.Pages(), res.AfterSeq, res.Applied, res.DeferredKeys, time.Since(t))
		}
		a.events += res.Applied
		a.deferred += res.DeferredKeys
		a.slices += res.Slices
	}
	a.took = time.Since(start)
	return a
}

// applied is what applyPages did: its time, the events applied, the keys
// whose fold was deferred, and the write slices committed (one transaction
// each).
type applied struct {
	took                     time.Duration
	events, deferred, slices int
}

// BenchmarkCatchUpFromGenesis: catch up N events from
// genesis into an empty projection, then, in the same run, COPY every row
// that catch-up wrote (trades, order versions, orders, positions) into the
// same indexed tables under another scope, copyRepeats times, each on a
// settled cluster: the fastest is the limit of what PostgreSQL can take in.
// Metrics: events/s; ratio_to_copy = t(fastest COPY of those rows) /
// t(catch-up) (goal ≥ 0.8); copy_slowest/fastest, how far the repeats of
// that COPY spread in the run; ratio_to_sliced_copy, the same against the COPY
// of those rows in as many transactions as the catch-up committed slices,
// and sliced_copy/copy, what that slicing alone costs the COPY; B/event and
// allocs/event of this process over the catch-up of N (goal ≤ 1 KB and
// ≤ 20); t4N/tN = per-event cost at N over per-event cost at N/4, times 4
// (linear is ~4; goal ≤ 4.4).
//
//	PROJECTION_BENCH_EVENTS=1000000 go test -run '^$' -bench CatchUpFromGenesis -benchtime 1x ./internal/store
func BenchmarkCatchUpFromGenesis(b *testing.B) {
	n := benchEvents()
	_ = pgtest.AdminDSN(b)
	for i := 0; i < b.N; i++ {
		// Every timed phase starts on a settled cluster (pgtest.Settle):
		// none pays for the autovacuum and checkpoint of the one before.
		pgtest.Settle(b)
		quarter, tQuarter, eQuarter := catchUpRun(b, n/4)
		s := benchStore(b)
		run := addRun(b, s, "b", PhaseActive, nil)
		pages := sourcePages(b, n)
		pgtest.Settle(b, adminDSNOf(b, quarter))
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		full := applyPages(b, s, run, pages)
		tFull, eFull := full.took, full.events
		runtime.ReadMemStats(&m1)
		settle := func() { pgtest.Settle(b, adminDSNOf(b, s)) }
		// The reference is the fastest of copyRepeats bulk COPYs: the same
		// COPY on a settled cluster took 5.9 to 9.9 s within an hour on
		// this machine, and a slow one would flatter the catch-up
		// (docs/performance.md "The COPY reference, fastest of three").
		var tCopy, tSlowest time.Duration
		var copied int64
		for k := range copyRepeats {
			t, n := copyWrittenRows(b, s, "b", "copy-"+strconv.Itoa(k), 0, settle)
			if k > 0 && n != copied {
				b.Fatalf("bulk COPY %d took %d rows, the first %d", k, n, copied)
			}
			copied = n
			if k == 0 || t < tCopy {
				tCopy = t
			}
			tSlowest = max(tSlowest, t)
		}
		tSliced, copiedSliced := copyWrittenRows(b, s, "b", "copy-sliced", full.slices, settle)
		if copiedSliced != copied {
			b.Fatalf("COPY in %d transactions took %d rows, in one per table %d", full.slices, copiedSliced, copied)
		}
		b.ReportMetric(float64(eFull), "events")
		b.ReportMetric(float64(eFull)/tFull.Seconds(), "events/s")
		b.ReportMetric(float64(copied), "copied_rows")
		b.ReportMetric(float64(copied)/tCopy.Seconds(), "copy_rows/s")
		b.ReportMetric(tCopy.Seconds()/tFull.Seconds(), "ratio_to_copy")
		b.ReportMetric(tSliced.Seconds()/tFull.Seconds(), "ratio_to_sliced_copy")
		b.ReportMetric(tSliced.Seconds()/tCopy.Seconds(), "sliced_copy/copy")
		b.ReportMetric(tSlowest.Seconds()/tCopy.Seconds(), "copy_slowest/fastest")
		b.ReportMetric(float64(full.slices), "slices")
		b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(eFull), "B/event")
		b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(eFull), "allocs/event")
		b.ReportMetric((tFull.Seconds()/float64(eFull))/(tQuarter.Seconds()/float64(eQuarter))*4, "t4N/tN")
		b.Logf("N/4=%d events in %v; N=%d events in %v (%d slices); COPY of the %d rows written in %v (fastest of %d, slowest %v), in as many transactions %v",
			eQuarter, tQuarter, eFull, tFull, full.slices, copied, tCopy, copyRepeats, tSlowest, tSliced)
	}
}

// copyRepeats is how many times the catch-up benchmark COPYs the rows it
// wrote in one transaction per table; the fastest is the goal's reference.
const copyRepeats = 3

// writtenTables are the tables a catch-up writes, in the order a slice
// writes them, with their columns, scope first: what copyWrittenRows copies
// and TestCopyReferences_Small compares.
var writtenTables = []struct {
	name string
	cols []string
}{
	{name: "trades", cols: []string{"scope", "trade_id", "trade_seq", "seq", "instrument", "price", "quantity", "buy_order_id", "sell_order_id", "buy_account", "sell_account", "ts", "booking_status", "written_by"}},
	{name: "order_events", cols: []string{"scope", "order_id", "version", "seq", "account", "instrument", "side", "price", "quantity", "remaining", "status", "ts"}},
	{name: "orders", cols: []string{"scope", "order_id", "version", "seq", "account", "instrument", "side", "price", "quantity", "remaining", "status", "ts"}},
	{name: "positions", cols: []string{"scope", "account", "instrument", "opening_quantity", "opening_avg_cost", "opening_proven", "opening_seq", "quantity", "avg_cost", "updated_at"}},
}

// copyWrittenRows COPYs every row scope from wrote into trades, order_events,
// orders and positions again under scope to, into the same tables: the floor
// a catch-up's writes are measured against. transactions says how: 0 is one
// transaction per table, as a bulk load would (the goal's reference); k > 0
// is k transactions over equal ranges of seq, each COPYing the rows of its
// range into trades, order_events and orders in that order (positions in
// the last), the shape of a catch-up's write slices without anything else
// they do, so the two references together say what committing in atomic
// slices costs PostgreSQL. The rows are read beforehand as the server's own
// binary COPY stream (COPY (SELECT …) TO STDOUT), so the clock times the
// server taking them in and nothing of the client: a stream encoded while
// timed (pgx's CopyFrom of []any rows, boxed values and big.Int numerics)
// measured the client's encoding and its garbage collection as much as the
// server, and moved by a third from run to run. ready runs after the
// streams are read, just before the clock starts.
func copyWrittenRows(b testing.TB, s *Store, from, to string, transactions int, ready func()) (time.Duration, int64) {
	tables := writtenTables
	conn, err := s.pool.Acquire(ctxb)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	pg := conn.Conn().PgConn()
	var maxSeq int64
	if err := conn.QueryRow(ctxb, `SELECT greatest((SELECT max(seq) FROM trades WHERE scope = $1),
       (SELECT max(seq) FROM order_events WHERE scope = $1), (SELECT max(seq) FROM orders WHERE scope = $1))`, from).Scan(&maxSeq); err != nil {
		b.Fatal(err)
	}
	// A copyStream is one table's rows of one transaction.
	type copyStream struct {
		sql    string
		stream bytes.Buffer
	}
	// COPY TO takes no parameters: the two scopes are the benchmark's own
	// constants, quoted as literals, the seq bounds integers; identifiers
	// come from the list above.
	literal := func(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }
	read := func(i int, where string) *copyStream {
		tb := tables[i]
		c := &copyStream{sql: "COPY " + pgx.Identifier{tb.name}.Sanitize() + " (" + strings.Join(tb.cols, ", ") + ") FROM STDIN (FORMAT binary)"}
		q := "COPY (SELECT " + literal(to) + "::text, " + strings.Join(tb.cols[1:], ", ") + " FROM " + pgx.Identifier{tb.name}.Sanitize() +
			" WHERE scope = " + literal(from) + where + ") TO STDOUT (FORMAT binary)"
		if _, err := pg.CopyTo(ctxb, &c.stream, q); err != nil {
			b.Fatal(err)
		}
		return c
	}
	var txs [][]*copyStream // the copies of each transaction, in order
	if transactions <= 0 {
		for i := range tables {
			txs = append(txs, []*copyStream{read(i, "")})
		}
	} else {
		for k := range transactions {
			lo, hi := maxSeq*int64(k)/int64(transactions), maxSeq*int64(k+1)/int64(transactions)
			where := " AND seq > " + strconv.FormatInt(lo, 10) + " AND seq <= " + strconv.FormatInt(hi, 10)
			var tx []*copyStream
			for i := range tables[:3] {
				tx = append(tx, read(i, where))
			}
			if k == transactions-1 {
				tx = append(tx, read(3, ""))
			}
			txs = append(txs, tx)
		}
	}
	exec := func(sql string) {
		if _, err := pg.Exec(ctxb, sql).ReadAll(); err != nil {
			b.Fatal(err)
		}
	}
	var copied int64
	ready()
	start := time.Now()
	for _, tx := range txs {
		if len(tx) > 1 {
			exec("BEGIN")
		}
		for _, c := range tx {
			ct, err := pg.CopyFrom(ctxb, bytes.NewReader(c.stream.Bytes()), c.sql)
			if err != nil {
				b.Fatal(err)
			}
			copied += ct.RowsAffected()
		}
		if len(tx) > 1 {
			exec("COMMIT")
		}
	}
	return time.Since(start), copied
}

// TestCopyReferences_Small is the small version of the catch-up benchmark's
// two COPY references: after a catch-up, the rows it wrote are COPYed again
// in one transaction per table and in three transactions over ranges of
// seq. Each reference must hold exactly the rows the catch-up wrote, table
// by table, or its ratio would compare the catch-up with other work.
func TestCopyReferences_Small(t *testing.T) {
	s := benchStore(t)
	run := addRun(t, s, "b", PhaseActive, nil)
	a := applyPages(t, s, run, sourcePages(t, 12_000))
	if a.events == 0 || a.slices == 0 {
		t.Fatalf("catch-up applied %d events in %d slices", a.events, a.slices)
	}
	var written int64
	for _, tb := range writtenTables {
		var n int64
		if err := s.pool.QueryRow(ctxb, "SELECT count(*) FROM "+pgx.Identifier{tb.name}.Sanitize()+" WHERE scope = 'b'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		written += n
	}
	for _, c := range []struct {
		scope        string
		transactions int
	}{{"copy", 0}, {"copy-sliced", 3}} {
		t.Run(c.scope, func(t *testing.T) {
			if _, copied := copyWrittenRows(t, s, "b", c.scope, c.transactions, func() {}); copied != written {
				t.Fatalf("copied %d rows, the catch-up wrote %d", copied, written)
			}
			// Every column but scope, the one the copies replace.
			for _, tb := range writtenTables {
				var diff int64
				name, cols, id := tb.name, strings.Join(tb.cols[1:], ", "), pgx.Identifier{tb.name}.Sanitize()
				if err := s.pool.QueryRow(ctxb, "SELECT count(*) FROM ((SELECT "+cols+" FROM "+id+" WHERE scope = 'b' EXCEPT ALL SELECT "+cols+" FROM "+id+" WHERE scope = $1)"+
					" UNION ALL (SELECT "+cols+" FROM "+id+" WHERE scope = $1 EXCEPT ALL SELECT "+cols+" FROM "+id+" WHERE scope = 'b')) d", c.scope).Scan(&diff); err != nil {
					t.Fatal(err)
				}
				if diff != 0 {
					t.Errorf("%s: %d rows differ between the catch-up's and the copy's", name, diff)
				}
			}
		})
	}
}
