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
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/nats-io/nats.go"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// NATSTrigger turns the NATS subscriber's reconnect edge into cycles
// (FR-APR10): while the connection was down the live feed lost whatever was
// published, so every scope is enqueued at once instead of waiting for its
// periodic interval. The periodic interval keeps running independently of
// NATS: a manager with NATS unreachable still converges.
type NATSTrigger struct {
	URL    string
	Reader client.Reader // the manager's cache
	Events chan event.GenericEvent
	Log    logr.Logger

	nc      *nats.Conn
	ctx     context.Context
	started chan struct{} // closed by Start: the cache and ctx are usable
}

// NewNATSTrigger connects to url (retrying in the background until the
// server is reachable, and reconnecting forever) and returns a trigger whose
// Events feed the reconciler's Triggers. Conn is shared with the outbox
// publishers.
func NewNATSTrigger(url string, reader client.Reader, log logr.Logger) (*NATSTrigger, error) {
	t := &NATSTrigger{URL: url, Reader: reader, Events: make(chan event.GenericEvent, 1024), Log: log, started: make(chan struct{})}
	nc, err := nats.Connect(url,
		nats.Name("projection-recovery-manager"),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			t.Log.Info("NATS disconnected", "err", fmt.Sprint(err))
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			t.Log.Info("NATS reconnected: enqueueing every scope", "server", c.ConnectedUrlRedacted())
			t.enqueueAll()
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS: %w", err)
	}
	t.nc = nc
	return t, nil
}

// Conn is the trigger's NATS connection.
func (t *NATSTrigger) Conn() *nats.Conn { return t.nc }

// Start arms the reconnect edge and blocks until ctx ends, then closes the
// connection.
func (t *NATSTrigger) Start(ctx context.Context) error {
	t.ctx = ctx
	close(t.started)
	<-ctx.Done()
	t.nc.Close()
	return nil
}

// NeedLeaderElection: every manager reacts to its own reconnects.
func (t *NATSTrigger) NeedLeaderElection() bool { return false }

func (t *NATSTrigger) enqueueAll() {
	select {
	case <-t.started:
	default:
		return // before the manager started: its startup cycle covers it
	}
	ctx := t.ctx
	var list recoveryv1.ProjectionRecoveryList
	if err := t.Reader.List(ctx, &list); err != nil {
		t.Log.Error(err, "listing ProjectionRecoveries after a NATS reconnect")
		return
	}
	for i := range list.Items {
		select {
		case t.Events <- event.GenericEvent{Object: &list.Items[i]}:
		case <-ctx.Done():
			return
		}
	}
}
