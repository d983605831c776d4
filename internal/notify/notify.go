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

// Package notify publishes position notifications after commit (FR-APR06 R2).
//
// A page writes one outbox row per key whose final position differs from its
// pre-page value, inside the page transaction (internal/store), and so does a
// reconciliation repair for each key it changes (store.NotifyRepairTx). Nothing is
// published from inside a transaction: the Publisher reads committed outbox
// rows, publishes them to NATS with the row's idempotency key as the
// Nats-Msg-Id header, waits for the server to acknowledge the flush, and only
// then marks them sent. A crash between commit and publish therefore loses
// nothing (the rows stay unsent and are published later), and a crash between
// publish and marking re-sends with the same Nats-Msg-Id (at-least-once;
// JetStream de-duplicates on it, core subscribers can). A rolled-back page
// wrote no rows and publishes nothing.
package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/projection-recovery/projection-recovery/internal/store"
)

// DefaultSubjectPrefix: notifications go to <prefix>.<scope>.
const DefaultSubjectPrefix = "projection.positions"

// Notification is the JSON body of one message. Amounts are decimal strings.
type Notification struct {
	MsgID      string `json:"msgId"`
	Scope      string `json:"scope"`
	Account    string `json:"account"`
	Instrument string `json:"instrument"`
	Quantity   string `json:"quantity"`
	AvgCost    string `json:"avgCost"`
	CursorSeq  int64  `json:"cursorSeq"`
}

// Message is the NATS message of one notification: subject
// <prefix>.<scope> (prefix "" is DefaultSubjectPrefix), the JSON body, and
// the row's msg id as Nats-Msg-Id. Every sender of an outbox row uses it, so
// a row re-sent by another path is the same message and deduplicates.
func Message(prefix string, n Notification) (*nats.Msg, error) {
	if prefix == "" {
		prefix = DefaultSubjectPrefix
	}
	body, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("notify: encode notification %s: %w", n.MsgID, err)
	}
	msg := nats.NewMsg(prefix + "." + n.Scope)
	msg.Data = body
	msg.Header.Set(nats.MsgIdHdr, n.MsgID)
	return msg, nil
}

// Send publishes one notification (Message) and returns once the server
// has it (a flush, bounded by flushTimeout), so a caller that marks the row
// sent afterwards never marks one NATS did not receive. It is republish's
// send of one row; the outbox drain is Flush.
func Send(ctx context.Context, nc *nats.Conn, prefix string, n Notification) error {
	msg, err := Message(prefix, n)
	if err != nil {
		return err
	}
	if err := nc.PublishMsg(msg); err != nil {
		return fmt.Errorf("notify: publish %s: %w", n.MsgID, err)
	}
	fctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	if err := nc.FlushWithContext(fctx); err != nil {
		return fmt.Errorf("notify: flush %s: %w", n.MsgID, err)
	}
	return nil
}

// Publisher drains the outbox to NATS.
type Publisher struct {
	pool   *pgxpool.Pool
	nc     *nats.Conn
	prefix string
	batch  int
	kick   chan struct{}
	// beforeFlush, when set (tests), runs after a batch is published and
	// before the publisher waits for NATS to acknowledge it.
	beforeFlush func()
}

// New returns a publisher; prefix "" means DefaultSubjectPrefix.
func New(pool *pgxpool.Pool, nc *nats.Conn, prefix string) *Publisher {
	if prefix == "" {
		prefix = DefaultSubjectPrefix
	}
	return &Publisher{pool: pool, nc: nc, prefix: prefix, batch: 500, kick: make(chan struct{}, 1)}
}

// Subject of a scope's notifications.
func (p *Publisher) Subject(scope string) string { return p.prefix + "." + scope }

// Kick asks Run to flush now (store.Store.SetAfterCommit(p.Kick)). Never blocks.
func (p *Publisher) Kick(string) {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run flushes on every Kick and every interval until ctx ends. Errors are
// reported to onErr (may be nil) and retried on the next tick.
func (p *Publisher) Run(ctx context.Context, interval time.Duration, onErr func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := p.Flush(ctx); err != nil && onErr != nil && ctx.Err() == nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-t.C:
		}
	}
}

// RunOnKick flushes on every Kick, and only then, until ctx ends: the drain
// of a pool that commits notifications only now and then (a reconciliation
// repair's) under a manager that runs no polling publisher of its own. A
// failed flush is reported to onErr and left to the next kick and to the
// polling publishers: the rows stay unsent, nothing is lost.
func (p *Publisher) RunOnKick(ctx context.Context, onErr func(error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
		if _, err := p.Flush(ctx); err != nil && onErr != nil && ctx.Err() == nil {
			onErr(err)
		}
	}
}

