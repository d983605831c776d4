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
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The proxy does what each fault says, or the soak would inject nothing.
func TestProxy_Faults(t *testing.T) {
	body := strings.Repeat("x", 64<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) }))
	defer srv.Close()
	p, err := StartProxy(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	get := func() (string, time.Duration, error) {
		c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		start := time.Now()
		resp, err := c.Get("http://" + p.Addr())
		if err != nil {
			return "", time.Since(start), err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), time.Since(start), err
	}
	for _, tc := range []struct {
		name  string
		fault Fault
		check func(t *testing.T, got string, took time.Duration, err error)
	}{
		{"pass", Fault{}, func(t *testing.T, got string, _ time.Duration, err error) {
			if err != nil || got != body {
				t.Fatalf("got %d bytes, %v", len(got), err)
			}
		}},
		{"delay", Fault{Mode: Delay, Delay: 150 * time.Millisecond}, func(t *testing.T, got string, took time.Duration, err error) {
			if err != nil || got != body || took < 300*time.Millisecond {
				t.Fatalf("got %d bytes in %s, %v", len(got), took, err)
			}
		}},
		{"cut short", Fault{Mode: CutShort, CutAfter: 1000}, func(t *testing.T, got string, _ time.Duration, err error) {
			if err == nil && got == body {
				t.Fatal("the whole answer came through")
			}
		}},
		{"reset", Fault{Mode: Reset}, func(t *testing.T, _ string, _ time.Duration, err error) {
			if !errors.Is(err, syscall.ECONNRESET) && (err == nil || !strings.Contains(err.Error(), "EOF")) {
				t.Fatalf("want a reset, got %v", err)
			}
		}},
		{"blackhole", Fault{Mode: Blackhole}, func(t *testing.T, _ string, took time.Duration, err error) {
			if err == nil || took < 2*time.Second {
				t.Fatalf("want the client's timeout, got %v after %s", err, took)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.Set(tc.fault)
			defer p.Set(Fault{})
			got, took, err := get()
			tc.check(t, got, took, err)
		})
	}
}

// Found at seed 1022870897: a member's port, found free and released, was
// taken by the next :0 listener before the member bound it. Member and NATS
// ports come from below the ephemeral range, distinct and bindable.
func TestFreePorts_BelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	ports, err := freePorts(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p >= low || p < 10000 || seen[p] {
			t.Fatalf("port %d: outside [10000, %d) or handed out twice (%v)", p, low, ports)
		}
		seen[p] = true
	}
}
