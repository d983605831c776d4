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
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
)

// requestCycle sets the requested-at annotation to value (a merge patch:
// nothing else of the object is sent).
func requestCycle(t *testing.T, ns, name, value string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{recoveryv1.AnnotationRequestedAt: value}}})
	if err != nil {
		t.Fatal(err)
	}
	obj := &recoveryv1.ProjectionRecovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8sClient.Patch(context.Background(), obj, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}

// TestEnvtest_RequestedAtIsHandled: a request (the requested-at annotation)
// runs a cycle at once on a scope whose interval is an hour, and
// status.lastHandledRequestedAt echoes it only from a status that cycle
// computed: the first status carrying the echo has already observed the
// boundary the member reached after the scope was CURRENT. A value too long
// for the field is never echoed (a truncated echo would claim a request
// nobody made), though its cycle still runs. Idle, nothing is rewritten.
func TestEnvtest_RequestedAtIsHandled(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "requested", 60, 0.3)
	obj := f.recovery(ns, "requested", nil, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.Interval = &metav1.Duration{Duration: time.Hour}
	})
	got, _ := waitState(t, ns, obj.Name, 60*time.Second, "CURRENT", isCurrentAt(f.boundary()))
	if got.Status.LastHandledRequestedAt != "" {
		t.Fatalf("lastHandledRequestedAt %q without any request", got.Status.LastHandledRequestedAt)
	}

	f.step(30) // the member moves on; nothing tells the manager
	moved := f.boundary()
	time.Sleep(time.Second)
	if got := getRecovery(t, ns, obj.Name); got.Status.ObservedBoundarySeq >= moved {
		t.Fatalf("the scope saw boundary %d before any request (interval 1h): the test proves nothing", got.Status.ObservedBoundarySeq)
	}
	requestCycle(t, ns, obj.Name, "req-1")
	got, _ = waitState(t, ns, obj.Name, 30*time.Second, "request req-1 handled", func(o *recoveryv1.ProjectionRecovery) bool {
		return o.Status.LastHandledRequestedAt == "req-1"
	})
	if got.Status.ObservedBoundarySeq < moved {
		t.Fatalf("status echoes req-1 with boundary %d, before the cycle that saw %d", got.Status.ObservedBoundarySeq, moved)
	}
	got, _ = waitState(t, ns, obj.Name, 60*time.Second, "CURRENT at the moved boundary", isCurrentAt(moved))
	storetest.AssertPositions(t, f.pool, f.scope, f.allEvents())

	// Idle: the echo is stable, status is not rewritten.
	rv := got.ResourceVersion
	time.Sleep(3 * time.Second)
	if again := getRecovery(t, ns, obj.Name); again.ResourceVersion != rv {
		t.Fatalf("status rewritten while idle after a handled request: %s → %s", rv, again.ResourceVersion)
	}

	f.step(10)
	moved = f.boundary()
	requestCycle(t, ns, obj.Name, strings.Repeat("x", maxRequestedAt+1))
	got, _ = waitState(t, ns, obj.Name, 60*time.Second, "CURRENT after the over-long request", isCurrentAt(moved))
	if got.Status.LastHandledRequestedAt != "req-1" {
		t.Fatalf("lastHandledRequestedAt = %.40q…, want the last request that fits (req-1)", got.Status.LastHandledRequestedAt)
	}
}
