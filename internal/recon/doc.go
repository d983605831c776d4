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

// Package recon is the pure core of reconciliation (docs/reconciliation.md):
// detect → explain → plan, and a guarded apply that only ever writes through
// handlers a deployment supplies.
//
// The member's consensus output is the ledger: authoritative, never written.
// The SQL projection is the cache. Detect compares one Snapshot of both sides
// against the invariants declared once in Invariants, and lists EVERY finding
// with a root-cause hint computed from the same snapshot. PlanRepairs turns a
// report into a dry-run Plan (SHA-256 fingerprint, planId, 15-minute TTL,
// manual list). Workflow.Apply runs a plan only after the guards of the
// specification, in its order, and journals, audits, rolls back and
// re-verifies.
//
// Purity: detection and planning (snapshot.go, invariants.go, finding.go,
// detect.go, checks_*.go, causes.go, scrub.go, report.go, plan.go,
// strategies.go) import nothing that can write (no database driver, no
// net/http, no os). Storage, HTTP and Kubernetes reach this package only
// through the interfaces it declares: SnapshotProvider, Handler, Journal,
// Permission, Auditor, RunStore and Session (which brackets
// an apply's handlers, e.g. with the scope's write lease). TestGuard_NoWritePathImports
// enforces it.
package recon
