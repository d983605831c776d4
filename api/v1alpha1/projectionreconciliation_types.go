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

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReconciliationRunState is the lifecycle of the last reconciliation run
// (reconciliation.txt: pending → collecting → analyzing → reported, with
// failed and cancelled terminal).
// +kubebuilder:validation:Enum=pending;collecting;analyzing;reported;failed;cancelled
type ReconciliationRunState string

// Run states.
const (
	RunPending    ReconciliationRunState = "pending"
	RunCollecting ReconciliationRunState = "collecting"
	RunAnalyzing  ReconciliationRunState = "analyzing"
	RunReported   ReconciliationRunState = "reported"
	RunFailed     ReconciliationRunState = "failed"
	RunCancelled  ReconciliationRunState = "cancelled"
)

// ApproveVerb is the verb a principal needs on projectionreconciliations to
// approve (apply) a repair plan. The API server checks it (admission policy)
// and the controller checks it again with a SubjectAccessReview at apply
// time, failing closed (repair_denied).
const ApproveVerb = "approve"

// Annotations the reconciliation controller sets on the ProjectionRecovery
// after a successful apply or rollback.
const (
	// AnnotationRequestedAt re-triggers the recovery controller at once (its
	// predicates pass annotation changes): the repaired scope is proven
	// again without waiting for the next interval.
	AnnotationRequestedAt = "recovery.projection.io/requested-at"
	// AnnotationReconciledBy is "<reconciliation name>/<correlation id>" of
	// the last apply or rollback; the recovery controller copies it into
	// status.lastReconciliation.
	AnnotationReconciledBy = "recovery.projection.io/reconciled-by"
)

