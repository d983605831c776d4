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
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/catchup"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/notify"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// Connections keeps one PostgreSQL pool per DSN and one source client per
// member configuration, shared by every scope of this manager. Opening a pool
// or a TLS connection per reconcile would cost more than the idle cycle itself.
// Each pool and each client is tied to the resources that use it: when the
// last one is deleted or moves elsewhere (a rotated Secret, a new URL), it is
// closed, so a long-running manager does not accumulate them.
//
// Keys are SHA-256 hashes of the credentials, so the map never holds a DSN or
// token in a form that a heap dump or a debug print would show readably.
type Connections struct {
	// Tracer, when set, instruments every pool (benchmarks count statements).
	Tracer pgx.QueryTracer
	// MaxConnsPerDSN bounds each pool; a page uses one connection.
	MaxConnsPerDSN int32
	// SliceBudget is how long one write slice of a page aims to hold the
	// projection write lock of its keys, which a live write on those keys
	// also takes (store.SetSliceBudget; 0: store.DefaultSliceBudget; negative: a page
	// commits in one transaction). Shorter: live writes wait less behind
	// recovery; longer: recovery catches up faster.
	SliceBudget time.Duration
	// ApplySchema is the manager's auto-recovery flag as Store's schema step
	// needs it (NFR-APR01): on, missing migrations are applied when the
	// role may create tables in the schema (a disposable database's
	// superuser), and are SCHEMA_MISSING otherwise (the recommended runtime
	// role: the migrate step applies them); off, their absence is a
	// SCHEMA_MISSING refusal and nothing is written.
	ApplySchema bool
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
	stores  map[string]*pooledStore
	clients map[string]*sharedClient
	// poolUsers and clientUsers track which resources use which pool and
	// which client, so that one nobody uses any more is closed instead of
	// holding connections for the life of the manager.
	poolUsers, clientUsers users
	// closed is set once the manager's shutdown closed every pool
	// (ReleaseAll, Close). Shutdown runs concurrently with the workers'
	// last reconciles, so without it a reconcile still in flight could
	// open a pool after the close, and nobody would ever close that one:
	// its connections and its health-check goroutine would outlive the
	// manager.
	closed bool
}

// pooledStore is one shared pool and whether its schema step succeeded.
type pooledStore struct {
	st *store.Store
	// schemaMu serialises the schema step of this pool (one check, or one
	// migration, at a time); schemaOK caches its success only, so a database
	// that lacked the tables is checked again on the next call.
	schemaMu sync.Mutex
	// schemaOK is atomic so that ReleaseAll (holding c.mu) can read it
	// without schemaMu: ensureSchema takes schemaMu then c.mu, and the
	// opposite order would deadlock a shutdown racing a first use.
	schemaOK atomic.Bool
}

// sharedClient is one source client and the transport it owns.
type sharedClient struct {
	cl *source.Client
	tr *http.Transport
}

// users maps shared objects (by key) to the resources (namespace/name)
// using them. A resource uses at most one object of a kind at a time.
type users struct {
	of  map[string]string              // resource → key
	set map[string]map[string]struct{} // key → resources
}

// use records that resource now uses key. It returns the key resource used
// before when nobody uses that one any more (the caller closes it), else "".
func (u *users) use(resource, key string) (unused string) {
	if u.of == nil {
		u.of, u.set = map[string]string{}, map[string]map[string]struct{}{}
	}
	if old, ok := u.of[resource]; ok && old != key {
		unused = u.forget(resource)
	}
	if u.set[key] == nil {
		u.set[key] = map[string]struct{}{}
	}
	u.set[key][resource] = struct{}{}
	u.of[resource] = key
	return unused
}

// forget removes resource. It returns the key it used when nobody uses that
// one any more (the caller closes it), else "".
func (u *users) forget(resource string) (unused string) {
	key, ok := u.of[resource]
	if !ok {
		return ""
	}
	delete(u.of, resource)
	delete(u.set[key], resource)
	if len(u.set[key]) > 0 {
		return ""
	}
	delete(u.set, key)
	return key
}

func credentialKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s|", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Store returns the shared store for dsn on behalf of resource (namespace/name),
// opening its pool on first use and making sure recovery's schema is there
// (store.EnsureSchema with ApplySchema) before anyone reads or writes through
// it. Every error is a *codes.Refusal or classifies through codes.Of:
// DATABASE_UNAVAILABLE when the database cannot be reached, SCHEMA_MISSING
// when recovery's tables are absent and this manager may not create them.
func (c *Connections) Store(ctx context.Context, resource, dsn string) (*store.Store, error) {
	key := credentialKey(dsn)
	p, err := c.pool(ctx, resource, key, dsn)
	if err != nil {
		return nil, err
	}
	if err := c.ensureSchema(ctx, key, p); err != nil {
		return nil, err
	}
	return p.st, nil
}

