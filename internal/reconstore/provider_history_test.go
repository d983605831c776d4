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
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// The streamed read (Open, DetectHistory over the provider's cursors,
// lookups and pages) reports and plans exactly what the materialised read
// (Read, then Detect) does, on real parts, while drift accumulates on one
// world: rows re-sequenced later (found by identity ahead of the stream)
// and earlier (held until their event), legacy rows, deleted and rewound
// rows, a duplicated trade_seq, a lowered cursor. Small pages put the
// pairs on different pages.
func TestProviderHistory_MatchesMaterialisedRead(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "stream", 300, worldOpts{catchUp: true})
	now := time.Now()
	for _, b := range historyBreaks() {
		if b.sql != "" {
			w.exec(b.sql, w.scope)
		}
		for _, pages := range []int{0, 16} {
			p := w.provider(pages)
			p.Clock = func() time.Time { return now }
			snap, err := p.Read(ctxb, w.scope)
			if err != nil {
				t.Fatalf("%s: read: %v", b.name, err)
			}
			want := reportAndPlan(t, snap, func() (*recon.Report, error) { return recon.Detect(snap) })
			s, h, release, err := p.Open(ctxb, w.scope)
			if err != nil {
				t.Fatalf("%s: open: %v", b.name, err)
			}
			got := reportAndPlan(t, s, func() (*recon.Report, error) { return recon.DetectHistory(ctxb, s, h) })
			release()
			if !bytes.Equal(got, want) {
				t.Fatalf("%s (pages of %d): the streamed read differs from the materialised one:\ngot  %s\nwant %s", b.name, pages, got, want)
			}
			if b.sql != "" && bytes.Contains(want, []byte(`"findings": []`)) {
				t.Fatalf("%s: no finding: the break did not break", b.name)
			}
		}
	}
}

func reportAndPlan(t *testing.T, s *recon.Snapshot, detect func() (*recon.Report, error)) []byte {
	t.Helper()
	r, err := detect()
	if err != nil {
		t.Fatal(err)
	}
	p, err := recon.PlanRepairs(r, s)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(struct {
		R *recon.Report
		P *recon.Plan
	}{r, p}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// historyBreak is one drift planted on a caught-up world (sql's $1 is the
// scope; "" plants nothing).
type historyBreak struct{ name, sql string }

// historyBreaks is drift accumulating on one world of 300 commands: rows
// re-sequenced later and earlier, legacy, deleted and rewound rows, a
// duplicated trade_seq, a lowered cursor.
func historyBreaks() []historyBreak {
	return []historyBreak{
		{"clean", ``},
		{"orphan trade", `INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts, written_by)
SELECT scope, 'orphan-1', trade_seq + 100000, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts, 'live'
  FROM trades WHERE scope = $1 ORDER BY seq LIMIT 1`},
		{"changed position", `UPDATE positions SET quantity = quantity + 7
 WHERE scope = $1 AND (account, instrument) = (SELECT account, instrument FROM positions WHERE scope = $1 ORDER BY account, instrument LIMIT 1)`},
		{"order row mismatch", `UPDATE orders SET remaining = remaining + 1
 WHERE scope = $1 AND order_id = (SELECT order_id FROM orders WHERE scope = $1 ORDER BY order_id LIMIT 1)`},
		{"trade re-sequenced later", `UPDATE trades SET seq = seq + 250
 WHERE scope = $1 AND trade_id = (SELECT trade_id FROM trades WHERE scope = $1 ORDER BY seq, trade_id OFFSET 5 LIMIT 1)`},
		{"trade re-sequenced earlier", `UPDATE trades SET seq = seq - 200
 WHERE scope = $1 AND trade_id = (SELECT trade_id FROM trades WHERE scope = $1 AND seq > 300 ORDER BY seq, trade_id LIMIT 1)`},
		{"order version re-sequenced later", `UPDATE order_events SET seq = seq + 180
 WHERE scope = $1 AND (order_id, version) = (SELECT order_id, version FROM order_events WHERE scope = $1 ORDER BY seq, order_id OFFSET 20 LIMIT 1)`},
		{"current order re-sequenced later", `UPDATE orders SET seq = seq + 150
 WHERE scope = $1 AND order_id = (SELECT order_id FROM orders WHERE scope = $1 ORDER BY seq, order_id OFFSET 3 LIMIT 1)`},
		{"legacy trade", `UPDATE trades SET seq = NULL
 WHERE scope = $1 AND trade_id = (SELECT trade_id FROM trades WHERE scope = $1 AND seq IS NOT NULL ORDER BY seq, trade_id OFFSET 40 LIMIT 1)`},
		{"legacy order version", `UPDATE order_events SET seq = NULL
 WHERE scope = $1 AND (order_id, version) = (SELECT order_id, version FROM order_events WHERE scope = $1 AND seq IS NOT NULL ORDER BY seq, order_id OFFSET 60 LIMIT 1)`},
		{"deleted order version", `DELETE FROM order_events
 WHERE scope = $1 AND (order_id, version) = (SELECT order_id, version FROM order_events WHERE scope = $1 ORDER BY seq, order_id OFFSET 90 LIMIT 1)`},
		{"deleted current order", `DELETE FROM orders
 WHERE scope = $1 AND order_id = (SELECT order_id FROM orders WHERE scope = $1 ORDER BY seq, order_id OFFSET 30 LIMIT 1)`},
		{"current order rewound", `UPDATE orders o SET version = e.version, seq = e.seq, remaining = e.remaining, status = e.status, ts = e.ts
  FROM order_events e
 WHERE o.scope = $1 AND e.scope = o.scope AND e.order_id = o.order_id AND e.version = 1
   AND o.order_id = (SELECT order_id FROM orders WHERE scope = $1 AND version > 2 ORDER BY order_id LIMIT 1)`},
		{"duplicated trade_seq", `INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts, written_by)
SELECT scope, trade_id || '-copy', trade_seq, seq, instrument, price, quantity, buy_order_id, sell_order_id, buy_account, sell_account, ts, 'live'
  FROM trades WHERE scope = $1 ORDER BY seq, trade_id OFFSET 70 LIMIT 1`},
		{"deleted trade below the cursor", `DELETE FROM trades
 WHERE scope = $1 AND trade_id = (SELECT trade_id FROM trades WHERE scope = $1 ORDER BY seq, trade_id OFFSET 80 LIMIT 1)`},
		{"lowered cursor: a backlog", `UPDATE projection_catchup_cursor SET verified_through_seq = verified_through_seq / 2 WHERE scope = $1`},
	}
}
