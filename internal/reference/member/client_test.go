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
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/source"

	"github.com/projection-recovery/projection-recovery/internal/chain"
)

// tamper serves the real member's page after rewriting it with edit.
func tamper(t *testing.T, edit func(p map[string]any)) *source.Client {
	t.Helper()
	l := buildLog(t, 30, 0)
	real := NewHandler(l, HandlerOptions{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		real.ServeHTTP(rec, r)
		var p map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
			t.Error(err)
		}
		edit(p)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		json.NewEncoder(w).Encode(p)
	}))
	t.Cleanup(srv.Close)
	c, err := source.NewClient(source.ClientConfig{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func verificationCode(err error) string {
	var ve *source.VerificationError
	if errors.As(err, &ve) {
		return ve.Code
	}
	return "not a source.VerificationError: " + errString(err)
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func events(p map[string]any) []any { return p["events"].([]any) }

func setWire(p map[string]any, i int, s string) {
	events(p)[i].(map[string]any)["wire"] = base64.StdEncoding.EncodeToString([]byte(s))
}

func TestClient_VerificationFailures(t *testing.T) {
	cases := []struct {
		name, code string
		edit       func(p map[string]any)
	}{
		{"protocol", source.VerifyProtocolMismatch, func(p map[string]any) { p["protocolVersion"] = 2 }},
		{"descriptor", source.VerifyDescriptorMismatch, func(p map[string]any) { p["descriptorHash"] = strings.Repeat("a", 64) }},
		{"descriptor shape", source.VerifyMalformedPage, func(p map[string]any) { p["descriptorHash"] = "xyz" }},
		{"afterSeq echo", source.VerifyAfterSeqMismatch, func(p map[string]any) { p["afterSeq"] = 1 }},
		{"through beyond boundary", source.VerifyOrdering, func(p map[string]any) { p["throughSeq"] = 31 }},
		{"digestAfter", source.VerifyDigestMismatch, func(p map[string]any) { p["digestAfter"] = strings.Repeat("b", 64) }},
		{"digestThrough", source.VerifyDigestMismatch, func(p map[string]any) { p["digestThrough"] = strings.Repeat("c", 64) }},
		{"dropped event", source.VerifyDigestMismatch, func(p map[string]any) { p["events"] = events(p)[1:] }},
		{"reordered", source.VerifyDigestMismatch, func(p map[string]any) {
			e := events(p) // swap two events of one command: ordering holds, the chain does not
			for i := 0; i+1 < len(e); i++ {
				if e[i].(map[string]any)["seq"] == e[i+1].(map[string]any)["seq"] {
					e[i], e[i+1] = e[i+1], e[i]
					return
				}
			}
			panic("no command with two events in the page")
		}},
		{"seq decreasing", source.VerifyOrdering, func(p map[string]any) {
			e := events(p)
			e[0], e[len(e)-1] = e[len(e)-1], e[0]
		}},
		{"seq outside page", source.VerifyOrdering, func(p map[string]any) { events(p)[0].(map[string]any)["seq"] = 0 }},
		{"wire seq mismatch", source.VerifyOrdering, func(p map[string]any) {
			setWire(p, 0, `{"type":"opening","seq":2,"account":"acct-1","instrument":"BTC-USD","quantity":"1","avgCost":"1"}`)
		}},
		{"wire not protocol v1", source.VerifyMalformedPage, func(p map[string]any) { setWire(p, 0, `{"type":"opening","seq":1}`) }},
		{"wire float amount", source.VerifyMalformedPage, func(p map[string]any) {
			setWire(p, 0, `{"type":"opening","seq":1,"account":"acct-1","instrument":"BTC-USD","quantity":1,"avgCost":"1"}`)
		}},
		{"wire not base64", source.VerifyMalformedPage, func(p map[string]any) { events(p)[0].(map[string]any)["wire"] = "!!" }},
		{"missing boundary", source.VerifyMalformedPage, func(p map[string]any) { delete(p, "boundarySeq") }},
		{"float seq", source.VerifyMalformedPage, func(p map[string]any) { p["throughSeq"] = 1.5 }},
		{"idle lie", source.VerifyMalformedPage, func(p map[string]any) { p["idle"] = true }},
		{"not advancing", source.VerifyMalformedPage, func(p map[string]any) { p["throughSeq"] = 0; p["events"] = []any{} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := tamper(t, c.edit)
			_, err := cl.Fetch(context.Background(), 0, chain.Genesis, desc.Hash(), 200)
			if got := verificationCode(err); got != c.code {
				t.Fatalf("want %s, got %s", c.code, got)
			}
			if source.IsTransient(err) {
				t.Fatal("verification failures are not transient")
			}
		})
	}
	// Unedited, the same proxy passes: the cases above fail for their edit only.
	if _, err := tamper(t, func(map[string]any) {}).Fetch(context.Background(), 0, chain.Genesis, desc.Hash(), 200); err != nil {
		t.Fatal(err)
	}
}

func TestClient_BodyTooLarge(t *testing.T) {
	l := buildLog(t, 200, 0)
	f := serve(t, l, HandlerOptions{})
	c, _ := source.NewClient(source.ClientConfig{BaseURL: f.srv.URL, MaxBodyBytes: 2048})
	_, err := c.Fetch(context.Background(), 0, chain.Genesis, desc.Hash(), 1000)
	if got := verificationCode(err); got != source.VerifyBodyTooLarge {
		t.Fatalf("got %s", got)
	}
}

func TestClient_UnavailableIsTransient(t *testing.T) {
	// 5xx
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusBadGateway)
	}))
	c, _ := source.NewClient(source.ClientConfig{BaseURL: srv.URL})
	_, err := c.Fetch(context.Background(), 0, chain.Genesis, "", 5)
	var ue *source.UnavailableError
	if !errors.As(err, &ue) || ue.Status != 502 || !source.IsTransient(err) {
		t.Fatalf("5xx: %v", err)
	}
	srv.Close()
	// connection refused
	_, err = c.Fetch(context.Background(), 0, chain.Genesis, "", 5)
	if !errors.As(err, &ue) || !source.IsTransient(err) {
		t.Fatalf("closed: %v", err)
	}
	// timeout
	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer slow.Close()
	defer close(block)
	c2, _ := source.NewClient(source.ClientConfig{BaseURL: slow.URL, Timeout: 50 * time.Millisecond})
	start := time.Now()
	_, err = c2.Fetch(context.Background(), 0, chain.Genesis, "", 5)
	if !errors.As(err, &ue) || !source.IsTransient(err) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("timeout: %v", err)
	}
	if ue.Timeout != 50*time.Millisecond || !strings.Contains(err.Error(), "request timeout (50ms)") {
		t.Fatalf("own timeout not reported as such: Timeout=%v, %v", ue.Timeout, err)
	}
}

