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

// Package admission carries the shipped approval admission policy into the
// manager, which refuses to apply or roll back unless the cluster runs this
// very policy (the chart renders byte-identical copies of these files).
package admission

import _ "embed"

// ApprovalPolicy is approval_policy.yaml.
//
//go:embed approval_policy.yaml
var ApprovalPolicy []byte

// ApprovalPolicyBinding is approval_policy_binding.yaml.
//
//go:embed approval_policy_binding.yaml
var ApprovalPolicyBinding []byte
