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
// Begin runs once every guard has passed, immediately before the first
// handler; its error refuses the run with lease_unavailable, nothing
// written. Its context (in PostgreSQL: carrying the scope's fenced lease) is
// the one every handler and revert of the run receives; end runs exactly
// once after the last of them. Without one session per run, a recovery page
// could commit between two actions of a plan, or between an action and its
// revert (docs/design/repairs.md, "One session per run").
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
