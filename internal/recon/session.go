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

package recon

import "context"

// Session brackets the handler calls of one apply or one rollback (optional:
// a Workflow without one calls its handlers with the caller's context).
//
// Begin runs once every guard has passed, immediately before the first
// handler: a guard refusal therefore never reaches it (the specification's
// guards all run before the first write, and taking a scope's write lease is
// a write). An error from Begin refuses the run with lease_unavailable and
// nothing is written. The context Begin returns is the one every handler and
// every revert of the run receives (it carries, in the PostgreSQL
// deployment, the scope's fenced lease); end runs exactly once after the last
// handler or revert of the run, whatever its outcome (in the PostgreSQL
// deployment: the lease is released).
//
// Without a session bracketing the whole run, a deployment could only take
// its write lease per action, and a recovery page could then commit between
// two actions of one plan, or between an action and the revert that undoes
// it.
type Session interface {
	Begin(ctx context.Context, scope, correlationID string) (hctx context.Context, end func(), err error)
}

// begin starts the run's session; without one, the context is used as is.
func (w *Workflow) begin(ctx context.Context, scope, correlationID string) (context.Context, func(), error) {
	if w.Session == nil {
		return ctx, func() {}, nil
	}
	hctx, end, err := w.Session.Begin(ctx, scope, correlationID)
	if err != nil {
		return nil, nil, err
	}
	if end == nil {
		end = func() {}
	}
	return hctx, end, nil
}
