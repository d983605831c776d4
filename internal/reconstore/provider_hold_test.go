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

package reconstore

import (
	"math"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// backend is what pg_stat_activity says of the history's connection:
// whether it holds a snapshot (backend_xmin) and its state.
func backend(t *testing.T, w *world, h *history) (holds bool, state string) {
	t.Helper()
	pid := h.conn.Conn().PgConn().PID()
	if err := w.admin.QueryRow(ctxb, `SELECT backend_xmin IS NOT NULL, state FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&holds, &state); err != nil {
		t.Fatal(err)
	}
	return holds, state
}

// openAsDetection opens the history and makes the calls detection makes
// before its first page.
func openAsDetection(t *testing.T, p *Provider, scope string, paced bool) (*history, func()) {
	t.Helper()
	_, hi, release, err := p.Open(ctxb, scope)
	if err != nil {
		t.Fatal(err)
	}
	h := hi.(*history)
	if paced {
		h.ReadSerially()
	}
	if _, err := h.Legacy(ctxb); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.Duplicates(ctxb); err != nil {
		t.Fatal(err)
	}
	if err := h.CurrentOrders(ctxb, func(string, int64) {}); err != nil {
		t.Fatal(err)
	}
	return h, release
}

// A paced read (minutes long) holds no snapshot past its first page: its
// transaction is committed and its cursors keep the rows of that snapshot,
// so a row deleted after it is still streamed, while the database prunes
// freely. An unpaced read keeps its transaction. Released, the held
// cursors are closed before the connection returns to the pool: the next
// read on it declares them again.
func TestProviderHistory_PacedReadHoldsNoSnapshot(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "held", 300, worldOpts{catchUp: true})
	cfg, err := pgxpool.ParseConfig(w.db.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // every read on the same connection
	pool, err := pgxpool.NewWithConfig(ctxb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	p := w.provider(16)
	p.Pool = pool
	var last string
	if err := w.admin.QueryRow(ctxb, `SELECT trade_id FROM trades WHERE scope = $1 ORDER BY seq DESC, trade_id DESC LIMIT 1`, w.scope).Scan(&last); err != nil {
		t.Fatal(err)
	}
	w.exec(`CREATE TABLE held_saved (LIKE trades)`)
	w.exec(`INSERT INTO held_saved SELECT * FROM trades WHERE scope = $1 AND trade_id = $2`, w.scope, last)
	streamed := func(h *history) map[string]bool {
		t.Helper()
		seen := map[string]bool{}
		for {
			pg, err := h.NextPage(ctxb)
			if err != nil {
				t.Fatal(err)
			}
			through := int64(math.MaxInt64)
			if pg != nil {
				through = pg.Through
			}
			rows, err := h.RowsThrough(ctxb, through)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows.Trades {
				seen[r.TradeID] = true
			}
			if pg == nil {
				return seen
			}
		}
	}
	for _, c := range []struct {
		name  string
		paced bool
	}{{"unpaced", false}, {"paced", true}, {"paced again on the same connection", true}} {
		t.Run(c.name, func(t *testing.T) {
			h, end := openAsDetection(t, p, w.scope, c.paced)
			var once sync.Once
			release := func() { once.Do(end) }
			defer release() // a failed check must not keep the pool's one connection
			if holds, state := backend(t, w, h); !holds || state != "idle in transaction" {
				t.Fatalf("before the first page: snapshot %v, state %q; want the transaction open", holds, state)
			}
			if _, err := h.NextPage(ctxb); err != nil {
				t.Fatal(err)
			}
			holds, state := backend(t, w, h)
			if c.paced && (holds || state != "idle") {
				t.Fatalf("a paced read after its first page: snapshot %v, state %q; want none, idle", holds, state)
			}
			if !c.paced && (!holds || state != "idle in transaction") {
				t.Fatalf("an unpaced read after its first page: snapshot %v, state %q; want its transaction", holds, state)
			}
			// Deleted after the snapshot, never streamed yet: the stream still has it.
			w.exec(`DELETE FROM trades WHERE scope = $1 AND trade_id = $2`, w.scope, last)
			defer w.exec(`INSERT INTO trades SELECT * FROM held_saved`)
			if !streamed(h)[last] {
				t.Fatalf("trade %s deleted after the snapshot was not streamed: the read left its snapshot", last)
			}
			release()
			var cursors int
			if err := pool.QueryRow(ctxb, `SELECT count(*) FROM pg_cursors WHERE name LIKE 'recon\_%'`).Scan(&cursors); err != nil {
				t.Fatal(err)
			}
			if cursors != 0 {
				t.Fatalf("%d cursors left on the pooled connection", cursors)
			}
		})
	}
}
