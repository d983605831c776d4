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

// The property test lives in the external test package: it drives the store
// together with the live projector (internal/reference/live imports the
// store, so the store's own package cannot import it).
package store_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/pgtest/recoverydb"
	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
	"github.com/projection-recovery/projection-recovery/internal/reference/live"
	"github.com/projection-recovery/projection-recovery/internal/reference/member"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// Environment of the property test. `make test` runs the default count;
// `make soak` (hack/soak.sh) runs it at full size.
const (
	envCases   = "PROJECTION_PROPERTY_CASES"    // number of cases (default 200)
	envSeed    = "PROJECTION_PROPERTY_SEED"     // replay exactly this one case
	envRunSeed = "PROJECTION_PROPERTY_RUN_SEED" // replay a whole run (with the same case count)
)

var propCtx = context.Background()

// TestProperty_PagePathEqualsReplay (FR-APR06, FR-APR07, R1): random
// workloads × random live-feed drops × random live arrival orders × random
// page sizes. Per case a real reference member (engine, command log, the
// seeded drop of member.MemberConfig) trades while the real live projector
// receives the surviving events in a random order, interleaved at random
// with recovery pages fetched through the verifying source client from the
// member's contract handler and applied with Store.ApplyPage, the calls the
// controller makes. Once trading stopped, every live event was delivered and
// the cursor reached the member's boundary, every position, trade and order
// row equals the independent replay of what the member emitted (and no page
// ever rewound a current order row), no trade is stored twice, the cursor is CURRENT at B and its chain digest, recomputed
// over the member's wire bytes, is the cursor's.
//
// Every case draws everything from one seed, logged with the line that
// replays it. Cases share one database per worker, each in its own scope; a
// worker's first scope is kept and re-checked at the end, so a page writing
// outside its scope fails the run.
func TestProperty_PagePathEqualsReplay(t *testing.T) {
	seeds := propertySeeds(t)
	workers := min(runtime.GOMAXPROCS(0), len(seeds))
	pool := make(chan *propWorker, workers)
	var all []*propWorker
	for i := 0; i < workers; i++ {
		w := newPropWorker(t)
		all = append(all, w)
		pool <- w
	}
	start := time.Now()
	t.Run("cases", func(t *testing.T) {
		for i, seed := range seeds {
			t.Run(fmt.Sprintf("%d/seed=%d", i, seed), func(t *testing.T) {
				t.Parallel()
				w := <-pool
				defer func() { pool <- w }()
				scope := fmt.Sprintf("p%d", i)
				c := drawCase(seed)
				t.Logf("replay: hack/postgres.sh run -- env %s=%d go test -count=1 -run '^TestProperty_PagePathEqualsReplay$' ./internal/store/; case %+v",
					envSeed, seed, c)
				src := runCase(t, w, scope, c)
				if t.Failed() {
					return
				}
				if w.neighbour == nil {
					w.neighbour = &keptScope{scope: scope, src: src}
					return
				}
				w.drop(t, scope)
			})
		}
	})
	for _, w := range all {
		if k := w.neighbour; k != nil && !t.Failed() {
			assertScope(t, w, k.scope, k.src)
		}
	}
	t.Logf("%d cases in %s on %d workers", len(seeds), time.Since(start).Round(time.Millisecond), workers)
}

// propertySeeds returns one seed per case: PROJECTION_PROPERTY_SEED alone,
// or PROJECTION_PROPERTY_CASES seeds drawn from the run seed (random unless
// PROJECTION_PROPERTY_RUN_SEED is set; logged either way).
func propertySeeds(t *testing.T) []uint64 {
	t.Helper()
	if v := os.Getenv(envSeed); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", envSeed, v, err)
		}
		return []uint64{s}
	}
	n := 200
	if v := os.Getenv(envCases); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive count", envCases, v)
		}
	}
	run := rand.Uint64()
	if v := os.Getenv(envRunSeed); v != "" {
		var err error
		if run, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", envRunSeed, v, err)
		}
	}
	t.Logf("run: %s=%d %s=%d", envRunSeed, run, envCases, n)
	r := rand.New(rand.NewPCG(run, 0x9e3779b97f4a7c15))
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = r.Uint64()
	}
	return seeds
}

