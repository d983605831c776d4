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
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/codes"
)

// TestEnvtest_TenantDSNCannotReadTheManagersFiles (docs/security.md, "A
// tenant's DSN reads nothing of the manager's"): a ProjectionRecovery whose
// Secret's DSN names a file of the manager's pod (the ServiceAccount token
// as a passfile; a client key) is RETRYING/DATABASE_UNAVAILABLE, as a DSN
// that does not parse, and status, its condition and an event name the
// key, never the DSN. The files do not exist: had the manager parsed the
// DSN unchecked, the passfile would have been skipped silently (the
// message would be a connection error) and the key read would have failed
// (a parse error); only the refusal names the key.
func TestEnvtest_TenantDSNCannotReadTheManagersFiles(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "client.key")
	cases := []struct{ name, dsn, key string }{
		{"passfile", "host=127.0.0.1 port=1 dbname=exchange user=app password=" + tenantPW +
			" connect_timeout=2 passfile=/var/run/secrets/kubernetes.io/serviceaccount/token", "passfile"},
		{"sslkey", "postgres://app:" + tenantPW + "@127.0.0.1:1/exchange?connect_timeout=2&sslmode=require&sslcert=" +
			url.QueryEscape(missing) + "&sslkey=" + url.QueryEscape(missing), "sslkey"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			createSecret(t, ns, "db", map[string]string{"dsn": tc.dsn})
			obj := sampleRecovery(ns, "tenant", "tenant-"+tc.name)
			if err := k8sClient.Create(bg, obj); err != nil {
				t.Fatal(err)
			}
			got, _ := waitState(t, ns, obj.Name, 30*time.Second, "RETRYING DATABASE_UNAVAILABLE", func(o *recoveryv1.ProjectionRecovery) bool {
				return o.Status.State == recoveryv1.StateRetrying && o.Status.Reason == string(codes.DatabaseUnavailable)
			})
			refusal := func(where, msg string) {
				t.Helper()
				if !strings.Contains(msg, tc.key+" (reads ") || !strings.Contains(msg, "does not accept") {
					t.Fatalf("%s does not show the refusal naming %s: %q", where, tc.key, msg)
				}
				if strings.Contains(msg, tenantPW) || strings.Contains(msg, missing) || strings.Contains(msg, "serviceaccount") {
					t.Fatalf("%s quotes the DSN: %q", where, msg)
				}
			}
			refusal("status.message", got.Status.Message)
			c := meta.FindStatusCondition(got.Status.Conditions, recoveryv1.ConditionReconciling)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != recoveryv1.ReasonRetrying {
				t.Fatalf("Reconciling condition %+v, want True/%s", c, recoveryv1.ReasonRetrying)
			}
			refusal("the Reconciling condition", c.Message)
			eventually(t, 20*time.Second, "an event naming the refusal", func() (bool, error) {
				var evs eventsv1.EventList
				if err := k8sClient.List(bg, &evs, client.InNamespace(ns)); err != nil {
					return false, err
				}
				for _, ev := range evs.Items {
					if ev.Regarding.Name == obj.Name && strings.Contains(ev.Note, tc.key+" (reads ") {
						refusal("the event", ev.Note)
						return true, nil
					}
				}
				return false, nil
			})
		})
	}
}

// TestEnvtest_TenantRepairDSNCannotReadTheManagersFiles: the repair DSN
// (spec.repairDsnSecretRef) is a tenant's DSN too. With the recovery's DSN
// working (the dry run reaches the database through it), a repair DSN
// naming a client key file fails the dry run with the refusal in the
// Reconciling condition, never a file error, never the DSN.
func TestEnvtest_TenantRepairDSNCannotReadTheManagersFiles(t *testing.T) {
	ns := newNamespace(t)
	f := newFixture(t, "tenant-repair", 20, 0)
	rec := f.recovery(ns, "rec", nil, nil)
	missing := filepath.Join(t.TempDir(), "client.key")
	repair := f.reconDSN + sep(f.reconDSN) + "sslcert=" + url.QueryEscape(missing) + "&sslkey=" + url.QueryEscape(missing)
	createSecret(t, ns, "repair-db", map[string]string{"dsn": repair})
	pr := &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fix"},
		Spec: recoveryv1.ProjectionReconciliationSpec{RecoveryRef: recoveryv1.RecoveryReference{Name: rec.Name},
			RepairDSNSecretRef: &recoveryv1.SecretKeySelector{Name: "repair-db", Key: "dsn"}}}
	if err := k8sClient.Create(bg, pr); err != nil {
		t.Fatal(err)
	}
	o := waitRecon(t, ns, pr.Name, "a failed dry run", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.RunState == recoveryv1.RunFailed
	})
	c := meta.FindStatusCondition(o.Status.Conditions, recoveryv1.ConditionReconciling)
	if c == nil {
		t.Fatalf("no Reconciling condition: %+v", o.Status.Conditions)
	}
	if !strings.Contains(c.Message, "sslkey (reads ") || !strings.Contains(c.Message, "does not accept") {
		t.Fatalf("the condition does not show the refusal naming sslkey: %q", c.Message)
	}
	pw := ""
	if u, err := url.Parse(f.reconDSN); err == nil && u.User != nil {
		pw, _ = u.User.Password()
	}
	if strings.Contains(c.Message, missing) || pw != "" && strings.Contains(c.Message, pw) {
		t.Fatalf("the condition quotes the DSN: %q", c.Message)
	}
}

// sep is what appends a query parameter to dsn (a URI).
func sep(dsn string) string {
	if strings.Contains(dsn, "?") {
		return "&"
	}
	return "?"
}
