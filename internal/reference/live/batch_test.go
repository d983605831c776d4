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

package live_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/reference/live"
	. "github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// ApplyBatch (one transaction per backlog, docs/live-writes.md) writes
// exactly what Apply of each event in arrival order writes: the pipelined
// path (orders and trades, a redelivered trade, a self-trade, several trades
// of one key, an order version arriving after a newer one), and the
// event-by-event path a batch holding an opening takes. Each case is applied
// both ways into its own database and every projection table compared.
func TestLive_BatchWritesWhatEventByEventWrites(t *testing.T) {
	t.Parallel()
	orders := []wire.Event{
		Order(1, "o1", 1, "A", "ACME", wire.SideBuy, "100", "10", "10", wire.StatusNew),
		Order(3, "o1", 2, "A", "ACME", wire.SideBuy, "100", "10", "0", wire.StatusFilled),
		Order(2, "o2", 1, "B", "ACME", wire.SideSell, "90", "10", "10", wire.StatusNew),
	}
	trades := []wire.Event{
		Trade(3, 1, "t1", "ACME", "100", "10", "A", "B"),
		Trade(4, 2, "t2", "ACME", "120", "4", "B", "A"),
		Trade(5, 3, "t3", "ACME", "130", "2", "C", "C"), // self-trade: both legs on one key
		Trade(4, 2, "t2", "ACME", "120", "4", "B", "A"), // redelivery
		Trade(6, 4, "t4", "BOLT", "7", "1", "A", "C"),
	}
	cases := []struct {
		name string
		evs  []wire.Event
	}{
		{"orders and trades (pipelined)", append(append([]wire.Event{}, orders[2], orders[1], orders[0]), trades...)},
		{"with an opening (event by event)", append([]wire.Event{trades[0], Opening(2, "A", "ACME", "5", "50")}, trades[1:]...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			one, batch := newEnv(t, Descriptor), newEnv(t, Descriptor)
			feed(t, one, tc.evs...)
			if err := live.ApplyBatch(ctxb, batch.trade, "s", tc.evs); err != nil {
				t.Fatal(err)
			}
			for _, q := range projectionDump {
				a, b := dump(t, one, q), dump(t, batch, q)
				if !reflect.DeepEqual(a, b) {
					t.Errorf("%s\nevent by event: %v\nbatch:          %v", q, a, b)
				}
			}
			if got := position(t, batch, "A", "ACME"); got == "none" {
				t.Fatal("nothing written (test premise)")
			}
		})
	}
}

var projectionDump = []string{
	`SELECT trade_id, seq, trim_scale(quantity)::text, booking_status, written_by FROM trades ORDER BY trade_id`,
	`SELECT order_id, version, seq, remaining::text, status FROM orders ORDER BY order_id`,
	`SELECT order_id, version, seq FROM order_events ORDER BY order_id, version`,
	`SELECT account, instrument, trim_scale(quantity)::text, trim_scale(avg_cost)::text, trim_scale(opening_quantity)::text,
        coalesce(opening_seq, 0) FROM positions ORDER BY account, instrument`,
	`SELECT checkpoint_seq FROM projection_runs`,
}

func dump(t *testing.T, e env, q string) []string {
	t.Helper()
	rows, err := e.trade.Query(ctxb, q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, x := range v {
			b.WriteString(strings.TrimSpace(strings.ReplaceAll(fmtAny(x), "\n", " ")) + "|")
		}
		out = append(out, b.String())
	}
	return out
}

func fmtAny(x any) string { return strings.TrimSpace(fmt.Sprint(x)) }
