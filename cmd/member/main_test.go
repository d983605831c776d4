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

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/source"
)

// End to end: the member publishes the exact wire bytes on NATS minus the
// dropped ones, and the contract serves all of them, in the same order.
func TestMember_FeedWithDropsAndContractAgree(t *testing.T) {
	cfg, err := parseFlags([]string{"--log-dir", t.TempDir(), "--scope", "e2e", "--listen", "127.0.0.1:0",
		"--nats-listen", "127.0.0.1:-1", "--rate", "0", "--max-commands", "300", "--drop-rate", "0.3", "--fsync=false"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var got [][]byte
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, cfg, slog.New(slog.DiscardHandler), func(httpAddr, natsURL string) {
			nc, err := nats.Connect(natsURL)
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(nc.Close)
			if _, err := nc.Subscribe("projection.events.e2e", func(m *nats.Msg) {
				mu.Lock()
				got = append(got, m.Data)
				mu.Unlock()
			}); err != nil {
				t.Error(err)
			}
			nc.Flush()
			ready <- httpAddr
		})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("member exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("member not ready")
	}
	base := "http://" + addr
	var d struct {
		DescriptorHash string `json:"descriptorHash"`
		BoundarySeq    int64  `json:"boundarySeq"`
	}
	for deadline := time.Now().Add(30 * time.Second); d.BoundarySeq < 300; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("boundary stuck at %d", d.BoundarySeq)
		}
		resp, err := http.Get(base + source.DescriptorPath)
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(resp.Body).Decode(&d)
		resp.Body.Close()
	}
	c, _ := source.NewClient(source.ClientConfig{BaseURL: base})
	var all [][]byte
	a, dg := int64(0), chain.Genesis
	for {
		p, err := c.Fetch(context.Background(), a, dg, d.DescriptorHash, 500)
		if err != nil {
			t.Fatal(err)
		}
		if p.Idle {
			break
		}
		for _, e := range p.Events {
			all = append(all, e.Wire)
		}
		a, dg = p.ThroughSeq, p.DigestThrough
	}
	if a != 300 {
		t.Fatalf("caught up to %d", a)
	}
	time.Sleep(300 * time.Millisecond) // let the last NATS messages arrive
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 || len(got) >= len(all) {
		t.Fatalf("received %d of %d events: want some dropped", len(got), len(all))
	}
	j := 0 // every received message is the next served event with the same bytes
	for _, m := range got {
		for j < len(all) && !bytes.Equal(all[j], m) {
			j++
		}
		if j == len(all) {
			t.Fatalf("published %s is not served in order", m)
		}
		j++
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestMember_ReopenRefusesOtherDescriptor(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := parseFlags([]string{"--log-dir", dir, "--fsync=false"})
	l, created, err := openLog(cfg)
	if err != nil || !created {
		t.Fatal(err)
	}
	l.Close()
	cfg2, _ := parseFlags([]string{"--log-dir", dir, "--instruments", "SOL-USD"})
	if _, _, err := openLog(cfg2); err == nil {
		t.Fatal("reopened a log under a different descriptor")
	}
	l, created, err = openLog(cfg)
	if err != nil || created || l.Term() != 2 {
		t.Fatalf("reopen: %v created=%v", err, created)
	}
	l.Close()
	if _, err := parseFlags([]string{"--drop-rate", "1.5"}); err == nil {
		t.Fatal("drop rate 1.5 accepted")
	}
}