// propCase is everything one case varies, drawn from its seed.
type propCase struct {
	Commands    int      // workload commands the member commits (B at the end)
	Accounts    int      // workload accounts
	Instruments []string // workload instruments
	Openings    bool     // the workload starts with proven openings
	WorkSeed    uint64   // workload seed
	DropRate    float64  // member.MemberConfig.DropRate: what the live projector never receives
	DropSeed    uint64   // member.MemberConfig.DropSeed
	Reorder     float64  // probability that a delivery takes a random pending event instead of the oldest
	Redeliver   float64  // probability that a delivered event is delivered again later
	PageSize    int      // maxEvents asked for (smaller than a command: the refusal is checked and the page re-asked)
	VarySize    bool     // each fetch draws its own size in PageSize/2..2*PageSize
	WStep       float64  // weight of "the member commits a command" in the schedule
	WDeliver    float64  // weight of "the live projector receives an event"
	WPage       float64  // weight of "recovery applies a page"
	Schedule    uint64   // seed of the interleaving
	SliceEvents int      // write slice size (store.SetSliceEvents); 0: slices sized by the lock budget
	MidPage     float64  // probability that the live projector receives events between two slices of a page
	Resets      int      // cursor resets (FR-APR07) at random page actions: the projection, full, is re-verified from genesis
	Merge       int      // pages fetched ahead and merged into one unit (PreparedPage.Merge) at each page action, at most
}

// drawCase draws a case. Sizes favour small cases (most bugs need few
// commands, and a page costs a transaction) but reach 400 commands; drop
// rates cover nothing lost, all lost and everything between; page sizes
// cover 1 (then smaller than most commands: refused and re-asked), a few
// events, any size, and more than the whole stream. A page size above 1 is
// at least a sixth of the command count, so no case needs more than a few
// dozen pages.
func drawCase(seed uint64) propCase {
	r := rand.New(rand.NewPCG(seed, 0x70726f70))
	f := r.Float64()
	c := propCase{
		Commands: 20 + int(380*math.Pow(f, 8)),
		Accounts: 1 + r.IntN(8),
		Openings: r.IntN(3) > 0,
		WorkSeed: r.Uint64(),
		DropSeed: r.Uint64(),
		Schedule: r.Uint64(),
	}
	all := []string{"ACME", "BOLT", "CRUX"}
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	c.Instruments = all[:1+r.IntN(len(all))]
	switch r.IntN(6) {
	case 0:
		c.DropRate = 0
	case 1:
		c.DropRate = 1
	default:
		c.DropRate = r.Float64() * 0.6
	}
	c.Reorder = []float64{0, 0.1, 0.5, 1}[r.IntN(4)]
	c.Redeliver = []float64{0, 0, 0.05, 0.3}[r.IntN(4)]
	switch r.IntN(5) {
	case 0:
		// Every command with events is refused and re-asked: one page per
		// command, so these workloads stay short.
		c.PageSize, c.Commands = 1, min(c.Commands, 30)
	case 1:
		c.PageSize = 2 + r.IntN(8)
	case 2:
		c.PageSize = source.MaxPageEvents // the contract's largest, more than any stream here
	default:
		c.PageSize = 1 + r.IntN(200)
	}
	if c.PageSize > 1 {
		c.PageSize = max(c.PageSize, c.Commands/6)
	}
	c.VarySize = r.IntN(4) == 0
	// A page is a transaction and the case's main cost; recovery at the head
	// (a page after every command or two) still comes up whenever WPage
	// draws near WStep.
	c.WStep, c.WDeliver, c.WPage = r.Float64()+0.01, r.Float64()+0.01, r.Float64()/2+0.01
	// Drawn last, so every field above is what it was for the same seed
	// before pages committed in slices.
	c.SliceEvents = []int{0, 1, 1 + r.IntN(5), 1 + r.IntN(40)}[r.IntN(4)]
	c.MidPage = []float64{0, 0.3, 1}[r.IntN(3)]
	// Drawn after everything else, for the same reason. A reset deletes
	// the cursor row as an operator would (FR-APR07): the bases stay, so
	// the re-verification defers the keys it only verifies (deferred.go)
	// while live writes keep landing, and must still end in the replay.
	c.Resets = []int{0, 0, 1, 2}[r.IntN(4)]
	// Drawn after everything else, for the same reason: one page per unit
	// in two cases of five, up to 2, 4 or 7 merged in the others (7: past
	// maxUnitMaps, a unit's fourth map takes in the later pages' order
	// versions, trade ids and openings' keys, unitMaps.join).
	c.Merge = []int{1, 1, 2, 4, 7}[r.IntN(5)]
	return c
}

