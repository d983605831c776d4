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

	"github.com/projection-recovery/projection-recovery/internal/notify"
	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// noNATS is why a manager without NATS can neither publish nor republish.
const noNATS = "the manager has no NATS connection (--nats-url is not set)"

// Republish is reconstore.RunnerConfig.Publish of this manager: the row
// goes out on the manager's NATS connection as the outbox publisher sends
// it (notify.Message: the same subject, body and Nats-Msg-Id, so a row the
// publisher sends too is deduplicated), and the hook returns once NATS has
// it, before the handler stamps the row sent. nil without NATS: republish
// then fails, and the planner already refused it (PublisherStatus).
func (c *Connections) Republish() func(context.Context, notify.Notification) error {
	nc := c.NATS
	if nc == nil {
		return nil
	}
	return func(ctx context.Context, n notify.Notification) error {
		return notify.Send(ctx, nc, notify.DefaultSubjectPrefix, n)
	}
}

// PublisherStatus is reconstore.RunnerConfig.Publisher of this manager:
// its NATS connection as detection and the planner see it. Without NATS it
// says so (Missing): republish is refused with that reason at planning, so
// a plan is never left unapprovable by an action no rehearsal can pass.
func (c *Connections) PublisherStatus() *recon.PublisherStatus {
	if c.NATS == nil {
		return &recon.PublisherStatus{Missing: noNATS}
	}
	return &recon.PublisherStatus{Connected: c.NATS.IsConnected()}
}
