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

package source

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	BaseURL      string        // http(s)://host:port of the member (no path, or a path prefix)
	Token        string        // optional bearer token
	TLS          *tls.Config   // used when HTTPClient is nil
	MaxBodyBytes int64         // bound on a response body; default DefaultMaxBodyBytes
	Timeout      time.Duration // per-request deadline on top of ctx; default DefaultTimeout
	// HTTPClient is optional and overrides TLS. NewClient uses a copy of it
	// whose CheckRedirect refuses every redirect (see refuseRedirect).
	HTTPClient *http.Client
}

// Defaults of ClientConfig.
const (
	DefaultMaxBodyBytes = 64 << 20
	DefaultTimeout      = 30 * time.Second
)

// Client fetches and verifies catch-up pages.
type Client struct {
	base    *url.URL
	token   string
	max     int64
	timeout time.Duration
	hc      *http.Client
}

// NewClient validates cfg.
func NewClient(cfg ClientConfig) (*Client, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("source client: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("source client: base URL %q: want http(s)://host[:port]", cfg.BaseURL)
	}
	c := &Client{base: u, token: cfg.Token, max: cfg.MaxBodyBytes, timeout: cfg.Timeout, hc: cfg.HTTPClient}
	if c.max <= 0 {
		c.max = DefaultMaxBodyBytes
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = cfg.TLS
		c.hc = &http.Client{Transport: tr}
	}
	// Every client this package uses refuses redirects, whoever built it: a
	// copy, so the caller's client keeps its own policy.
	hc := *c.hc
	hc.CheckRedirect = refuseRedirect
	c.hc = &hc
	return c, nil
}

// CodeRedirectRefused is the Code of the *RefusalError for a 3xx answer. The
// client sets it, not the member: the v1 contract answers 200, 4xx or 5xx.
const CodeRedirectRefused = "REDIRECT_REFUSED"

// refuseRedirect is the CheckRedirect of every source client: it never
// follows a redirect and hands the 3xx back to Fetch, which refuses it
// (http.ErrUseLastResponse). The contract has no redirects, and Go's default
// policy re-sends Authorization to the same host even from https to http:
// following a Location would put the bearer token and the request wherever
// the answer (or whoever rewrote it) says.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// redirectRefusal is the refusal of a 3xx, naming where it pointed
// (userinfo redacted, truncated) so an operator can fix the source URL.
func redirectRefusal(resp *http.Response) *RefusalError {
	where := "no Location"
	if loc, err := resp.Location(); err == nil {
		where = "Location " + strconv.Quote(truncate(loc.Redacted()))
	} else if raw := resp.Header.Get("Location"); raw != "" {
		where = "unparsable Location " + strconv.Quote(truncate(raw))
	}
	return &RefusalError{Status: resp.StatusCode, Code: CodeRedirectRefused,
		Message: fmt.Sprintf("%s (%s) not followed: the v1 source contract has no redirects; point the source URL at the member itself", resp.Status, where)}
}

// Fetch asks for the page after (afterSeq, afterDigest) and verifies
// everything visible in it before returning it (see VerifyPage). Errors are
// *RefusalError (a 3xx too: CodeRedirectRefused, never followed),
// *VerificationError, *UnavailableError, or a plain error for invalid
// arguments.
func (c *Client) Fetch(ctx context.Context, afterSeq int64, afterDigest, expectDescriptor string, maxEvents int) (*Page, error) {
	if err := checkRequest(afterSeq, afterDigest, expectDescriptor, maxEvents); err != nil {
		return nil, err
	}
	body, err := c.get(ctx, afterSeq, maxEvents)
	if err != nil {
		return nil, err
	}
	return VerifyPage(body, afterSeq, afterDigest, expectDescriptor, maxEvents)
}

