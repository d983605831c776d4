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

// Package chart tests the Helm chart against a real control plane (envtest's
// kube-apiserver with RBAC): every render is accepted by a server-side dry
// run, the auto-recovery-local profile applies, an upgrade from the previous
// chart keeps the resources, and the manager running as exactly the chart's
// ServiceAccount reconciles a scope to CURRENT while being refused Secrets
// outside the namespaces it watches. helm is the Makefile's ($HELM).
package chart
