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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// TestEnvtest_ReconciliationResolvesSecretsAsTheRecoveryDoes: against a real
// API server, the reconciliation controller reads the recovery's Secrets in
// the recovery's order with its messages, stalls SecretNotFound naming the
// first missing reference (the recovery's prefixed with its name), and reads
// the repair DSN last.
func TestEnvtest_ReconciliationResolvesSecretsAsTheRecoveryDoes(t *testing.T) {
	cases := []struct {
		name    string
		secrets map[string]map[string]string
		stall   string // the stall message; "" resolves
	}{
		{"no Secret", nil, `recovery rec: spec.database.dsnSecretRef: Secret "db" not found`},
		{"the token's key missing", map[string]map[string]string{"db": {"dsn": "postgres://x"}, "tok": {"other": "v"}},
			`recovery rec: spec.source.tokenSecretRef: Secret "tok" has no key "token"`},
		{"the repair DSN missing", map[string]map[string]string{"db": {"dsn": "postgres://x"}, "tok": {"token": "t"}},
			`spec.repairDsnSecretRef: Secret "repair" not found`},
		{"every reference there", map[string]map[string]string{"db": {"dsn": "postgres://x"}, "tok": {"token": "t"}, "repair": {"dsn": "postgres://r"}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			for name, data := range tc.secrets {
				createSecret(t, ns, name, data)
			}
			rec := &recoveryv1.ProjectionRecovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rec"},
				Spec: recoveryv1.ProjectionRecoverySpec{
					Source:   recoveryv1.SourceSpec{URL: "https://member", TokenSecretRef: &recoveryv1.SecretKeySelector{Name: "tok", Key: "token"}},
					Database: recoveryv1.DatabaseSpec{DSNSecretRef: recoveryv1.SecretKeySelector{Name: "db", Key: "dsn"}}}}
			obj := &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "recon"},
				Spec: recoveryv1.ProjectionReconciliationSpec{RepairDSNSecretRef: &recoveryv1.SecretKeySelector{Name: "repair", Key: "dsn"}}}
			s := &reconScope{obj: obj, recovery: rec}
			r := &ProjectionReconciliationReconciler{APIReader: k8sClient}
			if err := r.resolveSecrets(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			if tc.stall != "" {
				if !s.done || s.stallReason != recoveryv1.ReasonSecretNotFound || s.stallMessage != tc.stall {
					t.Fatalf("done %v, stall %q %q; want SecretNotFound %q", s.done, s.stallReason, s.stallMessage, tc.stall)
				}
				return
			}
			if s.done || s.secrets.dsn != "postgres://x" || s.secrets.token != "t" || s.repairDSN != "postgres://r" {
				t.Fatalf("done %v (%q), dsn %q, token %q, repair %q", s.done, s.stallMessage, s.secrets.dsn, s.secrets.token, s.repairDSN)
			}
		})
	}
}