// get sends one contract request and returns the body of a 200 JSON answer;
// every other answer is the error Fetch documents.
func (c *Client) get(ctx context.Context, afterSeq int64, maxEvents int) ([]byte, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// timedOut: the request's own deadline expired, not the caller's.
	timedOut := func() time.Duration {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && parent.Err() == nil {
			return c.timeout
		}
		return 0
	}
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + CatchupPath
	u.RawQuery = url.Values{
		"afterSeq":  {strconv.FormatInt(afterSeq, 10)},
		"maxEvents": {strconv.Itoa(maxEvents)},
	}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("source client: build request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, &UnavailableError{Timeout: timedOut(), Err: fmt.Errorf("GET %s: %w", u.Redacted(), err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.max+1))
	if err != nil {
		return nil, &UnavailableError{Status: resp.StatusCode, Timeout: timedOut(), Err: fmt.Errorf("read body: %w", err)}
	}
	if int64(len(body)) > c.max {
		if resp.StatusCode == http.StatusOK {
			return nil, &VerificationError{Code: VerifyBodyTooLarge, Detail: fmt.Sprintf("body exceeds %d bytes", c.max)}
		}
		body = body[:0]
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			return nil, &VerificationError{Code: VerifyMalformedPage, Detail: "content type " + strconv.Quote(ct)}
		}
		return body, nil
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusRequestTimeout:
		return nil, &UnavailableError{Status: resp.StatusCode, Err: errors.New(errorMessage(body, resp.Status))}
	case resp.StatusCode >= 400:
		var rb RefusalBody
		if err := json.Unmarshal(body, &rb); err != nil || rb.Code == "" {
			if resp.StatusCode == http.StatusConflict {
				return nil, &VerificationError{Code: VerifyMalformedPage, Detail: "409 without a refusal code"}
			}
			rb = RefusalBody{Code: "HTTP_" + strconv.Itoa(resp.StatusCode), Message: errorMessage(body, resp.Status)}
		}
		return nil, &RefusalError{Status: resp.StatusCode, Code: rb.Code, Message: rb.Message, BoundarySeq: rb.BoundarySeq}
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return nil, redirectRefusal(resp)
	default:
		return nil, &VerificationError{Code: VerifyMalformedPage, Detail: "unexpected HTTP status " + resp.Status}
	}
}

func errorMessage(body []byte, status string) string {
	var rb RefusalBody
	if json.Unmarshal(body, &rb) == nil && rb.Message != "" {
		return rb.Code + ": " + rb.Message
	}
	return status
}

func checkRequest(afterSeq int64, afterDigest, expectDescriptor string, maxEvents int) error {
	switch {
	case afterSeq < 0:
		return fmt.Errorf("source client: afterSeq %d < 0", afterSeq)
	case !chain.Valid(afterDigest):
		return fmt.Errorf("source client: afterDigest %q is not 64 lowercase hex", afterDigest)
	case afterSeq == 0 && afterDigest != chain.Genesis:
		return fmt.Errorf("source client: afterSeq 0 requires the genesis digest")
	case expectDescriptor != "" && !chain.Valid(expectDescriptor):
		return fmt.Errorf("source client: expected descriptor %q is not 64 lowercase hex", expectDescriptor)
	case maxEvents < 1 || maxEvents > MaxPageEvents:
		return fmt.Errorf("source client: maxEvents %d outside 1..%d", maxEvents, MaxPageEvents)
	}
	return nil
}

func malformed(format string, args ...any) error {
	return &VerificationError{Code: VerifyMalformedPage, Detail: fmt.Sprintf(format, args...)}
}

// VerifyPage decodes a 200 body and refuses it unless it holds everything a
// single page can prove (FR-APR02..04; the list is docs/source-contract.md,
// "What the operator checks on every page"): version, descriptor, the
// echoed afterSeq, ordered seqs inside (afterSeq, throughSeq], each wire
// decoding, and digestAfter == afterDigest with digestThrough recomputed
// over the wire bytes. An idle page's Page carries afterDigest as both
// digests. What lies between pages the chain proves across them.
func VerifyPage(body []byte, afterSeq int64, afterDigest, expectDescriptor string, maxEvents int) (*Page, error) {
	if err := checkRequest(afterSeq, afterDigest, expectDescriptor, maxEvents); err != nil {
		return nil, err
	}
	return verifyBody(body, afterSeq, afterDigest, expectDescriptor, maxEvents)
}

