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

package v1alpha1

// Condition types. They follow the kstatus convention so that kubectl wait,
// Argo CD and Flux read a ProjectionRecovery correctly:
//   - Reconciling=True  → kstatus InProgress (catching up or retrying)
//   - Stalled=True      → kstatus Failed (blocked, or behind with auto-recovery
//     off, or an unusable spec: needs an operator)
//   - Ready=True with status.observedGeneration == metadata.generation → Current.
//   - Ready=False alone → InProgress (kstatus' reading), so whatever waits on
//     a human is Stalled; spec.suspend removes Ready → Current (settled).
//     docs/gitops.md has the whole table.
const (
	// ConditionReady is True when the scope is proven complete through the
	// observed boundary (state CURRENT) for the current generation.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the controller is making progress
	// toward CURRENT: catching up, retrying after a transient failure, or
	// before the first cycle of a generation.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the controller cannot make progress without
	// an operator: a page was refused for a review reason (BLOCKED) or the
	// spec references something that does not exist.
	ConditionStalled = "Stalled"
	// ConditionDriftDetected is True when a ProjectionReconciliation of this
	// recovery reports open findings (status.openDrift names it): the scope
	// can be CURRENT, every event verified, while a record the recovery does
	// not re-read (behind its cursor) is known to be wrong. False when every
	// reconciliation of it reports none; absent when none exists. It is not
	// a kstatus condition: Ready keeps meaning "verified through the
	// boundary".
	ConditionDriftDetected = "DriftDetected"
)

// DriftDetected reasons.
const (
	// ReasonOpenFindings: the last report of a reconciliation holds findings.
	ReasonOpenFindings = "OpenFindings"
	// ReasonNoOpenFindings: every reconciliation's last report is clean.
	ReasonNoOpenFindings = "NoOpenFindings"
)

// Condition reasons. Reasons are CamelCase as metav1.Condition requires; the
// stable refusal code itself (e.g. ORPHAN_TRADE) is in status.reason.
const (
	// ReasonAwaitingFirstCycle: the generation was observed but no cycle has run yet.
	ReasonAwaitingFirstCycle = "AwaitingFirstCycle"
	// ReasonCatchingUp: verified pages are being applied.
	ReasonCatchingUp = "CatchingUp"
	// ReasonCurrent: verified through the observed boundary.
	ReasonCurrent = "Current"
	// ReasonRetrying: the last cycle failed transiently; backing off.
	ReasonRetrying = "Retrying"
	// ReasonBlocked: the last page was refused and needs operator review.
	ReasonBlocked = "Blocked"
	// ReasonSuspended: spec.suspend is true; no cycle runs. Reconciling and
	// Stalled are False and Ready is removed: nothing is asserted about
	// completeness, and kstatus reads the resource as settled (Current).
	ReasonSuspended = "Suspended"
	// ReasonAutoRecoveryDisabled: the manager runs with auto-recovery off; the
	// controller reports completeness read-only and writes nothing to SQL. A
	// scope that is behind is then Stalled (kstatus Failed): only an operator
	// can close the gap. A CURRENT scope stays Ready.
	ReasonAutoRecoveryDisabled = "AutoRecoveryDisabled"
	// ReasonSecretNotFound: a referenced Secret or key does not exist.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonSchemaMissing: the database lacks recovery's tables (status.reason
	// SCHEMA_MISSING) and this manager runs with auto-recovery off, so it may
	// not create them; a DBA runs `manager migrate`. Stalled, never BLOCKED:
	// nothing is wrong with the projection.
	ReasonSchemaMissing = "SchemaMissing"
	// ReasonInvalidSpec: the spec passed the API server but cannot be used
	// (e.g. an unparsable CA bundle).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonDuplicateScope: another ProjectionRecovery of the same namespace
	// already owns this resource's spec.scope. A manager's resources in one
	// namespace share its lease identity there, so two of them on one scope
	// would share one fence, flap each other's status, and deleting one would
	// release the other's lease. The owner is the oldest resource of the
	// scope in the namespace by creationTimestamp (ties broken by name), so
	// every manager agrees; the others are Stalled with this reason and run no
	// cycle until the owner is deleted. The message names the owner.
	// Resources of other namespaces never cause it: they meet at the
	// database's lease only if they reach the same database.
	ReasonDuplicateScope = "DuplicateScope"
	// ReasonRepairPending: an approved repair or rollback of a
	// ProjectionReconciliation of this scope is waiting to run. The recovery
	// releases the scope's lease and runs no cycle until it has run (or a
	// bounded wait passes), so the repair does not wait for the lease to
	// expire. The message names the reconciliation.
	ReasonRepairPending = "RepairPending"
)

// ReasonVerificationWithdrawn is the reason of the Warning Event emitted when
// status.verifiedThroughSeq goes down: the SQL cursor was moved back (a
// reconciliation rollback that put records into the verified window resets
// it to genesis, or someone reset it by hand), so what was certified before
// no longer is, and the scope is re-verified.
const ReasonVerificationWithdrawn = "VerificationWithdrawn"

// FinalizerName guards lease release on deletion.
const FinalizerName = "recovery.projection.io/release-lease"