// pool returns the shared pool for key, opening it on first use (pgxpool
// connects lazily: no I/O here, which is why c.mu may be held).
func (c *Connections) pool(ctx context.Context, resource, key, dsn string) (*pooledStore, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, codes.Newf(codes.DatabaseUnavailable, "the manager is shutting down: its database pools are closed")
	}
	if unused := c.poolUsers.use(resource, key); unused != "" {
		c.closeStore(unused)
	}
	if p, ok := c.stores[key]; ok {
		return p, nil
	}
	// The DSN is a tenant's: checked before anything parses it (a parse
	// reads the files it names). Past the check it holds only keys that
	// read nothing, so pgxpool's own parse below reads nothing either.
	if _, err := parseTenantDSN(dsn); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors can quote the DSN; never surface that text.
		return nil, codes.Newf(codes.DatabaseUnavailable, "the database DSN in the referenced Secret does not parse as a PostgreSQL connection string")
	}
	cfg.MaxConns = max(2, c.MaxConnsPerDSN)
	cfg.MaxConnIdleTime = 5 * time.Minute
	if c.Tracer != nil {
		cfg.ConnConfig.Tracer = c.Tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, &codes.Refusal{Code: codes.DatabaseUnavailable, Detail: "opening the database pool", Err: err}
	}
	if c.stores == nil {
		c.stores = map[string]*pooledStore{}
	}
	p := &pooledStore{st: store.New(pool)}
	p.st.SetSliceBudget(c.SliceBudget)
	c.stores[key] = p
	return p, nil
}

// ensureSchema runs the schema step of a pool until it succeeds once. It
// runs without c.mu: it is a database round trip (a migration, with auto-
// recovery on) and must not stall every other scope's Store call. The
// outbox publisher starts only after it succeeded: before, its table may
// not exist.
func (c *Connections) ensureSchema(ctx context.Context, key string, p *pooledStore) error {
	p.schemaMu.Lock()
	defer p.schemaMu.Unlock()
	if p.schemaOK.Load() {
		return nil
	}
	if err := p.st.EnsureSchema(ctx, c.ApplySchema); err != nil {
		return codes.Database("ensuring recovery's schema (ri06-automatic-recovery.sql)", err)
	}
	p.schemaOK.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stores[key] == p { // not closed meanwhile
		c.startPublisher(key, p.st)
	}
	return nil
}