// verifyBody is VerifyPage after its request check. An empty afterDigest
// is unknown to the caller (ChainThrough): a non-idle page's own
// digestAfter, a valid digest, is taken as the chain's start and everything
// after it is verified as VerifyPage does.
func verifyBody(body []byte, afterSeq int64, afterDigest, expectDescriptor string, maxEvents int) (*Page, error) {
	// One typed pass over the body: decoding field by field and then every
	// event again costs a catch-up dearly (docs/performance.md). Pointers
	// tell a missing or null field from a zero value.
	body0, err := decodePage(body)
	if err != nil {
		return nil, malformedJSON(err)
	}
	p := &Page{}
	for _, f := range []struct {
		name     string
		set      bool
		required bool
	}{
		{"protocolVersion", body0.ProtocolVersion != nil, true},
		{"descriptorHash", body0.DescriptorHash != nil, true},
		{"boundarySeq", body0.BoundarySeq != nil, true},
		{"afterSeq", body0.AfterSeq != nil, true},
		{"throughSeq", body0.ThroughSeq != nil, true},
		{"idle", body0.Idle != nil, true},
	} {
		if !f.set && f.required {
			return nil, malformed("field %q missing", f.name)
		}
	}
	p.ProtocolVersion, p.DescriptorHash, p.BoundarySeq = *body0.ProtocolVersion, *body0.DescriptorHash, *body0.BoundarySeq
	p.AfterSeq, p.ThroughSeq, p.Idle = *body0.AfterSeq, *body0.ThroughSeq, *body0.Idle
	if body0.DigestAfter != nil {
		p.DigestAfter = *body0.DigestAfter
	}
	if body0.DigestThrough != nil {
		p.DigestThrough = *body0.DigestThrough
	}
	if p.ProtocolVersion != wire.ProtocolVersion {
		return nil, &VerificationError{Code: VerifyProtocolMismatch, Detail: fmt.Sprintf("page protocol %d, client speaks %d", p.ProtocolVersion, wire.ProtocolVersion)}
	}
	if !chain.Valid(p.DescriptorHash) {
		return nil, malformed("descriptorHash %q is not 64 lowercase hex", truncate(p.DescriptorHash))
	}
	if expectDescriptor != "" && p.DescriptorHash != expectDescriptor {
		return nil, &VerificationError{Code: VerifyDescriptorMismatch, Detail: fmt.Sprintf("page descriptor %s, expected %s", p.DescriptorHash, expectDescriptor)}
	}
	if p.AfterSeq != afterSeq {
		return nil, &VerificationError{Code: VerifyAfterSeqMismatch, Detail: fmt.Sprintf("asked after %d, page is after %d", afterSeq, p.AfterSeq)}
	}
	if p.ThroughSeq < p.AfterSeq || p.ThroughSeq > p.BoundarySeq {
		return nil, &VerificationError{Code: VerifyOrdering, Detail: fmt.Sprintf("need afterSeq %d <= throughSeq %d <= boundarySeq %d", p.AfterSeq, p.ThroughSeq, p.BoundarySeq)}
	}
	if body0.Events == nil {
		return nil, malformed("field \"events\" missing")
	}
	items := *body0.Events
	if p.Idle {
		if p.AfterSeq != p.BoundarySeq || p.ThroughSeq != p.AfterSeq || len(items) != 0 {
			return nil, malformed("idle page must have afterSeq == throughSeq == boundarySeq and no events")
		}
		for _, d := range []string{p.DigestAfter, p.DigestThrough} {
			if d != "" && afterDigest != "" && d != afterDigest {
				return nil, &VerificationError{Code: VerifyDigestMismatch, Detail: "idle page digest " + truncate(d) + " != cursor digest " + afterDigest}
			}
		}
		// Nothing changed since the cursor: the client fills the digests in,
		// so a caller can always continue from (ThroughSeq, DigestThrough).
		p.DigestAfter, p.DigestThrough = afterDigest, afterDigest
		p.Events = []Event{}
		return p, nil
	}
	if p.AfterSeq == p.BoundarySeq || p.ThroughSeq == p.AfterSeq {
		return nil, malformed("non-idle page must advance: afterSeq %d, throughSeq %d, boundarySeq %d", p.AfterSeq, p.ThroughSeq, p.BoundarySeq)
	}
	if len(items) > maxEvents {
		return nil, malformed("%d events, asked for at most %d", len(items), maxEvents)
	}
	if afterDigest == "" {
		if !chain.Valid(p.DigestAfter) {
			return nil, malformed("digestAfter %q is not 64 lowercase hex", truncate(p.DigestAfter))
		}
		afterDigest = p.DigestAfter
	}
	if p.DigestAfter != afterDigest {
		return nil, &VerificationError{Code: VerifyDigestMismatch, Detail: fmt.Sprintf("digestAfter %s != cursor digest %s at seq %d", truncate(p.DigestAfter), afterDigest, afterSeq)}
	}
	if !chain.Valid(p.DigestThrough) {
		return nil, malformed("digestThrough %q is not 64 lowercase hex", truncate(p.DigestThrough))
	}
	p.Events = make([]Event, 0, len(items))
	d := afterDigest
	prev := p.AfterSeq
	for i, it := range items {
		if it.Seq == nil {
			return nil, malformed("event %d: seq missing", i)
		}
		if it.Wire == nil {
			return nil, malformed("event %d: wire missing", i)
		}
		ev := Event{Seq: *it.Seq, Wire: it.Wire}
		if ev.Seq <= p.AfterSeq || ev.Seq > p.ThroughSeq {
			return nil, &VerificationError{Code: VerifyOrdering, Detail: fmt.Sprintf("event %d: seq %d outside (%d, %d]", i, ev.Seq, p.AfterSeq, p.ThroughSeq)}
		}
		if ev.Seq < prev {
			return nil, &VerificationError{Code: VerifyOrdering, Detail: fmt.Sprintf("event %d: seq %d after seq %d", i, ev.Seq, prev)}
		}
		prev = ev.Seq
		we, err := wire.Decode(ev.Wire)
		if err != nil {
			return nil, malformed("event %d (seq %d): %v", i, ev.Seq, err)
		}
		if we.Seq() != ev.Seq {
			return nil, &VerificationError{Code: VerifyOrdering, Detail: fmt.Sprintf("event %d: wire seq %d != item seq %d", i, we.Seq(), ev.Seq)}
		}
		d = chain.Next(d, ev.Wire)
		p.Events = append(p.Events, ev)
	}
	if d != p.DigestThrough {
		return nil, &VerificationError{Code: VerifyDigestMismatch, Detail: fmt.Sprintf("digestThrough %s, recomputed %s over %d events", p.DigestThrough, d, len(p.Events))}
	}
	return p, nil
}

