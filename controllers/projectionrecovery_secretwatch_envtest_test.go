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
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// secretCountingReader counts the Secrets read from the API server.
type secretCountingReader struct {
	client.Reader
	secrets atomic.Int64
}

func (c *secretCountingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		c.secrets.Add(1)
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestEnvtest_SecretWatch (docs/performance.md, "Idle cost at 1,000 scopes"):
// with the metadata-only Secret watch, idle cycles read no Secret from the
// API server and write no status; a rotated Secret wakes its scope at once
// (interval one hour) and the next connection uses the new value; a deleted
// Secret stalls the scope at once, and its re-creation brings it back, again
// without waiting for the interval.
func TestEnvtest_SecretWatch(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	f := newFixture(t, "secret-watch", 150, 0.3)
	reads := &secretCountingReader{}
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	stop, _, err := startManager("secret-watch", mustSelector(t, shardLabel+"=secret-watch"), true, "", func(r *ProjectionRecoveryReconciler) {
		r.WatchSecrets = true
		reads.Reader = r.APIReader
		r.APIReader = reads
		r.Metrics = metrics
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	obj := f.recovery(ns, "sw", map[string]string{shardLabel: "secret-watch"}, func(s *recoveryv1.ProjectionRecoverySpec) {
		s.Interval = &metav1.Duration{Duration: time.Second}
	})
	state := func(want recoveryv1.RecoveryState, reason string) func() (bool, error) {
		return func() (bool, error) {
			got := getRecovery(t, ns, obj.Name)
			return got.Status.State == want && got.Status.Reason == reason, nil
		}
	}
	eventually(t, 30*time.Second, "CURRENT", state(recoveryv1.StateCurrent, ""))
	if got := getRecovery(t, ns, obj.Name); got.Status.VerifiedThroughSeq != f.boundary() {
		t.Fatalf("CURRENT at %d, the member committed %d", got.Status.VerifiedThroughSeq, f.boundary())
	}

	// Idle: a cycle per second, each reading the cursor and probing the
	// member, none reading a Secret or writing status.
	time.Sleep(1500 * time.Millisecond) // the cycle that reached CURRENT settles
	reads0, cycles0, writes0 := reads.secrets.Load(), cycleCount(t, reg), metrics.StatusWrites()
	time.Sleep(4 * time.Second)
	cycles := cycleCount(t, reg) - cycles0
	if cycles < 2 {
		t.Fatalf("%d idle cycles in 4 s at a 1 s interval", cycles)
	}
	if n := reads.secrets.Load() - reads0; n != 0 {
		t.Fatalf("%d idle cycles read %d Secrets from the API server, want 0", cycles, n)
	}
	if n := metrics.StatusWrites() - writes0; n != 0 {
		t.Fatalf("%d idle cycles wrote status %v times, want 0", cycles, n)
	}

	// From now on only the watch can wake the scope before an hour.
	patchSpec(t, obj, func(s *recoveryv1.ProjectionRecoverySpec) { s.Interval = &metav1.Duration{Duration: time.Hour} })
	time.Sleep(time.Second)

	// Rotation: the same role, now announcing itself; the scope's next
	// connection must carry the new value.
	rotated := f.dsn + "&application_name=rotated-by-test"
	if !strings.Contains(f.dsn, "?") {
		rotated = f.dsn + "?application_name=rotated-by-test"
	}
	reads0 = reads.secrets.Load()
	updateSecret(t, ns, obj.Spec.Database.DSNSecretRef.Name, map[string]string{"dsn": rotated})
	eventually(t, 5*time.Second, "a connection with the rotated DSN", func() (bool, error) {
		var n int
		err := f.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'rotated-by-test'`).Scan(&n)
		return n > 0, err
	})
	if n := reads.secrets.Load() - reads0; n < 1 {
		t.Fatal("the rotated Secret was never read from the API server")
	}
	if got := getRecovery(t, ns, obj.Name); got.Status.State != recoveryv1.StateCurrent {
		t.Fatalf("after rotation: %s %s %q", got.Status.State, got.Status.Reason, got.Status.Message)
	}

	// Deletion stalls the scope at once; re-creation resumes it at once.
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: obj.Spec.Database.DSNSecretRef.Name}}
	if err := k8sClient.Delete(ctx, sec); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "SecretNotFound after the deletion", func() (bool, error) {
		return getRecovery(t, ns, obj.Name).Status.Reason == recoveryv1.ReasonSecretNotFound, nil
	})
	f.step(20)
	createSecret(t, ns, obj.Spec.Database.DSNSecretRef.Name, map[string]string{"dsn": f.dsn})
	eventually(t, 10*time.Second, "CURRENT at the new boundary after the re-creation", func() (bool, error) {
		got := getRecovery(t, ns, obj.Name)
		return got.Status.State == recoveryv1.StateCurrent && got.Status.Reason == "" && got.Status.VerifiedThroughSeq == f.boundary(), nil
	})
}

func updateSecret(t testing.TB, ns, name string, data map[string]string) {
	t.Helper()
	sec := &corev1.Secret{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
		t.Fatal(err)
	}
	sec.Data, sec.StringData = nil, data
	if err := k8sClient.Update(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
}

// patchSpec merge-patches obj's spec (a new generation).
func patchSpec(t testing.TB, obj *recoveryv1.ProjectionRecovery, mutate func(*recoveryv1.ProjectionRecoverySpec)) {
	t.Helper()
	got := getRecovery(t, obj.Namespace, obj.Name)
	orig := got.DeepCopy()
	mutate(&got.Spec)
	if err := k8sClient.Patch(context.Background(), got, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}
