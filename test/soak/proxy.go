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
	"io"
	"net"
	"sync"
	"time"
)

// FaultMode is what the proxy does to the traffic it carries.
type FaultMode int

const (
	// Pass forwards both directions untouched.
	Pass FaultMode = iota
	// Delay holds every chunk for Fault.Delay before forwarding it (a slow
	// member or network).
	Delay
	// CutShort forwards Fault.CutAfter bytes of each answer and then closes
	// the connection: a page body or a watch stream ends mid-message.
	CutShort
	// Reset answers every connection with a TCP reset.
	Reset
	// Blackhole accepts connections and never answers: an unreachable peer
	// whose packets vanish, so clients wait for their own timeouts.
	Blackhole
)

func (m FaultMode) String() string {
	return [...]string{"pass", "delay", "cut-short", "reset", "blackhole"}[m]
}

// Fault is the proxy's current behaviour.
type Fault struct {
	Mode     FaultMode
	Delay    time.Duration
	CutAfter int
}

// Proxy is a fault-injecting TCP proxy on loopback, between a client (a
// manager) and a server (a member, the API server). Changing the fault
// closes the connections in flight unless the new fault is Pass or Delay, so
// keep-alive and HTTP/2 clients meet it at once rather than on their next
// dial.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	fault Fault
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	done  chan struct{}
}

// StartProxy listens on a free loopback port and forwards to target.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set changes the fault.
func (p *Proxy) Set(f Fault) {
	p.mu.Lock()
	p.fault = f
	var drop []net.Conn
	if f.Mode != Pass && f.Mode != Delay {
		for c := range p.conns {
			drop = append(drop, c)
		}
	}
	p.mu.Unlock()
	for _, c := range drop {
		abort(c, f.Mode == Reset)
	}
}

func (p *Proxy) current() Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault
}

// Close stops accepting, closes every connection and waits for the
// goroutines it started.
func (p *Proxy) Close() error {
	close(p.done)
	err := p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// abort closes c, with a TCP reset (SO_LINGER 0) when reset is set.
func abort(c net.Conn, reset bool) {
	if tc, ok := c.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	p.track(client, true)
	defer p.track(client, false)
	switch f := p.current(); f.Mode {
	case Reset:
		abort(client, true)
		return
	case Blackhole:
		// Hold the connection silently until the fault changes (Set
		// closes it) or the proxy closes.
		_, _ = io.Copy(io.Discard, client)
		_ = client.Close()
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		abort(client, true)
		return
	}
	p.track(server, true)
	defer p.track(server, false)
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); p.pipe(server, client, false) }()
	go func() { defer pipes.Done(); p.pipe(client, server, true) }()
	pipes.Wait()
}

// pipe copies src to dst under the current fault; answer marks the
// server-to-client direction, the one CutShort truncates. Either side ending
// closes both.
func (p *Proxy) pipe(dst, src net.Conn, answer bool) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	sent := 0
	for {
		n, err := src.Read(buf)
		if n > 0 {
			f := p.current()
			chunk := buf[:n]
			switch f.Mode {
			case Delay:
				select {
				case <-time.After(f.Delay):
				case <-p.done:
					return
				}
			case CutShort:
				if answer {
					if room := f.CutAfter - sent; room < len(chunk) {
						if room > 0 {
							_, _ = dst.Write(chunk[:room])
						}
						abort(dst, true)
						return
					}
				}
			case Reset, Blackhole:
				return
			}
			if _, werr := dst.Write(chunk); werr != nil {
				return
			}
			sent += n
		}
		if err != nil { // EOF or a closed side: either ends the pair
			return
		}
	}
}
