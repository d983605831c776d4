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
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/completeness"
	"github.com/projection-recovery/projection-recovery/internal/reference/member"
)

// TestEnvtest_SecretsNeverLeak (docs/security.md, "Nothing secret reaches
// people"): a scope runs with distinctive secret values (the DSN's password,
// the member's bearer token, the CA bundle) through a refusal (a wrong
// token), a rotation (the right token), a catch-up to CURRENT over verified
// TLS, and a database outage (the DSN rotated to a dead server with another
// password, then back), with every log line captured at debug level. None of
// the values may appear in status, events, logs, metrics or the completeness
// endpoint.
func TestEnvtest_SecretsNeverLeak(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	f := newFixture(t, "leak", 120, 0.3)
	lbl, sel := shard(t, "leak")

	goodToken, oldToken := distinctive("tok-good"), distinctive("tok-old")
	pw, outagePW := distinctive("pw-live"), distinctive("pw-outage")
	srv := httptest.NewUnstartedServer(member.NewHandler(f.log, member.HandlerOptions{Token: goodToken}))
	srv.StartTLS()
	defer srv.Close()
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	// The CA is not secret, but a bundle echoed into status would still be
	// noise; a chunk from its middle stands for it.
	caBody := base64.StdEncoding.EncodeToString(srv.Certificate().Raw)
	caChunk := caBody[len(caBody)/2 : len(caBody)/2+40]

	liveDSN := withPassword(t, f.dsn, pw)
	deadDSN := "postgres://projection_recovery:" + url.QueryEscape(outagePW) + "@127.0.0.1:1/exchange?sslmode=disable&connect_timeout=1"
	secrets := map[string]string{"good token": goodToken, "old token": oldToken, "password": pw,
		"outage password": outagePW, "live DSN": liveDSN, "dead DSN": deadDSN, "CA": caChunk}

	reg := prometheus.NewRegistry()
	completenessReg := completeness.NewRegistry(nil)
	capturedLogs.start()
	stop, _, err := startManager("leak", sel, true, "", func(r *ProjectionRecoveryReconciler) {
		r.Metrics = NewMetrics(reg)
		r.Registry = completenessReg
	})
	if err != nil {
		capturedLogs.stop()
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
			capturedLogs.stop()
		}
	}()

	createSecret(t, ns, "leak-pw", map[string]string{"dsn": liveDSN})
	createSecret(t, ns, "leak-member", map[string]string{"token": oldToken, "ca.crt": caPEM})
	obj := f.recovery(ns, "leak", lbl, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.Database.DSNSecretRef.Name = "leak-pw"
		s.Source = recoveryv1.SourceSpec{URL: srv.URL,
			TokenSecretRef: &recoveryv1.SecretKeySelector{Name: "leak-member", Key: "token"},
			TLS:            &recoveryv1.SourceTLS{CASecretRef: &recoveryv1.SecretKeySelector{Name: "leak-member", Key: "ca.crt"}}}
	})

	// 1. Refusal: the member refuses the old token.
	waitState(t, ns, obj.Name, 60*time.Second, "BLOCKED by the member's refusal", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.State == recoveryv1.StateBlocked && o.Status.Reason == string(codes.SourceRefused)
	})
	// 2. Rotation: the right token, then a recheck on request.
	setSecret(t, ns, "leak-member", "token", goodToken)
	touch(t, ns, obj.Name, "rotated-token")
	waitState(t, ns, obj.Name, 60*time.Second, "CURRENT after the token rotation", isCurrentAt(f.boundary()))
	// 3. Outage: the DSN now names a dead server (another password).
	f.step(40)
	setSecret(t, ns, "leak-pw", "dsn", deadDSN)
	touch(t, ns, obj.Name, "dead-db")
	waitState(t, ns, obj.Name, 60*time.Second, "RETRYING while the database is unreachable", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.State == recoveryv1.StateRetrying && o.Status.Reason == string(codes.DatabaseUnavailable)
	})
	// 4. Back: the live DSN again; the scope catches up.
	setSecret(t, ns, "leak-pw", "dsn", liveDSN)
	waitState(t, ns, obj.Name, 60*time.Second, "CURRENT after the outage", isCurrentAt(f.boundary()))

	stop()
	logs := capturedLogs.stop()
	stopped = true
	if len(logs) == 0 {
		t.Fatal("no log line captured: the capture is broken, so this test proves nothing")
	}

	// Everything a user or a scraper can read about the scope.
	surfaces := map[string]string{"logs": logs}
	got := getRecovery(t, ns, obj.Name)
	surfaces["status"] = string(mustMarshal(t, got.Status))
	var evs eventsv1.EventList
	if err := k8sClient.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) == 0 {
		t.Fatal("no event recorded: expected at least the state transitions")
	}
	surfaces["events"] = string(mustMarshal(t, evs.Items))
	surfaces["metrics"] = gatherText(t, reg) + gatherText(t, crmetrics.Registry)
	rec := httptest.NewRecorder()
	completenessReg.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v2/projection-completeness", nil))
	body, _ := io.ReadAll(rec.Body)
	surfaces["completeness"] = string(body)
	if !strings.Contains(surfaces["completeness"], "leak") {
		t.Fatalf("completeness endpoint does not show the scope: %s", body)
	}

	for where, text := range surfaces {
		for what, secret := range secrets {
			if strings.Contains(text, secret) {
				i := strings.Index(text, secret)
				t.Errorf("the %s appears in %s: …%s…", what, where, text[max(0, i-120):min(len(text), i+len(secret)+40)])
			}
		}
	}
	t.Logf("checked %d secret values over %d surfaces (%d bytes of debug logs, %d events)", len(secrets), len(surfaces), len(logs), len(evs.Items))
}

// distinctive returns prefix plus 16 random hex digits: a value that can
// only appear somewhere if it was copied there.
func distinctive(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// withPassword sets the password of a libpq URL or key/value DSN. The test
// cluster trusts loopback, so the server never asks for it, yet the driver
// holds it like any real one.
func withPassword(t *testing.T, dsn, pw string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(u.User.Username(), pw)
		return u.String()
	}
	return dsn + " password='" + pw + "'"
}

func setSecret(t *testing.T, ns, name, key, value string) {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	s.Data[key] = []byte(value)
	if err := k8sClient.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// touch changes an annotation: what a user does to ask for a recheck now
// (annotation changes pass the controller's predicates).
func touch(t *testing.T, ns, name, value string) {
	t.Helper()
	obj := getRecovery(t, ns, name)
	patch := client.MergeFrom(obj.DeepCopy())
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations["test.recovery.projection.io/touched"] = value
	if err := k8sClient.Patch(context.Background(), obj, patch); err != nil {
		t.Fatal(err)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gatherText(t *testing.T, g prometheus.Gatherer) string {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range families {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}
