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
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/catchup"
)

// Metrics are the operator's Prometheus series, served on the manager's
// metrics endpoint. Labels are namespace, name and scope: bounded by the
// number of resources, never by sequence numbers or codes' details.
type Metrics struct {
	lag      *prometheus.GaugeVec
	verified *prometheus.GaugeVec
	boundary *prometheus.GaugeVec
	state    *prometheus.GaugeVec
	// condition mirrors the kstatus conditions, each with its current
	// reason: the one series that shows a scope an operator must act on
	// without it being BLOCKED (Stalled with SchemaMissing, SecretNotFound,
	// AutoRecoveryDisabled, DuplicateScope, InvalidSpec). Without it those
	// scopes export no state, or the state they had before, and no alert
	// can select them.
	condition *prometheus.GaugeVec
	// condMu guards condReason: the reason each (resource, condition type)
	// series carries now, so that a changed reason replaces its series
	// instead of leaving the old one at its last value.
	condMu       sync.Mutex
	condReason   map[conditionKey]string
	pages        *prometheus.CounterVec
	events       *prometheus.CounterVec
	refusals     *prometheus.CounterVec
	cycles       *prometheus.HistogramVec
	lockHeld     *prometheus.HistogramVec
	statusWrites prometheus.Counter
	// carried counts the units a cycle fetched for the next one
	// (catchup.CarriedUnit), by outcome: used by that cycle, dropped by it (the
	// cursor, run or spec moved, or it was too old), evicted before it (more
	// catching-up scopes than workers). Manager-wide: two series per scope
	// would cost more than they tell.
	carried *prometheus.CounterVec
}

var (
	defaultMetricsOnce sync.Once
	defaultMetrics     *Metrics
)

// NewMetrics registers the series on reg; nil means controller-runtime's
// registry (served at /metrics), registered once per process.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		defaultMetricsOnce.Do(func() { defaultMetrics = newMetrics(crmetrics.Registry) })
		return defaultMetrics
	}
	return newMetrics(reg)
}

func newMetrics(reg prometheus.Registerer) *Metrics {
	labels := []string{"namespace", "name", "scope"}
	m := &Metrics{
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "projection_recovery_lag_seqs",
			Help: "Observed source boundary minus verified-through sequence."}, labels),
		verified: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "projection_recovery_verified_through_seq",
			Help: "Consensus sequence through which the projection is proven complete."}, labels),
		boundary: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "projection_recovery_observed_boundary_seq",
			Help: "The member's applied boundary last observed."}, labels),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "projection_recovery_state",
			Help: "1 for the scope's current status.state (CATCHING_UP, CURRENT, RETRYING, BLOCKED), 0 for the others; all 0 while it has none (e.g. SchemaMissing or SecretNotFound before any cycle)."}, append(labels, "state")),
		condition: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "projection_recovery_condition",
			Help: "1 when the condition (type: Ready, Reconciling, Stalled, DriftDetected) is True, 0 when False; reason is its current reason (Stalled: Blocked, SchemaMissing, SecretNotFound, AutoRecoveryDisabled, DuplicateScope, InvalidSpec). One series per condition type."}, append(labels, "type", "reason")),
		condReason: map[conditionKey]string{},
		pages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "projection_recovery_pages_applied_total",
			Help: "Pages committed."}, labels),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "projection_recovery_events_applied_total",
			Help: "Events verified and applied by committed pages."}, labels),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "projection_recovery_refusals_total",
			Help: "Cycles that ended in a refusal, by stable code."}, append(labels, "code")),
		cycles: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "projection_recovery_cycle_duration_seconds",
			Help: "Duration of one bounded cycle.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, labels),
		lockHeld: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "projection_recovery_write_lock_held_seconds",
			Help:    "How long one committed write slice of a page held the projection write lock of its keys: the longest a live write on those keys waited behind it.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, labels),
		statusWrites: prometheus.NewCounter(prometheus.CounterOpts{Name: "projection_recovery_status_writes_total",
			Help: "Status writes sent to the API server (unchanged status is never written)."}),
		carried: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "projection_recovery_carried_units_total",
			Help: "Units of pages a catching-up cycle fetched for the scope's next cycle while its last unit committed, by outcome: used, dropped (the cursor, run or spec had moved) or evicted (more catching-up scopes than workers)."}, []string{"outcome"}),
	}
	for _, c := range []prometheus.Collector{m.lag, m.verified, m.boundary, m.state, m.condition, m.pages, m.events, m.refusals, m.cycles, m.lockHeld, m.statusWrites, m.carried} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				panic(err)
			}
		}
	}
	// Every outcome is exported from the start (at 0): a rate() over a
	// series that appears only at its first increment misses that increment,
	// and a dashboard reads "no data" rather than "none dropped".
	for _, o := range []string{catchup.CarriedUsed, catchup.CarriedDropped, catchup.CarriedEvicted} {
		m.carried.WithLabelValues(o)
	}
	return m
}

