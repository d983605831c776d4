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

// RecoveryState is the point-in-time completeness state of one scope (FR-APR11).
// +kubebuilder:validation:Enum=CATCHING_UP;CURRENT;RETRYING;BLOCKED
type RecoveryState string

const (
	// StateCatchingUp: verified pages are being applied and the verified-through
	// sequence is still below the member's boundary.
	StateCatchingUp RecoveryState = "CATCHING_UP"
	// StateCurrent: the projection is proven complete through the last observed boundary.
	StateCurrent RecoveryState = "CURRENT"
	// StateRetrying: the last cycle failed for a transient reason (source or database
	// unavailable, lease held elsewhere, page superseded); the controller backs off and retries.
	StateRetrying RecoveryState = "RETRYING"
	// StateBlocked: the last page was refused for a reason that needs operator review
	// (orphans, conflicts, unexplained balances, legacy history...). Nothing was written.
	StateBlocked RecoveryState = "BLOCKED"
)

// SecretKeySelector names one key of a Secret in the resource's own namespace.
// Credentials are never carried in the spec itself: only this reference is.
type SecretKeySelector struct {
	// Name of the Secret, in the namespace of the ProjectionRecovery.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Key inside the Secret's data.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// SourceTLS configures how the member's certificate is verified.
type SourceTLS struct {
	// CASecretRef names a PEM bundle of the certificate authorities trusted for the member.
	// When absent the system roots are used.
	// +optional
	CASecretRef *SecretKeySelector `json:"caSecretRef,omitempty"`

	// ServerName overrides the name checked against the member's certificate.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServerName string `json:"serverName,omitempty"`
}

// SourceSpec says where the member's catch-up contract (GET /recon/catchup-events) is served.
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || self.url.startsWith('https://')",message="source.tls requires an https:// url"
// +kubebuilder:validation:XValidation:rule="!has(self.tokenSecretRef) || self.url.startsWith('https://')",message="source.tokenSecretRef requires an https:// url: a bearer token sent over plain http travels in cleartext, readable and replayable by anyone on the path"
type SourceSpec struct {
	// URL is the base URL of the member, http:// or https://, without the contract path.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="source.url must be an absolute http:// or https:// URL with a host, e.g. https://member-0.exchange.svc:8443"
	URL string `json:"url"`

	// TokenSecretRef names a bearer token sent to the member. It requires an
	// https:// url: over plain http the token would travel in cleartext.
	// +optional
	TokenSecretRef *SecretKeySelector `json:"tokenSecretRef,omitempty"`

	// TLS configures verification of the member's certificate (https only).
	// +optional
	TLS *SourceTLS `json:"tls,omitempty"`

	// RequestTimeout bounds one request to the member, from sending it to
	// the last byte of the page. Every non-idle page costs the member a
	// replay from genesis to its boundary (NFR-APR02): a member with a long
	// history needs longer than the default, or every fetch times out and
	// the scope stays RETRYING with reason SOURCE_UNAVAILABLE and a message
	// naming this field.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('30m')",message="source.requestTimeout must be between 1s and 30m"
	// +optional
	RequestTimeout *metav1.Duration `json:"requestTimeout,omitempty"`
}

// DatabaseSpec says where the SQL projection lives.
type DatabaseSpec struct {
	// DSNSecretRef names the key holding the PostgreSQL connection string
	// (libpq URL or key/value form). It never appears in status, events or logs.
	// +required
	DSNSecretRef SecretKeySelector `json:"dsnSecretRef"`
}

// BackoffSpec bounds the exponential backoff applied while RETRYING (FR-APR10).
// +kubebuilder:validation:XValidation:rule="duration(self.base) <= duration(self.cap)",message="backoff.base must not exceed backoff.cap"
type BackoffSpec struct {
	// Base is the first retry delay; each consecutive failure doubles it.
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('10m')",message="backoff.base must be between 100ms and 10m"
	Base metav1.Duration `json:"base"`

	// Cap is the longest retry delay.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="backoff.cap must be between 1s and 1h"
	Cap metav1.Duration `json:"cap"`
}

// ProjectionRecoverySpec is the desired recovery of one SQL projection scope.
// +kubebuilder:validation:XValidation:rule="!has(self.cycleTimeout) || !has(self.leaseDuration) || duration(self.cycleTimeout) < duration(self.leaseDuration)",message="cycleTimeout must be shorter than leaseDuration, or the lease could expire inside a cycle"
type ProjectionRecoverySpec struct {
	// Scope is the SQL projection scope (the run scope) this resource recovers.
	// It cannot change after creation: the cursor, lease and fence are keyed by it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9._]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="scope is immutable: create a new ProjectionRecovery for another scope"
	Scope string `json:"scope"`

	// Source is the member serving the catch-up contract.
	// +required
	Source SourceSpec `json:"source"`

	// Database is the PostgreSQL database holding the projection.
	// +required
	Database DatabaseSpec `json:"database"`

	// PageSize is the maximum number of events asked for in one page (maxEvents).
	// One page is one database transaction.
	// +kubebuilder:default=1000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	PageSize int32 `json:"pageSize,omitempty"`

	// PagesPerCycle bounds the pages applied in one reconcile (FR-APR10: cycles are bounded).
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	PagesPerCycle int32 `json:"pagesPerCycle,omitempty"`

	// CycleTimeout is the time budget of one cycle; it must be shorter than LeaseDuration.
	// +kubebuilder:default="20s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('10m')",message="cycleTimeout must be between 1s and 10m"
	// +optional
	CycleTimeout *metav1.Duration `json:"cycleTimeout,omitempty"`

	// Interval is the periodic recheck while CURRENT, independent of NATS (FR-APR10).
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="interval must be between 1s and 24h"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// Backoff bounds the retry delays while RETRYING.
	// +kubebuilder:default={base:"1s",cap:"5m"}
	// +optional
	Backoff *BackoffSpec `json:"backoff,omitempty"`

	// LeaseDuration is the lifetime of the fenced PostgreSQL lease (FR-APR08).
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('5s') && duration(self) <= duration('10m')",message="leaseDuration must be between 5s and 10m"
	// +optional
	LeaseDuration *metav1.Duration `json:"leaseDuration,omitempty"`

	// Suspend stops new cycles; the status keeps its last values.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// LeaseStatus mirrors the fenced lease row of the scope.
type LeaseStatus struct {
	// Owner is the identity holding the lease.
	// +kubebuilder:validation:MaxLength=253
	Owner string `json:"owner,omitempty"`
	// Fence is incremented on every takeover; a replaced owner cannot commit.
	Fence int64 `json:"fence,omitempty"`
	// ExpiresAt is when the lease lapses unless renewed.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
}

// OpenDrift is what a reconciliation of the scope knows to be wrong.
type OpenDrift struct {
	// Reconciliation is the ProjectionReconciliation's name (same namespace).
	// +kubebuilder:validation:MaxLength=253
	Reconciliation string `json:"reconciliation"`
	// Findings is the number of findings of its last report.
	Findings int32 `json:"findings"`
	// Clean is the report's verdict (no inconsistent finding).
	Clean bool `json:"clean"`
	// ReportedAt is when that report was made.
	// +optional
	ReportedAt *metav1.Time `json:"reportedAt,omitempty"`
}

// ProjectionRecoveryStatus mirrors the catch-up cursor (FR-APR05, FR-APR11).
type ProjectionRecoveryStatus struct {
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// LastReconciliation names the ProjectionReconciliation whose apply or
	// rollback last changed this scope's projection, as
	// "<reconciliation name>/<correlation id>" (copied from the
	// recovery.projection.io/reconciled-by annotation the reconciliation
	// controller sets), so a repaired scope says who repaired it.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	LastReconciliation string `json:"lastReconciliation,omitempty"`

	// OpenDrift names the ProjectionReconciliation whose last report holds
	// findings, when one does: a CURRENT scope with open drift is complete
	// in what the recovery verified, not "nothing known to be wrong".
	// +optional
	OpenDrift *OpenDrift `json:"openDrift,omitempty"`

	// LastHandledRequestedAt is the value of the
	// recovery.projection.io/requested-at annotation when a reconcile last
	// evaluated the resource (ran its cycle, or said why none ran): a tool
	// that sets the annotation to a fresh value knows its request was
	// handled once this field equals it (Flux's lastHandledReconcileAt).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	LastHandledRequestedAt string `json:"lastHandledRequestedAt,omitempty"`

	// State is CATCHING_UP, CURRENT, RETRYING or BLOCKED; empty before the first cycle.
	// +optional
	State RecoveryState `json:"state,omitempty"`

	// Reason is the stable code explaining State (a refusal code when RETRYING or BLOCKED).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason,omitempty"`

	// Message is a human-readable detail of Reason (at most 1024 bytes).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// DescriptorHash is the member's projection descriptor the cursor is bound to.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	DescriptorHash string `json:"descriptorHash,omitempty"`

	// VerifiedThroughSeq is the consensus sequence through which the projection is proven complete.
	// +optional
	VerifiedThroughSeq int64 `json:"verifiedThroughSeq"`

	// ObservedBoundarySeq is the member's applied boundary B last observed.
	// +optional
	ObservedBoundarySeq int64 `json:"observedBoundarySeq"`

	// Lag is the effective boundary minus VerifiedThroughSeq: the effective
	// boundary is ObservedBoundarySeq, or the frozen sequence of a DRAINING run
	// when lower (such a run is caught up only to it).
	// +optional
	Lag int64 `json:"lag"`

	// ChainDigest is the output-chain digest through VerifiedThroughSeq.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ChainDigest string `json:"chainDigest,omitempty"`

	// EventCount is the number of verified events through VerifiedThroughSeq.
	// +optional
	EventCount int64 `json:"eventCount"`

	// LastSuccessfulVerification is when a page (or an idle answer) last verified.
	// +optional
	LastSuccessfulVerification *metav1.Time `json:"lastSuccessfulVerification,omitempty"`

	// Lease mirrors the fenced lease of the scope.
	// +optional
	Lease *LeaseStatus `json:"lease,omitempty"`

	// ConsecutiveFailures counts failed cycles since the last successful one.
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`

	// NextAttempt is when the controller plans the next cycle.
	// +optional
	NextAttempt *metav1.Time `json:"nextAttempt,omitempty"`

	// Progress is what a user waiting on a catch-up wants to see: the rate
	// and an estimate of the time to CURRENT. Set only while CATCHING_UP and
	// cleared otherwise, so a scope that is CURRENT never writes it.
	// +optional
	Progress *CatchUpProgress `json:"progress,omitempty"`

	// Conditions: Ready, Reconciling, Stalled (kstatus compatible).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CatchUpProgress is the measured speed of a catch-up.
type CatchUpProgress struct {
	// EventsPerSecond is how fast the scope's verified event count grew over
	// the last cycles this manager saw (up to the last 30 seconds, or its
	// last two cycles when further apart), whoever held the lease.
	// `kubectl projection status --watch` computes the same figure, with the
	// same estimator, from the status it observes.
	EventsPerSecond int64 `json:"eventsPerSecond"`

	// ETA estimates the time to CURRENT at that rate ("1m40s"): the lag in
	// sequence numbers, times the events per sequence number verified so
	// far, over the closing speed (EventsPerSecond less the boundary's own
	// growth over the same cycles, in events), rounded up to the second.
	// Empty while nothing is verified to scale the lag by, or when the
	// scope is not gaining on its boundary. A boundary that changes speed
	// makes it an estimate, not a promise.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	ETA string `json:"eta,omitempty"`
}

// ProjectionRecovery makes one SQL projection scope provably complete again
// after its live feed lost events.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=precovery;prec,categories=projection
// +kubebuilder:printcolumn:name="Scope",type=string,JSONPath=`.spec.scope`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Verified",type=integer,JSONPath=`.status.verifiedThroughSeq`
// +kubebuilder:printcolumn:name="Boundary",type=integer,JSONPath=`.status.observedBoundarySeq`
// +kubebuilder:printcolumn:name="Lag",type=integer,JSONPath=`.status.lag`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`
// +kubebuilder:printcolumn:name="Drift",type=integer,JSONPath=`.status.openDrift.findings`,description="Open findings of the reconciliation status.openDrift names"
// +kubebuilder:printcolumn:name="Rate",type=integer,JSONPath=`.status.progress.eventsPerSecond`,priority=1,description="Verified events per second over the last cycles (while CATCHING_UP)"
// +kubebuilder:printcolumn:name="ETA",type=string,JSONPath=`.status.progress.eta`,priority=1,description="Estimated time to CURRENT at that rate"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,priority=1
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.status.lease.owner`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ProjectionRecovery struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProjectionRecoverySpec   `json:"spec,omitempty"`
	Status ProjectionRecoveryStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ProjectionRecoveryList contains a list of ProjectionRecovery.
type ProjectionRecoveryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProjectionRecovery `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ProjectionRecovery{}, &ProjectionRecoveryList{})
}