// Flush publishes every committed, unsent outbox row in id order and marks
// them sent; it returns how many it published. At most one publisher drains a
// database's outbox at a time (see flushBatch), so with several managers each
// key's messages still leave in cursor order.
func (p *Publisher) Flush(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := p.flushBatch(ctx)
		total += n
		if err != nil || n < p.batch {
			return total, err
		}
	}
}

// The outbox drain lock: a session advisory lock, one per database, so one
// publisher (of any manager) sends and marks a batch at a time and the next
// one reads the outbox only after the previous batch is published and marked.
// It is a session lock, not a transaction's: the publisher holds it across
// the NATS flush, and a transaction held open across a network call would sit
// idle in transaction for as long as NATS takes to answer (up to
// flushTimeout), under the database's idle_in_transaction_session_timeout.
// Every statement between lock and unlock commits on its own. A release
// of the connection the lock may still be held on destroys the connection
// (the server drops its locks with the session), so the lock never outlives
// the batch in the pool. A manager of the previous release took the same key
// as a transaction lock; session and transaction advisory locks on one key
// exclude each other, so a rolling upgrade keeps one publisher at a time.
const (
	drainLockSQL   = `SELECT pg_advisory_lock(hashtextextended('projection-recovery:outbox', 0))`
	drainUnlockSQL = `SELECT pg_advisory_unlock(hashtextextended('projection-recovery:outbox', 0))`
)

// flushTimeout bounds the wait for NATS to acknowledge a batch.
const flushTimeout = 30 * time.Second

// flushBatch sends the oldest unsent rows, in id order, under the drain lock.
//
// Invariant: one key's messages leave in cursor order. Outbox ids of one
// scope increase with its cursor: pages of a scope serialize on the cursor
// row, which every page reads FOR UPDATE before it writes any outbox row
// (and, for keys they share, on the projection write lock of the keys), so
// page N+1 allocates its ids after page N committed. Sending in id order by one publisher at a time
// therefore sends page N's row of a key before page N+1's. Without the lock
// (rows claimed FOR UPDATE SKIP LOCKED by each publisher), a second manager
// skipped page N's row locked by the first and could publish page N+1's
// first, so subscribers saw a key's position go back in time.
func (p *Publisher) flushBatch(ctx context.Context) (int, error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("notify: acquire connection: %w", err)
	}
	// Unlocked on every way out, the lock statement's own failure included:
	// a wait cancelled just as the lock was granted can fail the statement
	// and still leave the lock on the session (session locks survive an
	// aborted statement). Unlocking a lock not held only returns false. The
	// unlock runs on a context of its own (the batch's may be what ended
	// it), and when it fails the session goes, and its lock with it.
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, drainUnlockSQL); err != nil {
			_ = conn.Conn().Close(uctx)
		}
		conn.Release()
	}()
	if _, err := conn.Exec(ctx, drainLockSQL); err != nil {
		return 0, fmt.Errorf("notify: outbox drain lock: %w", err)
	}
	n, err := p.sendBatch(ctx, conn)
	if err != nil {
		return 0, fmt.Errorf("notify: %w", err)
	}
	return n, nil
}

// sendBatch reads, publishes and marks one batch on conn, which holds the
// drain lock. No transaction is open: each statement commits on its own.
func (p *Publisher) sendBatch(ctx context.Context, conn *pgxpool.Conn) (int, error) {
	// Read after the lock, in a new statement: under READ COMMITTED it sees
	// the previous holder's sent_at marks (committed before it released the
	// lock), so no row is sent twice by a healthy pair.
	unsent, err := store.OutboxUnsent(ctx, conn, p.batch)
	if err != nil {
		return 0, fmt.Errorf("read outbox: %w", err)
	}
	ids := make([]int64, 0, len(unsent))
	msgs := make([]Notification, 0, len(unsent))
	for _, o := range unsent {
		ids = append(ids, o.ID)
		msgs = append(msgs, Notification{MsgID: o.MsgID, Scope: o.Scope, Account: o.Account, Instrument: o.Instrument,
			Quantity: o.Quantity, AvgCost: o.AvgCost, CursorSeq: o.CursorSeq})
	}
	if len(ids) == 0 {
		return 0, nil
	}
	for _, m := range msgs {
		msg, err := Message(p.prefix, m)
		if err != nil {
			return 0, err
		}
		if err := p.nc.PublishMsg(msg); err != nil {
			return 0, fmt.Errorf("publish %s: %w", m.MsgID, err)
		}
	}
	// The server has them before we mark them sent.
	if h := p.beforeFlush; h != nil {
		h()
	}
	fctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	if err := p.nc.FlushWithContext(fctx); err != nil {
		return 0, fmt.Errorf("flush nats: %w", err)
	}
	if err := store.OutboxMarkSentIDs(ctx, conn, ids); err != nil {
		return 0, fmt.Errorf("mark sent: %w", err)
	}
	return len(ids), nil
}