// SchemaLost forgets that dsn's schema step succeeded, so the next Store
// call runs it again. A cycle calls it when the database answers
// SCHEMA_MISSING after the step had passed: the database was replaced or
// restored from a dump without recovery's tables. Without it the cached
// success would stand for the life of the manager, and a manager allowed to
// apply the schema would report SCHEMA_MISSING until restarted.
func (c *Connections) SchemaLost(dsn string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.stores[credentialKey(dsn)]; ok {
		p.schemaOK.Store(false)
	}
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

// startPublisher runs the outbox publisher of a pool. Callers hold c.mu.
//
// A manager with auto-recovery off (ApplySchema false) runs no polling
// publisher: marking an outbox row sent is a write, and such a manager
// writes nothing to SQL (NFR-APR01) of its own accord. The rows wait for a
// manager with auto-recovery on. Its pools drain only when kicked after a
// commit of their own (the reconciliation controller's pools: an approved
// repair's notifications, store.NotifyRepairTx), so a repaired balance
// reaches consumers at once and not at another manager's next poll.
func (c *Connections) startPublisher(key string, s *store.Store) {
	if c.NATS == nil {
		return
	}
	if _, running := c.cancelPub[key]; running {
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
	log := c.Log
	onErr := func(err error) { log.Info("publishing position notifications failed; retrying", "err", err.Error()) }
	if !c.ApplySchema {
		go pub.RunOnKick(ctx, onErr)
		return
	}
	interval := c.NotifyInterval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	go pub.Run(ctx, interval, onErr)
}

// closeStore stops a pool's publisher and closes the pool. Callers hold c.mu.
func (c *Connections) closeStore(key string) {
	if cancel, ok := c.cancelPub[key]; ok {
		cancel()
		delete(c.cancelPub, key)
	}
	if p, ok := c.stores[key]; ok {
		p.st.Close()
		delete(c.stores, key)
	}
}

// closeClient drops a source client and closes its idle connections (an
// unused keep-alive connection to a member would otherwise stay open until
// the member times it out). Callers hold c.mu.
func (c *Connections) closeClient(key string) {
	if sc, ok := c.clients[key]; ok {
		sc.tr.CloseIdleConnections()
		delete(c.clients, key)
	}
}

// Forget is called when resource is deleted or stops using connections (a
// refused duplicate): its pool and its client close if nobody else uses them.
func (c *Connections) Forget(resource string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if unused := c.poolUsers.forget(resource); unused != "" {
		c.closeStore(unused)
	}
	if unused := c.clientUsers.forget(resource); unused != "" {
		c.closeClient(unused)
	}
}

// Client returns the shared source client for a resource's source spec, on
// behalf of resource (namespace/name). A bearer token is only ever sent over
// https: the CRD refuses a tokenSecretRef with an http:// url, and this
// refuses it again for a resource stored under an older CRD.
func (c *Connections) Client(resource string, spec *recoveryv1.SourceSpec, sec resolvedSecrets) (*source.Client, error) {
	serverName := ""
	if spec.TLS != nil {
		serverName = spec.TLS.ServerName
	}
	// The request timeout is part of the key: a client's timeout is fixed
	// when it is built, so a changed spec.source.requestTimeout gets a new
	// client (and the old one is closed once nobody uses it).
	key := credentialKey(spec.URL, sec.token, string(sec.ca), serverName, spec.EffectiveRequestTimeout().String())
	c.mu.Lock()
	defer c.mu.Unlock()
	if sc, ok := c.clients[key]; ok {
		if unused := c.clientUsers.use(resource, key); unused != "" {
			c.closeClient(unused)
		}
		return sc.cl, nil
	}
	sc, err := newSharedClient(spec, sec, serverName)
	if err != nil {
		// The resource no longer uses the client it had (its spec changed
		// to something unusable).
		if unused := c.clientUsers.forget(resource); unused != "" {
			c.closeClient(unused)
		}
		return nil, err
	}
	if c.clients == nil {
		c.clients = map[string]*sharedClient{}
	}
	c.clients[key] = sc
	if unused := c.clientUsers.use(resource, key); unused != "" {
		c.closeClient(unused)
	}
	return sc.cl, nil
}

// newSharedClient builds a source client over its own transport, kept so
// that dropping the client can close its idle connections.
func newSharedClient(spec *recoveryv1.SourceSpec, sec resolvedSecrets, serverName string) (*sharedClient, error) {
	if sec.token != "" {
		if u, err := url.Parse(spec.URL); err != nil || u.Scheme != "https" {
			return nil, &catchup.InvalidSpecError{Msg: "spec.source.tokenSecretRef requires an https:// url: a bearer token sent over plain http travels in cleartext"}
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if spec.TLS != nil {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
		if len(sec.ca) > 0 {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(sec.ca) {
				return nil, &catchup.InvalidSpecError{Msg: "spec.source.tls.caSecretRef holds no PEM certificate"}
			}
			tc.RootCAs = pool
		}
		tr.TLSClientConfig = tc
	}
	// No CheckRedirect here: source.NewClient installs its own on every
	// client, so a 3xx is refused and the token never follows a Location.
	cl, err := source.NewClient(source.ClientConfig{BaseURL: spec.URL, Token: sec.token, Timeout: spec.EffectiveRequestTimeout(),
		HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		return nil, &catchup.InvalidSpecError{Msg: err.Error()}
	}
	return &sharedClient{cl: cl, tr: tr}, nil
}

// ReleaseAll expires every lease owner holds in every database this manager
// has used, then closes everything as Close does (FR-APR10: shutdown releases
// the lease, so another manager takes over at once instead of after a lease
// duration).
func (c *Connections) ReleaseAll(ctx context.Context, owner string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, p := range c.stores {
		// A pool whose schema step never succeeded holds no lease of ours
		// (no page, no lease statement ran through it); asking would only
		// fail on a missing table or an unreachable database.
		if p.schemaOK.Load() {
			if err := p.st.ReleaseAll(ctx, owner); err != nil {
				errs = append(errs, err)
			}
		}
	}
	c.closeAll()
	return errors.Join(errs...)
}

// Close closes every pool (stopping its outbox publisher) and every source
// client's idle connections, and from then on refuses to open a pool: for
// a manager's shutdown where no lease is held (the reconciliation
// controller's connections). Nothing this manager opened may outlive it.
func (c *Connections) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeAll()
}

// closeAll is Close; callers hold c.mu.
func (c *Connections) closeAll() {
	for key := range c.stores {
		c.closeStore(key)
	}
	for key := range c.clients {
		c.closeClient(key)
	}
	c.poolUsers, c.clientUsers = users{}, users{}
	c.closed = true
}
