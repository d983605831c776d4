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

package member

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/source"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/reference/engine"
)

var desc = engine.TestDescriptor("scope-a")

func buildLog(t testing.TB, n, termEvery int) *engine.Log {
	t.Helper()
	l, err := engine.BuildLog(t.TempDir(), desc, 42, engine.WorkloadConfig{Openings: true}, n, termEvery)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

type fixture struct {
	log    *engine.Log
	h      *Handler
	srv    *httptest.Server
	client *source.Client
}

func serve(t testing.TB, l Log, opts HandlerOptions) *fixture {
	t.Helper()
	h := NewHandler(l, opts)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := source.NewClient(source.ClientConfig{BaseURL: srv.URL, Token: opts.Token})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{h: h, srv: srv, client: c}
	if el, ok := l.(*engine.Log); ok {
		f.log = el
	}
	return f
}

// catchUp pages from (afterSeq, digest) until idle or until throughSeq reaches
// the boundary observed on the first page, returning every page.
func catchUp(t testing.TB, c *source.Client, afterSeq int64, digest string, m int) []*source.Page {
	t.Helper()
	var pages []*source.Page
	for i := 0; ; i++ {
		p, err := c.Fetch(context.Background(), afterSeq, digest, desc.Hash(), m)
		if err != nil {
			t.Fatalf("page %d after %d: %v", i, afterSeq, err)
		}
		pages = append(pages, p)
		if p.Idle {
			return pages
		}
		afterSeq, digest = p.ThroughSeq, p.DigestThrough
		if i > 1_000_000 {
			t.Fatal("no progress")
		}
	}
}

func refusalCode(t testing.TB, err error) string {
	t.Helper()
	var re *source.RefusalError
	if !errors.As(err, &re) {
		t.Fatalf("want *source.RefusalError, got %T %v", err, err)
	}
	return re.Code
}

func fullReplay(t testing.TB, l *engine.Log) *engine.Replayer {
	t.Helper()
	r, err := engine.ReplayAll(l.Dir(), l.Committed())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var genesis = chain.Genesis

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// maxCommandEvents is the largest number of events one command emitted.
func maxCommandEvents(r *engine.Replayer) int {
	m := 0
	for s := int64(1); s <= r.Through(); s++ {
		m = max(m, len(r.Events(s-1, s)))
	}
	return m
}

func serveHandler(t testing.TB, h *Handler) *source.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := source.NewClient(source.ClientConfig{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
