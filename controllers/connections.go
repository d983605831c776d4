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

package controllers

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/notify"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// Connections keeps one PostgreSQL pool per DSN and one source client per
// member configuration, shared by every scope of this manager. Opening a pool
// or a TLS connection per reconcile would cost more than the idle cycle itself.
//
// Keys are SHA-256 hashes of the credentials, so the map never holds a DSN or
// token in a form that a heap dump or a debug print would show readably.
type Connections struct {
	// Tracer, when set, instruments every pool (benchmarks count statements).
	Tracer pgx.QueryTracer
	// MaxConnsPerDSN bounds each pool; a page uses one connection.
	MaxConnsPerDSN int32
	// NATS, when set, publishes every database's notification outbox after
	// commit (FR-APR06 R2): each pool gets a notify.Publisher, kicked after
	// every page that changed a position and polling every NotifyInterval
	// so rows left by a crash between commit and publish still go out.
	NATS           *nats.Conn
	NotifyInterval time.Duration
	Log            logr.Logger

	// base bounds the publishers' lifetime (the manager's, via Start).
	base      context.Context
	cancelPub map[string]context.CancelFunc

	mu      sync.Mutex
	stores  map[string]*store.Store
	clients map[string]*source.Client
	// users tracks which resources use which pool, so that a pool nobody
	// uses any more (resource deleted, Secret rotated to another DSN) is
	// closed instead of holding connections for the life of the manager.
	users      map[string]map[string]struct{} // pool key → resource keys
	resourceOf map[string]string              // resource key → pool key
}

func credentialKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s|", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Store returns the shared store for dsn on behalf of resource (namespace/name),
// opening its pool on first use.
func (c *Connections) Store(ctx context.Context, resource, dsn string) (*store.Store, error) {
	key := credentialKey(dsn)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.use(resource, key)
	if s, ok := c.stores[key]; ok {
		return s, nil
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors can quote the DSN; never surface that text.
		return nil, errors.New("the database DSN in the referenced Secret does not parse as a PostgreSQL connection string")
	}
	cfg.MaxConns = max(2, c.MaxConnsPerDSN)
	cfg.MaxConnIdleTime = 5 * time.Minute
	if c.Tracer != nil {
		cfg.ConnConfig.Tracer = c.Tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening database pool: %w", err)
	}
	if c.stores == nil {
		c.stores = map[string]*store.Store{}
	}
	s := store.New(pool)
	c.stores[key] = s
	c.startPublisher(key, s)
	return s, nil
}

// Start records the manager's lifetime for the outbox publishers and blocks
// until it ends (a manager.Runnable).
func (c *Connections) Start(ctx context.Context) error {
	c.mu.Lock()
	c.base = ctx
	c.mu.Unlock()
	<-ctx.Done()
	return nil
}

// startPublisher runs the outbox publisher of a new pool. Callers hold c.mu.
func (c *Connections) startPublisher(key string, s *store.Store) {
	if c.NATS == nil {
		return
	}
	base := c.base
	if base == nil {
		base = context.Background()
	}
	ctx, cancel := context.WithCancel(base)
	if c.cancelPub == nil {
		c.cancelPub = map[string]context.CancelFunc{}
	}
	c.cancelPub[key] = cancel
	pub := notify.New(s.Pool(), c.NATS, "")
	s.SetAfterCommit(pub.Kick)
	interval := c.NotifyInterval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	log := c.Log
	go pub.Run(ctx, interval, func(err error) { log.Info("publishing position notifications failed; retrying", "err", err.Error()) })
}

// closeStore stops a pool's publisher and closes the pool. Callers hold c.mu.
func (c *Connections) closeStore(key string) {
	if cancel, ok := c.cancelPub[key]; ok {
		cancel()
		delete(c.cancelPub, key)
	}
	if s, ok := c.stores[key]; ok {
		s.Close()
		delete(c.stores, key)
	}
}

// use records that resource now uses pool key, closing the pool it used
// before if nobody else does. Callers hold c.mu.
func (c *Connections) use(resource, key string) {
	if c.users == nil {
		c.users, c.resourceOf = map[string]map[string]struct{}{}, map[string]string{}
	}
	if old, ok := c.resourceOf[resource]; ok && old != key {
		c.drop(resource, old)
	}
	if c.users[key] == nil {
		c.users[key] = map[string]struct{}{}
	}
	c.users[key][resource] = struct{}{}
	c.resourceOf[resource] = key
}

// drop removes resource from pool key's users and closes an unused pool.
// Callers hold c.mu.
func (c *Connections) drop(resource, key string) {
	delete(c.users[key], resource)
	if len(c.users[key]) > 0 {
		return
	}
	delete(c.users, key)
	c.closeStore(key)
}

// Forget is called when resource is deleted: its pool closes if unused.
func (c *Connections) Forget(resource string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if key, ok := c.resourceOf[resource]; ok {
		delete(c.resourceOf, resource)
		c.drop(resource, key)
	}
}

// Client returns the shared source client for a resource's source spec.
func (c *Connections) Client(spec *recoveryv1.SourceSpec, sec resolvedSecrets) (*source.Client, error) {
	serverName := ""
	if spec.TLS != nil {
		serverName = spec.TLS.ServerName
	}
	key := credentialKey(spec.URL, sec.token, string(sec.ca), serverName)
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[key]; ok {
		return cl, nil
	}
	cfg := source.ClientConfig{BaseURL: spec.URL, Token: sec.token}
	if spec.TLS != nil {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
		if len(sec.ca) > 0 {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(sec.ca) {
				return nil, &invalidSpecError{"spec.source.tls.caSecretRef holds no PEM certificate"}
			}
			tc.RootCAs = pool
		}
		cfg.TLS = tc
	}
	cl, err := source.NewClient(cfg)
	if err != nil {
		return nil, &invalidSpecError{err.Error()}
	}
	if c.clients == nil {
		c.clients = map[string]*source.Client{}
	}
	c.clients[key] = cl
	return cl, nil
}

// ReleaseAll expires every lease owner holds in every database this manager
// has used, then closes the pools (FR-APR10: shutdown releases the lease, so
// another manager takes over at once instead of after a lease duration).
func (c *Connections) ReleaseAll(ctx context.Context, owner string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for key, s := range c.stores {
		if err := s.ReleaseAll(ctx, owner); err != nil {
			errs = append(errs, err)
		}
		c.closeStore(key)
	}
	return errors.Join(errs...)
}

// invalidSpecError is a spec the API server accepted but that cannot be used.
type invalidSpecError struct{ msg string }

func (e *invalidSpecError) Error() string { return e.msg }
