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
package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/notify"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// Checked counts what the checks compared.
type Checked struct {
	Keys, Trades, OrderVersions, Notifications, OutboxKeys int
}

// check runs every post-condition of the soak on every schedule.
func (b *Batch) check(ctx context.Context) {
	if err := b.awaitOutboxDrained(ctx, 60*time.Second); err != nil {
		b.fail("%v", err)
	}
	_ = b.e.NC.Flush() // everything the server routed to us before this is read
	for _, s := range b.scopes {
		b.checkScope(ctx, s)
	}
	var logs []string
	for _, s := range b.scopes {
		logs = append(logs, s.memberLog)
	}
	bad, err := b.e.BadLines(logs...)
	if err != nil {
		b.fail("scanning logs: %v", err)
	}
	for _, l := range bad {
		b.fail("log: %s", l)
	}
	for _, v := range b.orders.violations() {
		b.fail("order version rewound: %s", v)
	}
}

func (b *Batch) checkScope(ctx context.Context, s *scopeRun) {
	scope := s.sch.Scope
	evs, err := readSource(ctx, s.memberURL())
	if err != nil {
		b.fail("%s: reading the member: %v", scope, err)
		return
	}
	report := func(what string, n int, diffs []string, err error) int {
		if err != nil {
			b.fail("%s: %s: %v", scope, what, err)
			return 0
		}
		for i, d := range diffs {
			if i == 5 {
				b.fail("%s: %s: … %d differences in all", scope, what, len(diffs))
				break
			}
			b.fail("%s: %s: %s", scope, what, d)
		}
		return n
	}
	n, diffs, err := storetest.ComparePositions(ctx, b.e.Pool, scope, evs)
	b.checked.Keys += report("positions vs independent replay", n, diffs, err)
	n, diffs, err = storetest.CompareTrades(ctx, b.e.Pool, scope, evs)
	b.checked.Trades += report("trades vs source (a trade stored twice shows here)", n, diffs, err)
	n, diffs, err = storetest.CompareOrders(ctx, b.e.Pool, scope, evs)
	b.checked.OrderVersions += report("orders vs source (an older version kept shows here)", n, diffs, err)
	n, diffs, err = b.checkOutbox(ctx, scope)
	b.checked.OutboxKeys += report("notifications (outbox)", n, diffs, err)
	n, diffs = b.checkStream(scope)
	b.checked.Notifications += report("notifications (NATS)", n, diffs, nil)
}

// readSource reads the member's whole output through the verifying client.
func readSource(ctx context.Context, base string) ([]wire.Event, error) {
	cl, err := source.NewClient(source.ClientConfig{BaseURL: base})
	if err != nil {
		return nil, err
	}
	var evs []wire.Event
	after, digest := int64(0), chain.Genesis
	for {
		p, err := cl.Fetch(ctx, after, digest, "", source.MaxPageEvents)
		if err != nil {
			return nil, err
		}
		for _, e := range p.Events {
			ev, err := wire.Decode(e.Wire)
			if err != nil {
				return nil, err
			}
			evs = append(evs, ev)
		}
		if p.Idle || p.ThroughSeq == p.BoundarySeq {
			return evs, nil
		}
		after, digest = p.ThroughSeq, p.DigestThrough
	}
}

