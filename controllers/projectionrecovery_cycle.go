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

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/catchup"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

// reconcileCycle runs the scope's bounded catch-up cycle (catchup.Engine.Run,
// FR-APR10) and records its outcome on the scope: the one call of a
// reconcile into the catch-up engine.
func (r *ProjectionRecoveryReconciler) reconcileCycle(ctx context.Context, s *recoveryScope) error {
	obj := s.obj
	r.Registry.CycleStarted(obj.Namespace, obj.Name, obj.Spec.Scope, s.now, r.AutoRecovery)
	start := r.Clock.Now()

	res := r.engine().Run(ctx, r.cycleOf(s))
	if ctx.Err() != nil {
		// Shutdown cancelled the cycle: its failure is an artefact of the
		// cancellation, not an outcome of the scope. Reconcile writes nothing.
		return nil
	}

	s.cycle = &res
	s.state, s.reason, s.message = recoveryState(res.State), recoveryReason(res.Reason), res.Message
	if res.ReadOnly && res.State != catchup.StateCurrent {
		s.reason = recoveryv1.ReasonAutoRecoveryDisabled
	}
	r.Metrics.observeCycle(obj, res, r.Clock.Since(start))
	return nil
}

// engine is the catch-up engine of this manager, over the reconciler's
// fields as they are now (tests set OnPageCommitted after construction).
func (r *ProjectionRecoveryReconciler) engine() *catchup.Engine {
	return &catchup.Engine{Clock: r.Clock, AutoRecovery: r.AutoRecovery, Owner: r.Owner, Carry: r.carry, Proofs: r.proofLedger(),
		Counters: r.Metrics, OnPageCommitted: r.OnPageCommitted}
}

// proofLedger is this manager's catchup.ProofLedger, made on first use.
func (r *ProjectionRecoveryReconciler) proofLedger() *catchup.ProofLedger {
	r.proofsOnce.Do(func() { r.proofs = catchup.NewProofLedger() })
	return r.proofs
}

// cycleOf translates the resource into the engine's input: the spec's
// effective values, the resolved Secrets (through the connections and the
// redaction, never as values of the cycle) and the lease identity.
func (r *ProjectionRecoveryReconciler) cycleOf(s *recoveryScope) catchup.Cycle {
	spec := &s.obj.Spec
	secrets := s.secrets
	return catchup.Cycle{
		Resource:   resourceKey(s.obj),
		Scope:      spec.Scope,
		LeaseOwner: r.leaseOwner(s.obj.Namespace),
		Limits: catchup.Limits{
			PageSize:       spec.EffectivePageSize(),
			PagesPerCycle:  spec.EffectivePagesPerCycle(),
			CycleTimeout:   spec.EffectiveCycleTimeout(),
			RequestTimeout: spec.Source.EffectiveRequestTimeout(),
			LeaseDuration:  spec.EffectiveLeaseDuration(),
		},
		Connector: scopeConnections{c: r.Connections, resource: resourceKey(s.obj), spec: &spec.Source, secrets: secrets},
		Redact:    func(msg string) string { return redact(msg, secrets) },
		Carried:   s.carried,
	}
}

// scopeConnections is one resource's use of the manager's Connections, as
// the engine asks for them (catchup.Connector).
type scopeConnections struct {
	c        *Connections
	resource string
	spec     *recoveryv1.SourceSpec
	secrets  resolvedSecrets
}

func (sc scopeConnections) Client() (*source.Client, error) {
	return sc.c.Client(sc.resource, sc.spec, sc.secrets)
}

func (sc scopeConnections) Store(ctx context.Context) (*store.Store, error) {
	return sc.c.Store(ctx, sc.resource, sc.secrets.dsn)
}

func (sc scopeConnections) SchemaLost() { sc.c.SchemaLost(sc.secrets.dsn) }

// recoveryState is status.state for the engine's state ("" stays "").
func recoveryState(s catchup.State) recoveryv1.RecoveryState {
	switch s {
	case catchup.StateCatchingUp:
		return recoveryv1.StateCatchingUp
	case catchup.StateCurrent:
		return recoveryv1.StateCurrent
	case catchup.StateRetrying:
		return recoveryv1.StateRetrying
	case catchup.StateBlocked:
		return recoveryv1.StateBlocked
	}
	return ""
}

// recoveryReason is status.reason for the engine's reason: a stable code
// as it is, the engine's own reasons as the API names them.
func recoveryReason(reason string) string {
	if reason == catchup.ReasonInvalidSpec {
		return recoveryv1.ReasonInvalidSpec
	}
	return reason
}

func resourceKey(obj *recoveryv1.ProjectionRecovery) string { return obj.Namespace + "/" + obj.Name }