// TestClient_TimeoutIsTheClientsOwn: UnavailableError.Timeout names the
// client's request timeout only when that deadline expired (headers late, or
// the body stalled after them), never when the caller's context ended: a
// controller tells its user to raise the timeout only when that would help.
func TestClient_TimeoutIsTheClientsOwn(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("afterSeq") == "1" { // headers and part of the body, then nothing
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.Write([]byte(`{"protocolVersion":`))
			w.(http.Flusher).Flush()
		}
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer stall.Close()
	const timeout = 100 * time.Millisecond
	c, _ := source.NewClient(source.ClientConfig{BaseURL: stall.URL, Timeout: timeout})
	digest1 := strings.Repeat("1", 64)
	for _, tc := range []struct {
		name     string
		after    int64
		digest   string
		ctx      func() (context.Context, context.CancelFunc)
		wantOwn  bool
		wantCode int
	}{
		{"no headers within the timeout", 0, chain.Genesis, func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, true, 0},
		{"body stalls after the headers", 1, digest1, func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, true, 200},
		{"caller's deadline first", 0, chain.Genesis, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), timeout/4)
		}, false, 0},
		{"caller cancels", 0, chain.Genesis, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(timeout/4, cancel)
			return ctx, cancel
		}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			_, err := c.Fetch(ctx, tc.after, tc.digest, "", 5)
			var ue *source.UnavailableError
			if !errors.As(err, &ue) || ue.Status != tc.wantCode {
				t.Fatalf("got %v, want an UnavailableError with status %d", err, tc.wantCode)
			}
			if own := ue.Timeout == timeout; own != tc.wantOwn || (!own && ue.Timeout != 0) {
				t.Fatalf("Timeout = %v, want the client's own (%v) %v: %v", ue.Timeout, timeout, tc.wantOwn, err)
			}
		})
	}
}