// RecoveryReference names the ProjectionRecovery (same namespace) whose scope
// is reconciled; its source and database are the ones read.
type RecoveryReference struct {
	// Name of the ProjectionRecovery in the same namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ReconciliationSchedule runs a dry run periodically. Scheduled runs only
// report and plan; they never apply.
type ReconciliationSchedule struct {
	// Interval between scheduled dry runs.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('168h')",message="schedule.interval must be between 1m and 168h"
	Interval metav1.Duration `json:"interval"`
}

// ReconciliationApproval applies the plan the status shows. Only a principal
// allowed the `approve` verb on projectionreconciliations may set or change
// it (enforced by the API server), and approver must be that principal.
type ReconciliationApproval struct {
	// PlanID echoes status.plan.planId: the confirmation of the specification.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	PlanID string `json:"planId"`

	// Binding echoes status.plan.binding: the versions of the referenced
	// ProjectionRecovery's spec and of every Secret the repair reads that
	// the plan was made under. A change to any of them (a new source URL,
	// token, CA or DSN, a rewritten repair Secret) withdraws the approval:
	// the apply is refused (approval_unbound) until someone approves again.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	Binding string `json:"binding,omitempty"`

	// Approver is the Kubernetes user approving; the admission policy requires
	// it to equal the user making the change.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Approver string `json:"approver"`

	// ApproverGroups are the approver's groups exactly as the API server
	// authenticated them (kubectl projection copies them from a
	// SelfSubjectReview); the admission policy requires them to equal the
	// requesting user's, and the controller's SubjectAccessReview checks the
	// user with these groups, so an `approve` verb granted to a group works.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	ApproverGroups []string `json:"approverGroups,omitempty"`

	// Only restricts the apply to these action ids (status.plan lists them).
	// +optional
	// +kubebuilder:validation:MaxItems=200
	// +kubebuilder:validation:items:MaxLength=512
	// +listType=set
	Only []string `json:"only,omitempty"`

	// AllowIrreversible opts in to irreversible actions (excluded otherwise).
	// +optional
	AllowIrreversible bool `json:"allowIrreversible,omitempty"`

	// MaxActions is the blast radius: more selected actions refuse.
	// +optional
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxActions int32 `json:"maxActions,omitempty"`
}

// ReconciliationRollback asks to roll back a successful apply, named by its
// correlation id (status.outcome.correlationId).
type ReconciliationRollback struct {
	// CorrelationID of the apply to roll back.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	CorrelationID string `json:"correlationId"`

	// Binding echoes status.plan.binding, bound like an approval's: a
	// change to the referenced objects since withdraws the request.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	Binding string `json:"binding,omitempty"`

	// Approver is the Kubernetes user asking; bound like an approval's.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Approver string `json:"approver"`

	// ApproverGroups are the asking user's groups, bound like an approval's.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	ApproverGroups []string `json:"approverGroups,omitempty"`

	// MaxActions is the rollback's blast radius, as an approval's: a run
	// with more actions to revert is refused (blast_radius_exceeded) and
	// nothing is reverted.
	// +optional
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxActions int32 `json:"maxActions,omitempty"`
}

// ProjectionReconciliationSpec is a request to reconcile one scope's SQL
// projection against the member's verified output: detect, explain, plan,
// and (with an approval) repair.
// +kubebuilder:validation:XValidation:rule="!(has(self.approval) && has(self.rollback))",message="approval and rollback cannot be requested together"
type ProjectionReconciliationSpec struct {
	// RecoveryRef names the ProjectionRecovery whose scope is reconciled.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="recoveryRef is immutable: create another ProjectionReconciliation"
	RecoveryRef RecoveryReference `json:"recoveryRef"`

	// RepairDSNSecretRef names the DSN of the projection_reconciliation role
	// (docs/database-role.md), used only by an approved apply or a rollback.
	// Without it the resource reports and plans only.
	// +optional
	RepairDSNSecretRef *SecretKeySelector `json:"repairDsnSecretRef,omitempty"`

	// StaleAfter is the staleness window of the stale invariants.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('168h')",message="staleAfter must be between 10s and 168h"
	StaleAfter *metav1.Duration `json:"staleAfter,omitempty"`

	// Schedule runs periodic dry runs (report and plan only). Off when absent.
	// +optional
	Schedule *ReconciliationSchedule `json:"schedule,omitempty"`

	// Approval applies the current plan.
	// +optional
	Approval *ReconciliationApproval `json:"approval,omitempty"`

	// Rollback rolls a successful apply back.
	// +optional
	Rollback *ReconciliationRollback `json:"rollback,omitempty"`
}

// CountByName is one bounded count (by drift kind or by invariant).
type CountByName struct {
	// +kubebuilder:validation:MaxLength=128
	Name  string `json:"name"`
	Count int32  `json:"count"`
}

// FindingSummary is one finding as status shows it (the full report is in
// PostgreSQL, projection_reconciliation_runs).
type FindingSummary struct {
	// ID is the finding's id (invariant@record).
	// +kubebuilder:validation:MaxLength=512
	ID string `json:"id"`
	// Invariant the record breaks.
	// +kubebuilder:validation:MaxLength=128
	Invariant string `json:"invariant"`
	// Kind: missing, duplicate, stale or inconsistent.
	// +kubebuilder:validation:MaxLength=32
	Kind string `json:"kind"`
	// Cause is the root-cause line (code, confidence, hint).
	// +kubebuilder:validation:MaxLength=1024
	Cause string `json:"cause,omitempty"`
	// Statement is the invariant's statement: what must hold.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Statement string `json:"statement,omitempty"`
	// Record names the record: its table and identity.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Record string `json:"record,omitempty"`
	// Actual is the record as SQL holds it (absent when SQL has none).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Actual []FieldValue `json:"actual,omitempty"`
	// Expected is the record as the source proves it (absent when the
	// source has none).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Expected []FieldValue `json:"expected,omitempty"`
	// ActualAbsent and ExpectedAbsent say that side has no record at all.
	// +optional
	ActualAbsent bool `json:"actualAbsent,omitempty"`
	// +optional
	ExpectedAbsent bool `json:"expectedAbsent,omitempty"`
	// Detail adds what the values alone do not say.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Detail string `json:"detail,omitempty"`
	// RootCause is the cause with its code, confidence, hint and evidence.
	// +optional
	RootCause *RootCauseSummary `json:"rootCause,omitempty"`
	// Guidance is what a person should do about it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Guidance string `json:"guidance,omitempty"`
	// Truncated is true when a value or list of this finding was cut to fit
	// status: the full finding is in the run record.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
}

// FieldValue is one field of a record.
type FieldValue struct {
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
	// +kubebuilder:validation:MaxLength=256
	Value string `json:"value"`
}

// FieldChange is one field an action changes, as before → after. A field
// the record gains has no before; one it loses has no after.
type FieldChange struct {
	// +kubebuilder:validation:MaxLength=64
	Field string `json:"field"`
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Before *string `json:"before,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=256
	After *string `json:"after,omitempty"`
}

// RootCauseSummary is a finding's root cause.
type RootCauseSummary struct {
	// +kubebuilder:validation:MaxLength=64
	Code string `json:"code"`
	// +kubebuilder:validation:MaxLength=16
	Confidence string `json:"confidence"`
	// +kubebuilder:validation:MaxLength=1024
	Hint string `json:"hint,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=512
	Evidence []string `json:"evidence,omitempty"`
}

// PlannedAction is one action of the plan exactly as an approver approves
// it: what it touches, every field it changes, and how it is undone.
type PlannedAction struct {
	// ID is what spec.approval.only names.
	// +kubebuilder:validation:MaxLength=512
	ID string `json:"id"`
	// +kubebuilder:validation:MaxLength=64
	Kind string `json:"kind"`
	// Target is the record's identity.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Target []FieldValue `json:"target,omitempty"`
	// Effect is create (the record does not exist yet), delete (it goes),
	// update, or none (the action changes no record field).
	// +kubebuilder:validation:Enum=create;update;delete;none
	Effect string `json:"effect"`
	// Changes lists every field whose value the action changes.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Changes []FieldChange `json:"changes,omitempty"`
	// +kubebuilder:validation:MaxLength=16
	Risk       string `json:"risk"`
	Reversible bool   `json:"reversible"`
	// +optional
	// +kubebuilder:validation:MaxLength=128
	LifecycleEvent string `json:"lifecycleEvent,omitempty"`
	// Rollback says how the action is undone (or why it cannot be).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Rollback string `json:"rollback,omitempty"`
	// Findings are the ids of the findings it resolves.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=512
	Findings []string `json:"findings,omitempty"`
}

// ManualItem is a finding the planner refused to touch: a person decides.
type ManualItem struct {
	// +kubebuilder:validation:MaxLength=512
	FindingID string `json:"findingId"`
	// +kubebuilder:validation:MaxLength=128
	Invariant string `json:"invariant"`
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Record string `json:"record,omitempty"`
	// Reason is why no action was planned.
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`
	// Guidance is what a person should do.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Guidance string `json:"guidance,omitempty"`
}

// ReportSummary is the bounded summary of the last report.
type ReportSummary struct {
	// Clean is false when any finding is inconsistent.
	Clean bool `json:"clean"`
	// Findings is the total number of findings.
	Findings int32 `json:"findings"`
	// ByKind counts findings per drift kind.
	// +kubebuilder:validation:MaxItems=4
	// +listType=atomic
	ByKind []CountByName `json:"byKind,omitempty"`
	// ByInvariant counts findings per invariant.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	ByInvariant []CountByName `json:"byInvariant,omitempty"`
	// Top holds the first findings (at most fifty) with their values and
	// cause, in the report's order.
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	Top []FindingSummary `json:"top,omitempty"`
}

// PlanSummary is the last dry run's plan.
type PlanSummary struct {
	// +kubebuilder:validation:MaxLength=128
	PlanID string `json:"planId"`
	// +kubebuilder:validation:MaxLength=64
	Fingerprint string       `json:"fingerprint"`
	Expires     *metav1.Time `json:"expires,omitempty"`
	// Actions is the number of planned actions.
	Actions int32 `json:"actions"`
	// Items shows the plan's first actions whole, in plan order, as many
	// as fit status (at most fifty). Only these can be approved: an
	// approval selecting an action not shown here is refused
	// (plan_not_shown). A larger plan is approved a page at a time with
	// spec.approval.only; the next dry run shows the rest.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Items []PlannedAction `json:"items,omitempty"`
	// Manual is the number of findings the planner refused to touch.
	Manual int32 `json:"manual"`
	// ManualItems shows the first of them (at most fifty) with the reason
	// and what a person should do.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	ManualItems []ManualItem `json:"manualItems,omitempty"`
	// WouldSucceed is the preflight's verdict: every action has a handler,
	// the hooks it needs (publisher, recovery trigger) are wired, and a
	// repair DSN is configured. Nothing is executed to know it.
	WouldSucceed bool `json:"wouldSucceed"`
	// Preflight says why WouldSucceed is false.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Preflight string `json:"preflight,omitempty"`
	// Binding identifies what the plan was made under: the referenced
	// ProjectionRecovery (uid, generation) and every Secret the repair
	// reads (uid, resourceVersion), hashed. An approval or rollback echoes
	// it; it holds no secret material.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	Binding string `json:"binding,omitempty"`
}

// OutcomeSummary is the last apply or rollback.
type OutcomeSummary struct {
	// Operation is apply or rollback.
	// +kubebuilder:validation:Enum=apply;rollback
	Operation string `json:"operation"`
	// Result is "ok" or the specification's result code (repair_denied,
	// plan_stale...); "partial" for a rollback that left actions in place
	// (see left).
	// +kubebuilder:validation:MaxLength=64
	Result string `json:"result"`
	// +kubebuilder:validation:MaxLength=1024
	Message        string `json:"message,omitempty"`
	Applied        int32  `json:"applied"`
	RolledBack     int32  `json:"rolledBack"`
	RollbackFailed int32  `json:"rollbackFailed"`
	Verified       int32  `json:"verified"`
	StillDrifting  int32  `json:"stillDrifting"`
	// VerificationRan is false when the re-read after the apply failed.
	VerificationRan bool `json:"verificationRan"`
	// +kubebuilder:validation:MaxLength=128
	CorrelationID string `json:"correlationId,omitempty"`
	// PlanID is, for an apply, the planId the approval echoed
	// (spec.approval.planId, executed once: a resync never applies it again)
	// and, for a rollback, the plan the rolled-back apply executed.
	// +kubebuilder:validation:MaxLength=128
	PlanID string `json:"planId,omitempty"`
	// +kubebuilder:validation:MaxLength=253
	Approver string       `json:"approver,omitempty"`
	At       *metav1.Time `json:"at,omitempty"`
	// WaitingSince is set while Result is waiting_for_lease: when the
	// operation first found the scope's lease held. The recovery steps
	// aside meanwhile; past a bounded wait the result is lease_unavailable.
	// +optional
	WaitingSince *metav1.Time `json:"waitingSince,omitempty"`
	// Left lists the applied actions this apply's automatic rollback or
	// this rollback left in place, for a person to undo by hand: the
	// irreversible ones (result partial, for a rollback) and those whose
	// revert failed (repair_failed). The first fifty; the audit trail
	// holds them all.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Left []LeftAction `json:"left,omitempty"`
}

// LeftAction is an applied action left in place and what to do about it.
type LeftAction struct {
	// ID is the action id (as in the plan).
	// +kubebuilder:validation:MaxLength=512
	ID string `json:"id"`
	// Kind is the action kind (quarantine_trade, republish, collapse...).
	// +kubebuilder:validation:MaxLength=64
	Kind string `json:"kind"`
	// Rollback is the action's rollback text: what a person must do to
	// undo it.
	// +kubebuilder:validation:MaxLength=1024
	Rollback string `json:"rollback,omitempty"`
}

// ProjectionReconciliationStatus is the observed state. It stays small
// whatever the drift: counts, ten findings, fifty action ids.
type ProjectionReconciliationStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// RunState is the lifecycle of the last run.
	// +optional
	RunState ReconciliationRunState `json:"runState,omitempty"`
	// LastRunAt is when the last dry run finished.
	// +optional
	LastRunAt *metav1.Time `json:"lastRunAt,omitempty"`
	// Report summarises the last report.
	// +optional
	Report *ReportSummary `json:"report,omitempty"`
	// Plan summarises the last plan.
	// +optional
	Plan *PlanSummary `json:"plan,omitempty"`
	// Outcome summarises the last apply or rollback.
	// +optional
	Outcome *OutcomeSummary `json:"outcome,omitempty"`
	// Conditions: Ready, Reconciling, Stalled (kstatus compatible).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ProjectionReconciliation detects, explains and (with an approval only the
// API server can grant) repairs drift between a scope's SQL projection and
// the member's verified output.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=precon,categories=projection
// +kubebuilder:printcolumn:name="Recovery",type=string,JSONPath=`.spec.recoveryRef.name`
// +kubebuilder:printcolumn:name="Run",type=string,JSONPath=`.status.runState`
// +kubebuilder:printcolumn:name="Clean",type=boolean,JSONPath=`.status.report.clean`
// +kubebuilder:printcolumn:name="Findings",type=integer,JSONPath=`.status.report.findings`
// +kubebuilder:printcolumn:name="Plan",type=string,JSONPath=`.status.plan.planId`,priority=1
// +kubebuilder:printcolumn:name="Actions",type=integer,JSONPath=`.status.plan.actions`
// +kubebuilder:printcolumn:name="Result",type=string,JSONPath=`.status.outcome.result`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ProjectionReconciliation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProjectionReconciliationSpec   `json:"spec,omitempty"`
	Status ProjectionReconciliationStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ProjectionReconciliationList contains a list of ProjectionReconciliation.
type ProjectionReconciliationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProjectionReconciliation `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ProjectionReconciliation{}, &ProjectionReconciliationList{})
}
