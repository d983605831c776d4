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
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// TestPolicyProblem: the shipped policy passes; every weakening an
// administrator could make (or a stale copy) is named.
func TestPolicyProblem(t *testing.T) {
	want, _ := shipped()
	cases := []struct {
		name string
		mut  func(*admissionregistrationv1.ValidatingAdmissionPolicySpec)
		want string // "" passes
	}{
		{"the shipped policy", func(*admissionregistrationv1.ValidatingAdmissionPolicySpec) {}, ""},
		{"failurePolicy left to the default (Fail)", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.FailurePolicy = nil }, ""},
		{"failurePolicy Ignore", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		}, "failurePolicy is Ignore"},
		{"a validation dropped", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.Validations = s.Validations[1:] }, "validations differ"},
		{"a validation rewritten", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.Validations[1].Expression = "true" }, "validations differ"},
		{"a variable rewritten", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.Variables[3].Expression = "true" }, "variables differ"},
		{"a matchCondition exempting requests", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "not-bob", Expression: "request.userInfo.username != 'bob'"}}
		}, "matchConditions"},
		{"a namespace selector", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"strict": "yes"}}
		}, "exclude requests"},
		{"an empty selector (matches all)", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{}
		}, ""},
		{"UPDATE not matched", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.MatchConstraints.ResourceRules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
		}, "does not match CREATE and UPDATE"},
		{"another resource", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.MatchConstraints.ResourceRules[0].Resources = []string{"projectionrecoveries"}
		}, "does not match CREATE and UPDATE"},
		{"no match constraints", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.MatchConstraints = nil }, "matches no request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := want.DeepCopy()
			tc.mut(&p.Spec)
			got := policyProblem(p, want)
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("policyProblem = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestBindingProblem: the shipped binding passes; a warn-only, narrowed or
// misdirected one is named.
func TestBindingProblem(t *testing.T) {
	wantP, want := shipped()
	cases := []struct {
		name string
		mut  func(*admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec)
		want string
	}{
		{"the shipped binding", func(*admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {}, ""},
		{"warn only", func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit}
		}, "do not include Deny"},
		{"another policy", func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) { s.PolicyName = "something-else" }, "binds policy"},
		{"narrowed to some namespaces", func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}
		}, "narrow the policy"},
		{"an empty matchResources", func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.MatchResources = &admissionregistrationv1.MatchResources{}
		}, ""},
		{"parameters", func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.ParamRef = &admissionregistrationv1.ParamRef{Name: "x"}
		}, "paramRef"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := want.DeepCopy()
			tc.mut(&b.Spec)
			got := bindingProblem(b, wantP.Name)
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("bindingProblem = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestServiceAccountMayApprove: people pass (the SubjectAccessReview judges
// them); a service account only when listed, by exact namespace:name.
func TestServiceAccountMayApprove(t *testing.T) {
	listed := []string{"ci:approver"}
	for user, want := range map[string]bool{
		"alice":                                 true,
		"system:serviceaccount:ci:approver":     true,
		"system:serviceaccount:ci:approver2":    false,
		"system:serviceaccount:flux-system:kus": false,
		"system:serviceaccount:other:approver":  false,
	} {
		t.Run(user, func(t *testing.T) {
			if got := serviceAccountMayApprove(listed, user); got != want {
				t.Fatalf("serviceAccountMayApprove(%q) = %t, want %t", user, got, want)
			}
		})
	}
}

// TestIsScheduled: labelled by the scheduler, or controlled by a
// ProjectionRecovery.
func TestIsScheduled(t *testing.T) {
	own := &recoveryv1.ProjectionReconciliation{}
	labelled := &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelManagedBy: ManagedBySchedule}}}
	owned := &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{
		APIVersion: recoveryv1.GroupVersion.String(), Kind: recoveryKind, Name: "venue-a", UID: "u", Controller: ptr.To(true)}}}}
	for name, tc := range map[string]struct {
		o    *recoveryv1.ProjectionReconciliation
		want bool
	}{"a person's": {own, false}, "labelled": {labelled, true}, "controlled by the recovery": {owned, true}} {
		t.Run(name, func(t *testing.T) {
			if got := isScheduled(tc.o); got != tc.want {
				t.Fatalf("isScheduled = %t, want %t", got, tc.want)
			}
		})
	}
}
