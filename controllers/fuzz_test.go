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

// Fuzz targets of the spec-derived and status paths: whatever a spec or an
// outcome holds, they neither panic nor render a status the API server
// refuses. They run as plain tests over their seeds (and the inputs committed
// under testdata/fuzz/) in `make test`, and as fuzzers in `make fuzz`.

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/catchup"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// FuzzSpecSchedule: whatever durations and sizes a stored spec carries (the
// API server bounds them, but an object stored before a bound existed, or
// built without the server, is not bounded), the values the controller derives
// from it are usable: positive sizes and durations, a requeue that is never
// zero or negative (a zero RequeueAfter would silently drop the scope's
// periodic recheck, FR-APR10) and never beyond the longest bound the spec
// allows, and a retry backoff that never shrinks as failures accumulate.
func FuzzSpecSchedule(f *testing.F) {
	f.Add(int32(1000), int32(20), int64(20e9), int64(30e9), int64(1e9), int64(300e9), int64(30e9), int32(3), uint8(2))
	f.Add(int32(0), int32(0), int64(0), int64(0), int64(0), int64(0), int64(0), int32(0), uint8(0))
	f.Add(int32(-1), int32(-5), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int32(-7), uint8(3))
	f.Add(int32(1), int32(1), int64(1), int64(1), int64(600e9), int64(1e9), int64(1), int32(1<<30), uint8(2))
	f.Fuzz(func(t *testing.T, pageSize, pagesPerCycle int32, cycleTimeout, interval, base, capD, lease int64, failures int32, stateIdx uint8) {
		spec := &recoveryv1.ProjectionRecoverySpec{
			PageSize: pageSize, PagesPerCycle: pagesPerCycle,
			CycleTimeout:  &metav1.Duration{Duration: time.Duration(cycleTimeout)},
			Interval:      &metav1.Duration{Duration: time.Duration(interval)},
			Backoff:       &recoveryv1.BackoffSpec{Base: metav1.Duration{Duration: time.Duration(base)}, Cap: metav1.Duration{Duration: time.Duration(capD)}},
			LeaseDuration: &metav1.Duration{Duration: time.Duration(lease)},
		}
		if spec.EffectivePageSize() < 1 || spec.EffectivePagesPerCycle() < 1 {
			t.Fatalf("non-positive size: pageSize %d pagesPerCycle %d", spec.EffectivePageSize(), spec.EffectivePagesPerCycle())
		}
		for name, d := range map[string]time.Duration{
			"cycleTimeout": spec.EffectiveCycleTimeout(), "interval": spec.EffectiveInterval(), "leaseDuration": spec.EffectiveLeaseDuration(),
		} {
			if d <= 0 {
				t.Fatalf("%s derived as %v", name, d)
			}
		}
		b, c := spec.EffectiveBackoff()
		if b <= 0 || c <= 0 {
			t.Fatalf("backoff derived as base %v cap %v", b, c)
		}

		states := []recoveryv1.RecoveryState{"", recoveryv1.StateCatchingUp, recoveryv1.StateCurrent, recoveryv1.StateRetrying, recoveryv1.StateBlocked}
		state := states[int(stateIdx)%len(states)]
		got := requeueAfter(state, failures, spec)
		limit := max(spec.EffectiveInterval(), blockedRecheck, catchingUpRequeue, b, c)
		if got <= 0 || got > limit {
			t.Fatalf("requeueAfter(%q, %d) = %v, want in (0, %v]", state, failures, got, limit)
		}
		if failures > 0 && failures < 1<<20 {
			now, next := retryBackoff(failures, b, c), retryBackoff(failures+1, b, c)
			if next < now {
				t.Fatalf("backoff shrank: failure %d → %v, failure %d → %v (base %v cap %v)", failures, now, failures+1, next, b, c)
			}
		}
	})
}