// propWorker is one database with the schema and the documented roles: the
// operator's Store (projection_recovery) and the trade-processor's pool (the
// admin: the live projector's writer).
type propWorker struct {
	s         *store.Store
	trade     *pgxpool.Pool
	tables    []string // every table with a scope column
	neighbour *keptScope
}

type keptScope struct {
	scope string
	src   *storetest.Ledger
}

func newPropWorker(t *testing.T) *propWorker {
	t.Helper()
	db := recoverydb.New(t)
	w := &propWorker{s: store.New(pgtest.Pool(t, db.Recovery)), trade: pgtest.Pool(t, db.Admin)}
	rows, err := w.trade.Query(propCtx, `SELECT c.table_name FROM information_schema.columns c
  JOIN information_schema.tables t USING (table_schema, table_name)
 WHERE c.table_schema = 'public' AND c.column_name = 'scope' AND t.table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	if w.tables, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(w.tables) == 0 {
		t.Fatalf("tables with a scope column: %v %v", w.tables, err)
	}
	return w
}

// capture is the member's publisher: the live feed's messages in publish order.
type capture struct{ msgs [][]byte }

func (c *capture) Publish(_ string, data []byte) error {
	c.msgs = append(c.msgs, append([]byte(nil), data...))
	return nil
}

// runCase runs one case in scope and asserts the property. It returns the
// source the scope was recovered from.
func runCase(t *testing.T, w *propWorker, scope string, c propCase) *storetest.Ledger {
	t.Helper()
	desc := engine.Descriptor{EngineID: "prop", Scope: scope, Instruments: c.Instruments}
	lg, err := engine.Create(t.TempDir(), desc, engine.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lg.Close() })
	wl, err := engine.NewWorkload(c.WorkSeed, engine.WorkloadConfig{Accounts: c.Accounts, Instruments: c.Instruments, Openings: c.Openings})
	if err != nil {
		t.Fatal(err)
	}
	feed := &capture{}
	m, err := member.NewMember(member.MemberConfig{Log: lg, Workload: wl, Publisher: feed, DropRate: c.DropRate, DropSeed: c.DropSeed})
	if err != nil {
		t.Fatal(err)
	}
	h := member.NewHandler(lg, member.HandlerOptions{})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cl, err := source.NewClient(source.ClientConfig{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.trade.Exec(propCtx, `INSERT INTO projection_runs (scope, epoch, managed, selected, phase, descriptor_hash, protocol_version)
VALUES ($1, 1, true, true, 'ACTIVE', $2, 1)`, scope, h.DescriptorHash()); err != nil {
		t.Fatal(err)
	}
	run, err := w.s.SelectedRun(propCtx, scope)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := w.s.AcquireLease(propCtx, scope, "property", time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	src := &storetest.Ledger{}
	width := map[int64]int{}            // events per command seq
	orderVersions := map[string]int64{} // orders.version seen after the previous page
	r := rand.New(rand.NewPCG(c.Schedule, 0x73636864))
	var pending [][]byte // published, not yet received by the live projector
	var pages, refusedSizes, delivered, resets int
	var inStep, inLive, inPage, inApply time.Duration // wall time per action kind (reported, to size the cases)
	verified := int64(0)
	// deliver hands the live projector one pending event (the oldest, or a
	// random one with probability Reorder), maybe keeping it for a
	// redelivery.
	deliver := func() {
		pending, feed.msgs = append(pending, feed.msgs...), nil
		if len(pending) == 0 {
			return
		}
		i := 0
		if r.Float64() < c.Reorder {
			i = r.IntN(len(pending))
		}
		msg := pending[i]
		pending = append(pending[:i], pending[i+1:]...)
		if r.Float64() < c.Redeliver {
			pending = append(pending, msg)
		}
		if err := live.ApplyWire(propCtx, w.trade, scope, msg); err != nil {
			t.Fatalf("live projector: %v", err)
		}
		delivered++
	}
	// A page commits in write slices and the projection write lock is free
	// between them: live writes land there (docs/live-writes.md), and the page's later
	// slices must keep them (R1) and end in the replay all the same.
	w.s.SetSliceEvents(c.SliceEvents)
	w.s.SetAfterCommit(func(string) {
		for k := r.IntN(4); k > 0 && r.Float64() < c.MidPage; k-- {
			deliver()
		}
	})
	defer w.s.SetAfterCommit(nil)
	// reset deletes the cursor row between pages (never inside one: the
	// lease holder's page is one call here).
	reset := func() {
		if _, err := w.trade.Exec(propCtx, `DELETE FROM projection_catchup_cursor WHERE scope = $1`, scope); err != nil {
			t.Fatal(err)
		}
		resets, verified = resets+1, 0
	}
	for {
		canStep, canDeliver := int(lg.Committed()) < c.Commands, len(pending) > 0 || len(feed.msgs) > 0
		canPage := verified < lg.Committed()
		if !canStep && !canDeliver && !canPage {
			if resets < c.Resets {
				reset() // a reset of a CURRENT scope: the whole history re-verified
				continue
			}
			break
		}
		x := r.Float64() * (weight(canStep, c.WStep) + weight(canDeliver, c.WDeliver) + weight(canPage, c.WPage))
		began := time.Now()
		switch {
		case x < weight(canStep, c.WStep):
			cmd, outs, err := m.Step()
			if err != nil {
				t.Fatal(err)
			}
			width[cmd.Seq] = len(outs)
			for _, o := range outs {
				src.Events = append(src.Events, source.Event{Seq: cmd.Seq, Wire: o.Wire})
				src.Decoded = append(src.Decoded, o.Event)
			}
			inStep += time.Since(began)
		case x < weight(canStep, c.WStep)+weight(canDeliver, c.WDeliver):
			deliver()
			inLive += time.Since(began)
		default:
			if resets < c.Resets && verified > 0 && r.IntN(4) == 0 {
				reset()
				continue
			}
			cur, err := w.s.ReadCursor(propCtx, scope)
			if err != nil {
				t.Fatal(err)
			}
			size := c.PageSize
			if c.VarySize {
				size = min(max(1, c.PageSize/2)+r.IntN(c.PageSize+c.PageSize/2+1), source.MaxPageEvents)
			}
			page, err := cl.Fetch(propCtx, cur.VerifiedThroughSeq, cur.ChainDigest, run.DescriptorHash, size)
			var refusal *source.RefusalError
			if errors.As(err, &refusal) && refusal.Code == source.CodeCommandExceedsPage {
				// Pages hold whole commands: the member must refuse a size
				// below the next command's events, and only then.
				need := nextWidth(width, cur.VerifiedThroughSeq)
				if need <= size {
					t.Fatalf("member refused maxEvents %d after %d, the next command has %d events: %v", size, cur.VerifiedThroughSeq, need, err)
				}
				refusedSizes++
				page, err = cl.Fetch(propCtx, cur.VerifiedThroughSeq, cur.ChainDigest, run.DescriptorHash, need)
			}
			if err != nil {
				t.Fatalf("fetch after %d (maxEvents %d): %v", cur.VerifiedThroughSeq, size, err)
			}
			if page.Idle {
				verified = page.ThroughSeq
				continue
			}
			ab := time.Now()
			unit, err := w.s.PreparePage(run, page)
			if err != nil {
				t.Fatalf("page (%d, %d] of B %d: %v", page.AfterSeq, page.ThroughSeq, page.BoundarySeq, err)
			}
			// The pages after it, fetched ahead and merged when they may
			// be (page_merge.go): the unit must commit what the pages
			// one by one would.
			for last := page; unit.Pages() < c.Merge && last.ThroughSeq < last.BoundarySeq; {
				next, err := cl.Fetch(propCtx, last.ThroughSeq, last.DigestThrough, run.DescriptorHash, max(size, nextWidth(width, last.ThroughSeq)))
				if err != nil {
					t.Fatalf("fetch ahead after %d: %v", last.ThroughSeq, err)
				}
				if next.Idle {
					break
				}
				np, err := w.s.PreparePage(run, next)
				if err != nil {
					t.Fatalf("page (%d, %d] of B %d: %v", next.AfterSeq, next.ThroughSeq, next.BoundarySeq, err)
				}
				if !unit.Merge(np) {
					break
				}
				last = next
			}
			res, err := w.s.ApplyPrepared(propCtx, lease, run, unit)
			inApply += time.Since(ab)
			if err != nil {
				t.Fatalf("unit of %d pages from %d of B %d: %v", unit.Pages(), page.AfterSeq, page.BoundarySeq, err)
			}
			pages += unit.Pages()
			verified = res.VerifiedThroughSeq
			// The final comparison cannot see a rewind a later page repairs:
			// check after every page that no current order row went back.
			noRewind(t, w, scope, orderVersions, page)
			inPage += time.Since(began)
		}
	}
	src.Boundary = lg.Committed()
	st := m.Stats()
	t.Logf("B %d, %d events, feed dropped %d of them, %d deliveries (%s), %d pages (%s; %d refused sizes re-asked; %d cursor resets), member %s apply %s",
		src.Boundary, len(src.Events), st.Dropped, delivered, inLive.Round(time.Millisecond), pages, inPage.Round(time.Millisecond),
		refusedSizes, resets, inStep.Round(time.Millisecond), inApply.Round(time.Millisecond))
	assertScope(t, w, scope, src)
	return src
}

// noRewind fails the case if a current order row holds an older version
// than it did after the previous page, and records the versions now held.
func noRewind(t *testing.T, w *propWorker, scope string, seen map[string]int64, page *source.Page) {
	t.Helper()
	rows, err := w.s.Pool().Query(propCtx, `SELECT order_id, version FROM orders WHERE scope = $1`, scope)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		if v < seen[id] {
			t.Errorf("page (%d, %d] rewound order %s from version %d to %d", page.AfterSeq, page.ThroughSeq, id, seen[id], v)
		}
		seen[id] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

func weight(enabled bool, w float64) float64 {
	if enabled {
		return w
	}
	return 0
}

// nextWidth is the event count of the first command after seq that has events.
func nextWidth(width map[int64]int, after int64) int {
	for s := after + 1; ; s++ {
		n, ok := width[s]
		if !ok {
			return 0
		}
		if n > 0 {
			return n
		}
	}
}

// assertScope checks the property on scope against src.
func assertScope(t *testing.T, w *propWorker, scope string, src *storetest.Ledger) {
	t.Helper()
	cur, err := w.s.ReadCursor(propCtx, scope)
	if err != nil {
		t.Fatal(err)
	}
	if cur.State != store.StateCurrent || cur.VerifiedThroughSeq != src.Boundary || cur.EventCount != int64(len(src.Events)) {
		t.Errorf("%s: cursor %s through %d with %d events, want CURRENT through B %d with %d", scope, cur.State,
			cur.VerifiedThroughSeq, cur.EventCount, src.Boundary, len(src.Events))
	}
	if want := src.DigestThrough(src.Boundary); cur.ChainDigest != want {
		t.Errorf("%s: cursor digest %s, member's chain %s", scope, cur.ChainDigest, want)
	}
	pool := w.s.Pool()
	// CURRENT certifies every key re-derived from its retained trades: none
	// may be left deferred (docs/reverification.md).
	var deferred int
	if err := pool.QueryRow(propCtx, `SELECT count(*) FROM projection_catchup_basis WHERE scope = $1 AND deferred`, scope).Scan(&deferred); err != nil {
		t.Fatal(err)
	}
	if deferred != 0 {
		t.Errorf("%s: CURRENT with %d keys deferred", scope, deferred)
	}
	for _, cmp := range []struct {
		what string
		f    func(context.Context, *pgxpool.Pool, string, []wire.Event) (int, []string, error)
	}{
		{"positions", storetest.ComparePositions},
		{"trades", storetest.CompareTrades},
		{"orders", storetest.CompareOrders},
	} {
		_, diffs, err := cmp.f(propCtx, pool, scope, src.Decoded)
		if err != nil {
			t.Fatalf("%s: compare %s: %v", scope, cmp.what, err)
		}
		for i, d := range diffs {
			if i == 10 {
				t.Errorf("%s: ... and %d more %s differences", scope, len(diffs)-10, cmp.what)
				break
			}
			t.Errorf("%s: %s", scope, d)
		}
	}
}

// drop deletes a passed case's rows, so a worker's database stays small
// over thousands of cases.
func (w *propWorker) drop(t *testing.T, scope string) {
	t.Helper()
	for _, tbl := range w.tables {
		// Table names come from the catalogue, quoted as identifiers.
		if _, err := w.trade.Exec(propCtx, `DELETE FROM `+pgx.Identifier{tbl}.Sanitize()+` WHERE scope = $1`, scope); err != nil {
			t.Fatalf("drop %s of %s: %v", tbl, scope, err)
		}
	}
}