// observeCycle counts what one cycle did. The gauges are not set here: they
// follow status (observeStatus), so a cycle that could not read the cursor
// never exports VERIFIED 0.
func (m *Metrics) observeCycle(obj *recoveryv1.ProjectionRecovery, res catchup.Result, took time.Duration) {
	l := prometheus.Labels{"namespace": obj.Namespace, "name": obj.Name, "scope": obj.Spec.Scope}
	m.cycles.With(l).Observe(took.Seconds())
	m.pages.With(l).Add(float64(res.Pages))
	m.events.With(l).Add(float64(res.Events))
	if len(res.LockHolds) > 0 {
		h := m.lockHeld.With(l)
		for _, d := range res.LockHolds {
			h.Observe(d.Seconds())
		}
	}
	if res.State == catchup.StateRetrying || res.State == catchup.StateBlocked {
		m.refusals.With(prometheus.Labels{"namespace": obj.Namespace, "name": obj.Name, "scope": obj.Spec.Scope, "code": res.Reason}).Inc()
	}
}

// CarriedUnits counts n carried units of outcome (catchup.Counters).
func (m *Metrics) CarriedUnits(outcome string, n int) {
	m.carried.WithLabelValues(outcome).Add(float64(n))
}

// observeStatus sets the gauges from the object's status, the one place the
// scope's completeness is reported (status, the completeness endpoint and
// these series never disagree). A scope never checked exports no series.
func (m *Metrics) observeStatus(obj *recoveryv1.ProjectionRecovery) {
	st := &obj.Status
	l := prometheus.Labels{"namespace": obj.Namespace, "name": obj.Name, "scope": obj.Spec.Scope}
	if st.State != "" || st.ObservedGeneration > 0 {
		// Every state has a series, 0 or 1, so a state a scope left reads 0
		// instead of keeping its last 1 (a dashboard would show two states).
		// A scope evaluated but without a state (a missing Secret or schema
		// before its first cycle) reads 0 everywhere, never an empty label.
		for _, s := range recoveryStates {
			v := 0.0
			if st.State == s {
				v = 1
			}
			m.state.WithLabelValues(obj.Namespace, obj.Name, obj.Spec.Scope, string(s)).Set(v)
		}
	}
	m.observeConditions(obj)
	if !hasCursor(st) {
		return
	}
	m.verified.With(l).Set(float64(st.VerifiedThroughSeq))
	m.boundary.With(l).Set(float64(st.ObservedBoundarySeq))
	m.lag.With(l).Set(float64(st.Lag))
}

func (m *Metrics) forget(obj *recoveryv1.ProjectionRecovery) {
	l := prometheus.Labels{"namespace": obj.Namespace, "name": obj.Name, "scope": obj.Spec.Scope}
	for _, v := range []*prometheus.GaugeVec{m.lag, m.verified, m.boundary} {
		v.Delete(l)
	}
	m.pages.Delete(l)
	m.events.Delete(l)
	m.cycles.Delete(l)
	m.lockHeld.Delete(l)
	m.refusals.DeletePartialMatch(l)
	m.state.DeletePartialMatch(l)
	m.condition.DeletePartialMatch(l)
	m.condMu.Lock()
	defer m.condMu.Unlock()
	for k := range m.condReason {
		if k.namespace == obj.Namespace && k.name == obj.Name {
			delete(m.condReason, k)
		}
	}
}

// conditionKey is one condition type of one resource's scope.
type conditionKey struct{ namespace, name, scope, typ string }

// conditionTypes are the conditions the condition gauge mirrors.
var conditionTypes = []string{
	recoveryv1.ConditionReady, recoveryv1.ConditionReconciling, recoveryv1.ConditionStalled, recoveryv1.ConditionDriftDetected,
}

// observeConditions sets one series per condition type present on the
// object: 1 when True, 0 otherwise, labelled with its reason. The new
// reason's series is set before the old one is deleted, so a scrape never
// finds the type missing (an alert's `for` would start again). A condition
// that is removed (Ready while suspended) removes its series.
func (m *Metrics) observeConditions(obj *recoveryv1.ProjectionRecovery) {
	m.condMu.Lock()
	defer m.condMu.Unlock()
	for _, typ := range conditionTypes {
		k := conditionKey{obj.Namespace, obj.Name, obj.Spec.Scope, typ}
		prev, had := m.condReason[k]
		c := meta.FindStatusCondition(obj.Status.Conditions, typ)
		if c != nil {
			v := 0.0
			if c.Status == metav1.ConditionTrue {
				v = 1
			}
			m.condition.WithLabelValues(k.namespace, k.name, k.scope, typ, c.Reason).Set(v)
			m.condReason[k] = c.Reason
		} else {
			delete(m.condReason, k)
		}
		if had && (c == nil || c.Reason != prev) {
			m.condition.DeleteLabelValues(k.namespace, k.name, k.scope, typ, prev)
		}
	}
}

// recoveryStates are the values of status.state (the CRD's enum).
var recoveryStates = []recoveryv1.RecoveryState{
	recoveryv1.StateCatchingUp, recoveryv1.StateCurrent, recoveryv1.StateRetrying, recoveryv1.StateBlocked,
}