// FuzzComputeStatus: the status the controller renders for any outcome is one
// the API server accepts and that settles. Messages stay within maxMessage
// and are valid UTF-8 (the JSON encoder would otherwise rewrite the bytes,
// status would never DeepEqual what the server returns, and every reconcile
// would write again); conditions pass metav1 validation (an invalid reason
// makes the whole status patch fail); rendering twice at a later time changes
// nothing (no status write when nothing changed); and no secret of the scope
// appears anywhere in the rendered status (docs/security.md, "Nothing secret
// reaches people").
func FuzzComputeStatus(f *testing.F) {
	f.Add(uint8(1), uint8(0), "cycle failed: dial tcp 127.0.0.1:5432: connect: connection refused", "s3cr3t-pass", "tok-abcdef", int64(10), int64(20), int32(0), false, true)
	f.Add(uint8(4), uint8(7), strings.Repeat("é", 700), "pässwörd", "t", int64(0), int64(0), int32(5), true, false)
	f.Add(uint8(0), uint8(200), "", "", "", int64(-1), int64(-5), int32(-1), false, false)
	f.Fuzz(func(t *testing.T, stateIdx, reasonIdx uint8, message, password, token string, verified, boundary int64, failures int32, observer, cursorRead bool) {
		states := []recoveryv1.RecoveryState{"", recoveryv1.StateCatchingUp, recoveryv1.StateCurrent, recoveryv1.StateRetrying, recoveryv1.StateBlocked}
		reasons := append([]string{"",
			recoveryv1.ReasonSuspended, recoveryv1.ReasonAutoRecoveryDisabled, recoveryv1.ReasonSecretNotFound,
			recoveryv1.ReasonInvalidSpec, recoveryv1.ReasonDuplicateScope, recoveryv1.ReasonCatchingUp, recoveryv1.ReasonCurrent,
		}, codeStrings()...)
		dsn := (&url.URL{Scheme: "postgres", User: url.UserPassword("projection", password), Host: "db:5432", Path: "/exchange"}).String()
		sec := resolvedSecrets{dsn: dsn, token: token}
		// The outcome message embeds the secrets the way a driver or HTTP
		// error might: verbatim, inside the DSN, and percent-encoded.
		msg := message + " dsn=" + dsn + " password=" + password + " auth=Bearer " + token + " " + url.QueryEscape(password)

		obj := &recoveryv1.ProjectionRecovery{ObjectMeta: metav1.ObjectMeta{Name: "pr", Namespace: "ns", Generation: 3}}
		obj.Spec.Scope = "s"
		s := &recoveryScope{
			obj: obj, now: time.Unix(1_800_000_000, 0), secrets: sec,
			state: states[int(stateIdx)%len(states)], reason: reasons[int(reasonIdx)%len(reasons)], message: msg,
		}
		s.cycle = &catchup.Result{
			CursorRead: cursorRead, Observer: observer, Boundary: boundary,
			Cursor: store.Cursor{VerifiedThroughSeq: verified, ChainDigest: "d", DescriptorHash: "h"},
			Lease:  &store.Lease{Owner: "manager-" + token, Fence: 1, ExpiresAt: s.now.Add(time.Minute)},
		}
		obj.Status.ConsecutiveFailures = failures
		r := &ProjectionRecoveryReconciler{}
		res := r.computeStatus(s)
		if res.RequeueAfter < 0 {
			t.Fatalf("negative requeue %v", res.RequeueAfter)
		}
		st := obj.Status
		if len(st.Message) > maxMessage || !utf8.ValidString(st.Message) {
			t.Fatalf("message of %d bytes (valid UTF-8: %v)", len(st.Message), utf8.ValidString(st.Message))
		}
		if errs := metav1validation.ValidateConditions(st.Conditions, field.NewPath("status", "conditions")); len(errs) > 0 {
			t.Fatalf("invalid conditions %v: %v", st.Conditions, errs.ToAggregate())
		}
		// Reconciling and Stalled always; Ready unless suspended (kstatus then
		// reads the resource as Current, docs/gitops.md).
		// (A suspended scope runs no cycle: its outcome has no state.)
		if want := 3 - btoi(s.state == "" && s.reason == recoveryv1.ReasonSuspended); len(st.Conditions) != want {
			t.Fatalf("want %d conditions (Ready unless suspended, Reconciling, Stalled), got %v", want, st.Conditions)
		}
		// The lease owner is the manager's identity, never a secret; the
		// fuzz builds it from the token only to prove the check reads status.
		st.Lease = nil
		raw, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{password, token, dsn, url.QueryEscape(password)} {
			if len(secret) >= minRedactable && strings.Contains(string(raw), secret) {
				t.Fatalf("secret %q leaked into status: %s", secret, raw)
			}
		}

		// Rendering the same outcome again a little later is a no-op for
		// everything but the failure counter, which counts reconciles.
		before := obj.Status.DeepCopy()
		s.now = s.now.Add(10 * time.Second)
		obj.Status.ConsecutiveFailures = before.ConsecutiveFailures
		r.computeStatus(s)
		after := obj.Status.DeepCopy()
		after.ConsecutiveFailures, before.ConsecutiveFailures = 0, 0
		after.NextAttempt, before.NextAttempt = nil, nil
		// Progress is a measurement over time (a second look at an unmoved
		// cursor measures a rate of 0); TestComputeStatus_ProgressWhileCatchingUp
		// covers it.
		after.Progress, before.Progress = nil, nil
		if a, b := mustJSON(t, after), mustJSON(t, before); a != b {
			t.Fatalf("status not settled:\nfirst  %s\nsecond %s", b, a)
		}
	})
}