// pageBody is the JSON shape of a page (docs: the v1 source contract).
// encoding/json matches names case-insensitively; every value is verified
// below whatever key spelling carried it.
type pageBody struct {
	ProtocolVersion *int        `json:"protocolVersion"`
	DescriptorHash  *string     `json:"descriptorHash"`
	BoundarySeq     *int64      `json:"boundarySeq"`
	AfterSeq        *int64      `json:"afterSeq"`
	ThroughSeq      *int64      `json:"throughSeq"`
	Idle            *bool       `json:"idle"`
	DigestAfter     *string     `json:"digestAfter"`
	DigestThrough   *string     `json:"digestThrough"`
	Events          *[]pageItem `json:"events"`
}

type pageItem struct {
	Seq  *int64 `json:"seq"`
	Wire []byte `json:"wire"` // base64 in JSON
}

// malformedJSON names what did not decode: the body itself, a field of the
// wrong type, or an event's wire that is not base64.
func malformedJSON(err error) error {
	var te *json.UnmarshalTypeError
	var b64 base64.CorruptInputError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return malformed("field %q: %s where %s is expected", te.Field, te.Value, te.Type)
	case errors.As(err, &b64):
		return malformed("an event's wire is not base64: %v", err)
	}
	return malformed("body is not a JSON object")
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