func (b *Batch) awaitOutboxDrained(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var unsent int
		err := b.e.Pool.QueryRow(ctx, `SELECT count(*) FROM projection_catchup_outbox WHERE scope = ANY($1) AND sent_at IS NULL`, b.scopeNames()).Scan(&unsent)
		if err == nil && unsent == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("outbox not drained %s after CURRENT: %d unsent (%v)", within, unsent, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lastOutboxSQL: per key, the last notification recovery wrote (by cursor),
// the key's final position, and whether a trade positioned after that cursor
// touches the key (then the live projector may have moved it since, and
// recovery rightly had nothing more to say: R2 publishes a key only when a
// page changes it).
const lastOutboxSQL = `
SELECT o.account, o.instrument, o.msg_id, o.quantity::text, o.avg_cost::text, o.cursor_seq,
       coalesce(p.quantity::text, '-'), coalesce(p.avg_cost::text, '-'),
       coalesce(o.quantity = p.quantity AND o.avg_cost = p.avg_cost, false),
       EXISTS (SELECT 1 FROM trades t WHERE t.scope = o.scope AND t.instrument = o.instrument
                  AND (t.buy_account = o.account OR t.sell_account = o.account) AND t.seq > o.cursor_seq)
  FROM (SELECT DISTINCT ON (account, instrument) *
          FROM projection_catchup_outbox WHERE scope = $1
         ORDER BY account, instrument, cursor_seq DESC, id DESC) o
  LEFT JOIN positions p ON p.scope = o.scope AND p.account = o.account AND p.instrument = o.instrument`

// checkOutbox: every key's last notification carries its final value, unless
// a later trade moved the key through the live path (FR-APR06 R2).
func (b *Batch) checkOutbox(ctx context.Context, scope string) (int, []string, error) {
	rows, err := b.e.Pool.Query(ctx, lastOutboxSQL, scope)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	var diffs []string
	n := 0
	last := map[string]string{}
	for rows.Next() {
		var acct, instr, msgID, q, a, pq, pa string
		var cursor int64
		var same, later bool
		if err := rows.Scan(&acct, &instr, &msgID, &q, &a, &cursor, &pq, &pa, &same, &later); err != nil {
			return n, diffs, err
		}
		n++
		last[acct+"/"+instr] = msgID
		if !same && !later {
			diffs = append(diffs, fmt.Sprintf("key %s/%s: last notification %s@%s (cursor %d), final position %s@%s, and no later trade explains it", acct, instr, q, a, cursor, pq, pa))
		}
	}
	b.lastMsg[scope] = last
	return n, diffs, rows.Err()
}

// checkStream: per key, the notifications received leave in cursor order (a
// re-sent message, same Nats-Msg-Id, is skipped); without a NATS restart in
// the batch, the last one received is the outbox's last.
func (b *Batch) checkStream(scope string) (int, []string) {
	msgs := b.notes.of(scope)
	seen := map[string]bool{}
	cursor := map[string]int64{}
	lastID := map[string]string{}
	var diffs []string
	for _, m := range msgs {
		if seen[m.MsgID] {
			continue
		}
		seen[m.MsgID] = true
		k := m.Account + "/" + m.Instrument
		if c, ok := cursor[k]; ok && m.CursorSeq < c {
			diffs = append(diffs, fmt.Sprintf("key %s: notification at cursor %d arrived after one at %d", k, m.CursorSeq, c))
		}
		cursor[k], lastID[k] = m.CursorSeq, m.MsgID
	}
	if !b.natsRestarted.Load() {
		for k, want := range b.lastMsg[scope] {
			if lastID[k] != want {
				diffs = append(diffs, fmt.Sprintf("key %s: last notification received %q, outbox's last %q", k, lastID[k], want))
			}
		}
	}
	return len(seen), diffs
}

// notifications records every position notification in arrival order.
type notifications struct {
	sub *nats.Subscription
	mu  sync.Mutex
	by  map[string][]notify.Notification
}

func subscribeNotifications(nc *nats.Conn) *notifications {
	n := &notifications{by: map[string][]notify.Notification{}}
	n.sub, _ = nc.Subscribe(notify.DefaultSubjectPrefix+".>", func(m *nats.Msg) {
		var x notify.Notification
		if json.Unmarshal(m.Data, &x) == nil {
			n.mu.Lock()
			n.by[x.Scope] = append(n.by[x.Scope], x)
			n.mu.Unlock()
		}
	})
	return n
}

func (n *notifications) of(scope string) []notify.Notification {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]notify.Notification(nil), n.by[scope]...)
}

func (n *notifications) close() {
	if n.sub != nil {
		_ = n.sub.Unsubscribe()
	}
}

// orderSampler reads the batch's order versions every 200 ms while the
// faults run: a version that goes down between two reads was rewound, even
// if a later page wrote it forward again.
type orderSampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	bad    []string
}

func startOrderSampler(ctx context.Context, pool *pgxpool.Pool, scopes []string) *orderSampler {
	ctx, cancel := context.WithCancel(ctx)
	o := &orderSampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		seen := map[string]int64{}
		for {
			rows, err := pool.Query(ctx, `SELECT scope, order_id, version FROM orders WHERE scope = ANY($1)`, scopes)
			if err == nil {
				for rows.Next() {
					var scope, id string
					var v int64
					if rows.Scan(&scope, &id, &v) != nil {
						break
					}
					k := scope + "/" + id
					if was, ok := seen[k]; ok && v < was {
						o.mu.Lock()
						o.bad = append(o.bad, fmt.Sprintf("%s: version %d after %d", k, v, was))
						o.mu.Unlock()
					}
					seen[k] = max(seen[k], v)
				}
				rows.Close()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return o
}

func (o *orderSampler) stop() {
	if o == nil {
		return
	}
	o.cancel()
	<-o.done
}

func (o *orderSampler) violations() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.bad
}