// FuzzRedact: a secret of at least minRedactable bytes never survives
// redaction, however the message embeds it (several times, glued to other
// text, next to another secret), and redaction is idempotent.
func FuzzRedact(f *testing.F) {
	f.Add("connect failed for ", "hunter22", "token-xyz", "postgres://u:%s@h/db", uint8(3))
	f.Add("x", "a b'c", "abcd", "host=h user=u password='%s' dbname=d", uint8(1))
	f.Add("", "pa[redacted]ss", "[redacted]", "postgres://u:%s@h/db", uint8(2))
	f.Fuzz(func(t *testing.T, text, password, token, dsnFormat string, repeat uint8) {
		if strings.Count(dsnFormat, "%s") != 1 || strings.Contains(strings.ReplaceAll(dsnFormat, "%s", ""), "%") {
			return
		}
		dsn := strings.Replace(dsnFormat, "%s", password, 1)
		sec := resolvedSecrets{dsn: dsn, token: token}
		var b strings.Builder
		for i := 0; i <= int(repeat%4); i++ {
			b.WriteString(text)
			b.WriteString(password)
			b.WriteString(token)
			b.WriteString(dsn)
		}
		out := redact(b.String(), sec)
		// The password is a secret when the driver would send it: the
		// oracle is the driver's own parser behind the manager's check of
		// a tenant's DSN (a refused DSN's password is sent nowhere), not
		// redact's.
		secrets := []string{token, dsn}
		if cfg, err := parseTenantDSN(dsn); err == nil && cfg.Password == password {
			secrets = append(secrets, password)
		}
		// The markers themselves reveal nothing: a "secret" that is part of
		// one (e.g. "[red") is not found in them.
		bare := strings.ReplaceAll(out, "[redacted]", "\x00")
		for _, secret := range secrets {
			if len(secret) >= minRedactable && !strings.Contains(secret, "[redacted]") && strings.Contains(bare, secret) {
				t.Fatalf("secret %q survived redaction: %q", secret, out)
			}
		}
		// Idempotent, unless a secret is itself a piece of the marker (then
		// a second pass redacts inside the first one's markers).
		markerPiece := func(x string) bool { return len(x) >= minRedactable && strings.Contains("[redacted]", x) }
		if again := redact(out, sec); again != out && !markerPiece(token) && !markerPiece(password) && !markerPiece(dsn) {
			t.Fatalf("redact is not idempotent:\nonce  %q\ntwice %q", out, again)
		}
	})
}

func codeStrings() []string {
	out := make([]string, 0, len(codes.All))
	for _, c := range codes.All {
		out = append(out, string(c))
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
