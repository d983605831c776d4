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
	"fmt"
	"slices"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/config/admission"
)

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get

// shipped is the approval policy and binding the manager was built with.
var shipped = sync.OnceValues(func() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := yaml.UnmarshalStrict(admission.ApprovalPolicy, p); err != nil {
		panic("config/admission/approval_policy.yaml: " + err.Error())
	}
	if err := yaml.UnmarshalStrict(admission.ApprovalPolicyBinding, b); err != nil {
		panic("config/admission/approval_policy_binding.yaml: " + err.Error())
	}
	return p, b
})

// checkApprovalPolicy returns what is wrong with the cluster's approval
// admission policy ("" when it is the shipped one, enforced), or an error
// when it could not be read. The policy is what ties spec.approval's
// approver and groups to the person who wrote them; the controller's
// SubjectAccessReview then judges that person. Without it, or with a
// weakened copy (an exception, a warn-only binding, a failure policy that
// lets requests through when CEL cannot be evaluated), the review would
// vouch for a name an editor chose. A Forbidden read is a refusal too:
// what cannot be checked is not assumed.
func checkApprovalPolicy(ctx context.Context, rd client.Reader) (string, error) {
	want, wantB := shipped()
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	switch err := rd.Get(ctx, client.ObjectKey{Name: want.Name}, p); {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("the ValidatingAdmissionPolicy %s is not installed", want.Name), nil
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("the manager may not read the ValidatingAdmissionPolicy %s (it needs get on validatingadmissionpolicies)", want.Name), nil
	case err != nil:
		return "", fmt.Errorf("reading the ValidatingAdmissionPolicy %s: %w", want.Name, err)
	}
	if problem := policyProblem(p, want); problem != "" {
		return fmt.Sprintf("the ValidatingAdmissionPolicy %s is not the shipped one: %s", want.Name, problem), nil
	}
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	switch err := rd.Get(ctx, client.ObjectKey{Name: wantB.Name}, b); {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("the ValidatingAdmissionPolicyBinding %s is not installed", wantB.Name), nil
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("the manager may not read the ValidatingAdmissionPolicyBinding %s (it needs get on validatingadmissionpolicybindings)", wantB.Name), nil
	case err != nil:
		return "", fmt.Errorf("reading the ValidatingAdmissionPolicyBinding %s: %w", wantB.Name, err)
	}
	if problem := bindingProblem(b, want.Name); problem != "" {
		return fmt.Sprintf("the ValidatingAdmissionPolicyBinding %s does not enforce the policy: %s", wantB.Name, problem), nil
	}
	return "", nil
}

// policyProblem compares what decides a request (pure). Fields the API
// server defaults are judged by meaning: a nil failurePolicy is Fail, an
// empty selector matches everything.
func policyProblem(got, want *admissionregistrationv1.ValidatingAdmissionPolicy) string {
	g := &got.Spec
	if g.FailurePolicy != nil && *g.FailurePolicy != admissionregistrationv1.Fail {
		return fmt.Sprintf("failurePolicy is %s, not Fail", *g.FailurePolicy)
	}
	if len(g.MatchConditions) > 0 {
		return "it has matchConditions, which exempt requests"
	}
	if g.ParamKind != nil {
		return "it takes parameters"
	}
	if !apiequality.Semantic.DeepEqual(g.Validations, want.Spec.Validations) {
		return "its validations differ"
	}
	if !apiequality.Semantic.DeepEqual(g.Variables, want.Spec.Variables) {
		return "its variables differ"
	}
	mc := g.MatchConstraints
	if mc == nil {
		return "it matches no request"
	}
	if len(mc.ExcludeResourceRules) > 0 || !matchesAll(mc.NamespaceSelector) || !matchesAll(mc.ObjectSelector) {
		return "its match constraints exclude requests"
	}
	if !coversApprovals(mc.ResourceRules) {
		return "it does not match CREATE and UPDATE of projectionreconciliations"
	}
	return ""
}

// bindingProblem: the binding names the policy, denies, applies to every
// namespace and object, and takes no parameters (pure).
func bindingProblem(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, policy string) string {
	s := &b.Spec
	if s.PolicyName != policy {
		return fmt.Sprintf("it binds policy %q", s.PolicyName)
	}
	if !slices.Contains(s.ValidationActions, admissionregistrationv1.Deny) {
		return "its validationActions do not include Deny"
	}
	if s.ParamRef != nil {
		return "it has a paramRef"
	}
	if m := s.MatchResources; m != nil {
		if len(m.ResourceRules) > 0 || len(m.ExcludeResourceRules) > 0 || !matchesAll(m.NamespaceSelector) || !matchesAll(m.ObjectSelector) {
			return "its matchResources narrow the policy"
		}
	}
	return ""
}

func matchesAll(sel *metav1.LabelSelector) bool {
	return sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0)
}

// coversApprovals: some rule matches CREATE and UPDATE of
// projectionreconciliations in every version of the API group, at any scope.
func coversApprovals(rules []admissionregistrationv1.NamedRuleWithOperations) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	for _, r := range rules {
		if len(r.ResourceNames) > 0 {
			continue
		}
		ops := func(op admissionregistrationv1.OperationType) bool {
			return slices.Contains(r.Operations, op) || slices.Contains(r.Operations, admissionregistrationv1.OperationAll)
		}
		scopeOK := r.Scope == nil || *r.Scope == admissionregistrationv1.AllScopes || *r.Scope == admissionregistrationv1.NamespacedScope
		if ops(admissionregistrationv1.Create) && ops(admissionregistrationv1.Update) && scopeOK &&
			has(r.APIGroups, recoveryv1.GroupVersion.Group) && has(r.APIVersions, "*") && has(r.Resources, "projectionreconciliations") {
			return true
		}
	}
	return false
}