func TestClient_ArgumentChecks(t *testing.T) {
	c, _ := source.NewClient(source.ClientConfig{BaseURL: "http://127.0.0.1:1"})
	for _, tc := range []struct {
		name  string
		fetch func() error
	}{
		{"negative afterSeq", func() error { _, err := c.Fetch(context.Background(), -1, chain.Genesis, "", 5); return err }},
		{"afterDigest not a digest", func() error { _, err := c.Fetch(context.Background(), 0, "abc", "", 5); return err }},
		{"afterSeq 0 without the genesis digest", func() error {
			_, err := c.Fetch(context.Background(), 0, strings.Repeat("1", 64), "", 5)
			return err
		}},
		{"maxEvents 0", func() error { _, err := c.Fetch(context.Background(), 0, chain.Genesis, "", 0); return err }},
		{"maxEvents above the page limit", func() error {
			_, err := c.Fetch(context.Background(), 0, chain.Genesis, "", source.MaxPageEvents+1)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.fetch()
			var ue *source.UnavailableError
			if err == nil || errors.As(err, &ue) || source.IsTransient(err) {
				t.Errorf("bad argument: %v", err)
			}
		})
	}
	if _, err := source.NewClient(source.ClientConfig{BaseURL: "ftp://x"}); err == nil {
		t.Error("ftp base URL accepted")
	}
}

// TestChainThrough: the client's proof of the member's chain at a sequence
// (the idle proof, FR-APR03/04) is the chain a full replay gives there, for
// every sequence and page size, whether the member has moved on past it or
// not; a member below the sequence has nothing to prove against (transient,
// RETRYING), and a page that does not hash from its digestAfter to its
// digestThrough is refused as any page is.
func TestChainThrough(t *testing.T) {
	ctx := context.Background()
	l := buildLog(t, 30, 7)
	f := serve(t, l, HandlerOptions{})
	r := fullReplay(t, l)
	for _, m := range []int{10, 1000} {
		for seq := int64(1); seq <= l.Committed(); seq++ {
			p, err := f.client.ChainThrough(ctx, seq, desc.Hash(), m)
			if err != nil {
				t.Fatalf("maxEvents %d, seq %d: %v", m, seq, err)
			}
			if p.Seq != seq || p.Digest != r.Digest(seq) || p.BoundarySeq != l.Committed() {
				t.Fatalf("maxEvents %d, seq %d: %+v, want digest %s boundary %d", m, seq, p, r.Digest(seq), l.Committed())
			}
		}
	}
	t.Run("the member is below the sequence", func(t *testing.T) {
		_, err := f.client.ChainThrough(ctx, l.Committed()+1, desc.Hash(), 100)
		if !source.IsTransient(err) {
			t.Fatalf("seq B+1 (an idle page after B): %v, want transient", err)
		}
		_, err = f.client.ChainThrough(ctx, l.Committed()+5, desc.Hash(), 100)
		if !source.IsTransient(err) || refusalCode(t, err) != source.CodeAfterSeqBeyondBoundary {
			t.Fatalf("seq B+5: %v, want a transient AFTER_SEQ_BEYOND_BOUNDARY", err)
		}
	})
	t.Run("no chain through 0 to ask for", func(t *testing.T) {
		if _, err := f.client.ChainThrough(ctx, 0, desc.Hash(), 100); err == nil {
			t.Fatal("seq 0 accepted")
		}
	})
	t.Run("a page that does not hash to its digestThrough", func(t *testing.T) {
		c := tamper(t, func(p map[string]any) { p["digestThrough"] = strings.Repeat("a", 64) })
		_, err := c.ChainThrough(ctx, 10, desc.Hash(), 100)
		if got := verificationCode(err); got != source.VerifyDigestMismatch {
			t.Fatalf("got %s", got)
		}
	})
	t.Run("a digestAfter that is not a digest", func(t *testing.T) {
		c := tamper(t, func(p map[string]any) { p["digestAfter"] = "" })
		_, err := c.ChainThrough(ctx, 10, desc.Hash(), 100)
		if got := verificationCode(err); got != source.VerifyMalformedPage {
			t.Fatalf("got %s", got)
		}
	})
}
