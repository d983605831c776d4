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
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// echoRequests plays the manager's side of the request protocol (as this
// tier does for every status; the manager's own side is
// TestEnvtest_RequestedAtIsHandled in controllers): each new requested-at
// value is echoed into status.lastHandledRequestedAt with st, through the
// status subresource, until stop is called.
func echoRequests(t *testing.T, ns, name string, st recoveryv1.ProjectionRecoveryStatus) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var r recoveryv1.ProjectionRecovery
			if err := adminCli.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &r); err == nil {
				if v := r.Annotations[recoveryv1.AnnotationRequestedAt]; v != "" && v != r.Status.LastHandledRequestedAt {
					r.Status = st
					r.Status.LastHandledRequestedAt = v
					_ = adminCli.Status().Update(ctx, &r)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

func requestedAt(t *testing.T, ctx context.Context, ns, name string) string {
	t.Helper()
	var r recoveryv1.ProjectionRecovery
	if err := adminCli.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &r); err != nil {
		t.Fatal(err)
	}
	return r.Annotations[recoveryv1.AnnotationRequestedAt]
}

// TestEnvtest_PluginRecheck: recheck sets a fresh requested-at value (each
// call a new one); --wait returns once status echoes that value, with the
// scope's state and exit 0, or 3 when the scope is BLOCKED; it gives up
// with exit 1 at --timeout when nobody handles it; a user who may not patch
// gets the API server's refusal (exit 3) and nothing is written.
func TestEnvtest_PluginRecheck(t *testing.T) {
	startEnv(t)
	ctx := context.Background()
	ns := newNamespace(t, ctx)
	admin := kubeconfigFor(t, "recheck-admin", "system:masters")
	createRecovery(t, ctx, ns, "venue-a", recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateCurrent, VerifiedThroughSeq: 10, ObservedBoundarySeq: 10})

	r := plugin(t, admin, ns, nil, "recheck", "venue-a")
	first := requestedAt(t, ctx, ns, "venue-a")
	if r.code != ExitOK || first == "" || !strings.Contains(r.out, first) {
		t.Fatalf("recheck: exit %d, annotation %q: want 0 and the value printed", r.code, first)
	}
	if _, err := time.Parse(time.RFC3339Nano, first); err != nil {
		t.Fatalf("requested-at %q is not a timestamp: %v", first, err)
	}

	t.Run("no manager answers", func(t *testing.T) {
		r := plugin(t, admin, ns, nil, "recheck", "venue-a", "--wait", "--timeout", "1500ms")
		if r.code != ExitError || !strings.Contains(r.errOut, "was not handled within 1.5s") {
			t.Fatalf("exit %d, want 1 naming the timeout", r.code)
		}
		if again := requestedAt(t, ctx, ns, "venue-a"); again == first {
			t.Fatalf("a second recheck reused the value %q: a tool could not tell the requests apart", again)
		}
	})

	t.Run("handled, CURRENT", func(t *testing.T) {
		stop := echoRequests(t, ns, "venue-a", recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateCurrent, VerifiedThroughSeq: 42, ObservedBoundarySeq: 42, Message: "verified through 42 of 42"})
		defer stop()
		r := plugin(t, admin, ns, nil, "recheck", "venue-a", "--wait", "--timeout", "30s")
		if r.code != ExitOK {
			t.Fatalf("exit %d, want 0", r.code)
		}
		mustContain(t, "recheck --wait", r.out, "CURRENT", "42", "verified through 42 of 42")
	})

	t.Run("handled, BLOCKED", func(t *testing.T) {
		stop := echoRequests(t, ns, "venue-a", recoveryv1.ProjectionRecoveryStatus{State: recoveryv1.StateBlocked, Reason: "ORPHAN_TRADE", VerifiedThroughSeq: 42, ObservedBoundarySeq: 50})
		defer stop()
		r := plugin(t, admin, ns, nil, "recheck", "venue-a", "--wait", "--timeout", "30s")
		if r.code != ExitRefused {
			t.Fatalf("exit %d, want 3 for a BLOCKED scope", r.code)
		}
		mustContain(t, "recheck --wait", r.out, "BLOCKED", "ORPHAN_TRADE")
	})

	t.Run("completion", func(t *testing.T) {
		createRecovery(t, ctx, ns, "venue-b", recoveryv1.ProjectionRecoveryStatus{})
		createRecovery(t, ctx, ns, "other", recoveryv1.ProjectionRecoveryStatus{})
		r := plugin(t, admin, ns, nil, "__complete", "recheck", "ven")
		names := strings.Fields(strings.Split(r.out, ":")[0])
		if r.code != ExitOK || !slices.Equal(names, []string{"venue-a", "venue-b"}) {
			t.Fatalf("completion of recheck ven: exit %d, names %v, want [venue-a venue-b]", r.code, names)
		}
		createReconciliation(t, ctx, ns, "recon-x", recoveryv1.ProjectionReconciliationStatus{})
		r = plugin(t, admin, ns, nil, "__complete", "approve", "")
		if names := strings.Fields(strings.Split(r.out, ":")[0]); r.code != ExitOK || !slices.Equal(names, []string{"recon-x"}) {
			t.Fatalf("completion of approve: exit %d, names %v, want [recon-x] (reconciliations only)", r.code, names)
		}
	})

	t.Run("not found", func(t *testing.T) {
		if r := plugin(t, admin, ns, nil, "recheck", "venue-z"); r.code != ExitError || !strings.Contains(r.errOut, "not found") {
			t.Fatalf("exit %d, want 1 naming the missing resource", r.code)
		}
	})

	t.Run("usage", func(t *testing.T) {
		if r := plugin(t, admin, ns, nil, "recheck", "venue-a", "--wait", "--timeout", "0s"); r.code != ExitUsage {
			t.Fatalf("--timeout 0s: exit %d, want 2", r.code)
		}
		if r := plugin(t, admin, ns, nil, "recheck"); r.code != ExitUsage {
			t.Fatalf("no NAME: exit %d, want 2", r.code)
		}
	})

	t.Run("no right to patch", func(t *testing.T) {
		grantReadOnly(t, ctx, ns, "dave", "projectionrecoveries")
		before := requestedAt(t, ctx, ns, "venue-a")
		r := plugin(t, kubeconfigFor(t, "dave"), ns, nil, "recheck", "venue-a")
		if r.code != ExitRefused || !strings.Contains(r.errOut, `User "dave" cannot patch resource "projectionrecoveries"`) {
			t.Fatalf("exit %d, want 3 with the API server's message", r.code)
		}
		if after := requestedAt(t, ctx, ns, "venue-a"); after != before {
			t.Fatalf("a refused recheck changed requested-at: %q → %q", before, after)
		}
	})
}
