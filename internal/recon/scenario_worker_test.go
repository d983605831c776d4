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

import (
	"testing"
	"time"
)

func TestScenario_Worker(t *testing.T) { runScenarios(t, workerScenarios()) }

func workerScenarios() []scenario {
	cursor := "projection_catchup_cursor/scope=" + fxScope
	lease := "projection_catchup_lease/scope=" + fxScope
	runs := "projection_runs/scope=" + fxScope
	stale := func(s *Snapshot, state string, age time.Duration) {
		s.SQL.Cursor.State, s.SQL.Cursor.UpdatedAt = state, fxNow.Add(-age)
		s.Scopes[0].State, s.Scopes[0].UpdatedAt = state, fxNow.Add(-age)
	}
	outbox := func(s *Snapshot, id int64, msg string, created time.Duration) {
		s.SQL.Outbox = append(s.SQL.Outbox, OutboxRow{ID: id, MsgID: msg, Account: "acc-2", Instrument: "BTC-USD", Quantity: d("3"),
			AvgCost: d("100"), CursorSeq: 14, CreatedAt: fxNow.Add(-created)})
	}
	ob := func(id, msg string) string { return "projection_catchup_outbox/id=" + id + ",msg_id=" + msg }
	return []scenario{
		{name: "cursor.progress: one stuck scope among live ones gets a cycle",
			mutate:  func(s *Snapshot) { stale(s, StateCatchingUp, 10*time.Minute) },
			want:    []string{"cursor.progress@" + cursor + "=scope_stuck"},
			actions: []string{"trigger_cycle:" + cursor},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if a := action(t, p, "trigger_cycle:"+cursor); !a.Reversible || a.LifecycleEvent != "cycle.requested" || a.After["cycle"] != "requested" {
					t.Errorf("trigger action: %+v", a)
				}
			}},
		{name: "cursor.progress: every scope stale at once is manager_not_running, no trigger",
			mutate: func(s *Snapshot) {
				stale(s, StateCatchingUp, 10*time.Minute)
				s.Scopes[1].State, s.Scopes[1].UpdatedAt = StateRetrying, fxNow.Add(-time.Hour)
			},
			want:   []string{"cursor.progress@" + cursor + "=manager_not_running"},
			manual: map[string]string{"cursor.progress@" + cursor: "start the manager"},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if !r.ManagerNotRunning {
					t.Error("report does not say manager_not_running")
				}
			}},
		{name: "cursor.progress: a blocked scope does not count as live",
			mutate: func(s *Snapshot) {
				stale(s, StateCatchingUp, 10*time.Minute)
				s.Scopes[1].State = StateBlocked
			},
			want:    []string{"cursor.progress@" + cursor + "=worker_not_progressing"},
			actions: []string{"trigger_cycle:" + cursor}},
		{name: "cursor.progress: RETRYING a transient reason",
			mutate: func(s *Snapshot) {
				stale(s, StateRetrying, 10*time.Minute)
				s.SQL.Cursor.BlockedReason = "SOURCE_UNAVAILABLE"
			},
			want:    []string{"cursor.progress@" + cursor + "=retrying_transient"},
			actions: []string{"trigger_cycle:" + cursor}},
		{name: "cursor.progress: CURRENT is never stale, BLOCKED is a refusal not a stall",
			mutate: func(s *Snapshot) {
				s.SQL.Cursor.UpdatedAt = fxNow.Add(-time.Hour)
				s.Scopes[0].UpdatedAt = fxNow.Add(-time.Hour)
			}},
		{name: "cursor.event_count_agrees: a count the source does not have is manual",
			mutate: func(s *Snapshot) { s.SQL.Cursor.EventCount++ },
			want:   []string{"cursor.event_count_agrees@" + cursor + "=count_not_updated"},
			manual: map[string]string{"cursor.event_count_agrees@" + cursor: "re-verify from genesis"}},
		{name: "cursor.chain_agrees: a digest of another history is manual",
			mutate: func(s *Snapshot) { s.SQL.Cursor.ChainDigest = fxDigestMid },
			want:   []string{"cursor.chain_agrees@" + cursor + "=chain_diverged"},
			manual: map[string]string{"cursor.chain_agrees@" + cursor: "re-verify from genesis"}},
		{name: "cursor.chain_agrees: a cursor below B is checked at its chain point",
			mutate: func(s *Snapshot) {
				s.SQL.Cursor.VerifiedThroughSeq, s.SQL.Cursor.EventCount, s.SQL.Cursor.ChainDigest = 12, eventsThrough(s, 12), fxDigest
				s.Source.Chain = []ChainPoint{{Seq: 12, Digest: fxDigestMid}}
				s.SQL = withBasisAt(s, 12)
			},
			want:   []string{"cursor.chain_agrees@" + cursor + "=chain_diverged"},
			manual: map[string]string{"cursor.chain_agrees@" + cursor: "re-verify from genesis"}},
		{name: "cursor.identity_agrees: the run's descriptor changed",
			mutate: func(s *Snapshot) { s.SQL.Runs[0].DescriptorHash = fxDigestMid },
			want:   []string{"cursor.identity_agrees@" + cursor + "=descriptor_changed"},
			manual: map[string]string{"cursor.identity_agrees@" + cursor: "identities belong"}},
		{name: "cursor.identity_agrees: the explicit-recovery checkpoint contradicts the chain",
			mutate: func(s *Snapshot) {
				s.SQL.Runs[0].RecoveryCheckpointSeq, s.SQL.Runs[0].RecoveryCheckpointDigest = i64(14), fxDigestMid
			},
			want:   []string{"cursor.identity_agrees@" + cursor + "=descriptor_changed"},
			manual: map[string]string{"cursor.identity_agrees@" + cursor: "identities belong"}},
		{name: "cursor.within_boundary: a cursor past the source boundary",
			mutate: func(s *Snapshot) { s.SQL.Cursor.VerifiedThroughSeq = 19 },
			want:   []string{"cursor.within_boundary@" + cursor + "=cursor_ahead_of_source"},
			manual: map[string]string{"cursor.within_boundary@" + cursor: "re-verify from genesis"}},
		{name: "cursor.within_boundary: a DRAINING run's cursor past its frozen seq",
			mutate: func(s *Snapshot) { s.SQL.Runs[0].Phase, s.SQL.Runs[0].FrozenSeq = PhaseDraining, i64(10) },
			want:   []string{"cursor.within_boundary@" + cursor + "=beyond_frozen"},
			manual: map[string]string{"cursor.within_boundary@" + cursor: "re-verify from genesis"}},
		{name: "lease.fresh: a lease whose holder died mid-work is released (irreversible)",
			mutate: func(s *Snapshot) {
				stale(s, StateCatchingUp, 20*time.Minute)
				s.SQL.Lease.ExpiresAt, s.SQL.Lease.RenewedAt = fxNow.Add(-10*time.Minute), fxNow.Add(-11*time.Minute)
			},
			want:    []string{"lease.fresh@" + lease + "=claim_abandoned", "cursor.progress@" + cursor + "=scope_stuck"},
			actions: []string{"release_lease:" + lease, "trigger_cycle:" + cursor},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				a := action(t, p, "release_lease:"+lease)
				if a.Reversible || a.After["owner"] != "" || a.After["fence"] != "3" || a.Before["owner"] != "manager-0" || a.LifecycleEvent != "lease.released" {
					t.Errorf("release action: %+v", a)
				}
			}},
		{name: "lease.fresh: an unexpired lease its holder stopped renewing is refused",
			mutate: func(s *Snapshot) {
				s.SQL.Lease.ExpiresAt, s.SQL.Lease.RenewedAt = fxNow.Add(time.Hour), fxNow.Add(-10*time.Minute)
			},
			want:   []string{"lease.fresh@" + lease + "=holder_not_renewing"},
			manual: map[string]string{"lease.fresh@" + lease: "the lease is unexpired"}},
		{name: "lease.fresh: a cleanly released lease of a CURRENT scope is not drift",
			mutate: func(s *Snapshot) {
				s.SQL.Lease.ExpiresAt, s.SQL.Lease.RenewedAt = fxNow.Add(-time.Hour), fxNow.Add(-time.Hour)
			}},
		// A repair's session takes the scope's lease (the takeover is what
		// releases a dead holder's claim) and releases it at its end: the
		// row keeps the session's owner with expires_at = the end. The
		// cursor it leaves stuck is the worker's to move, not the session's:
		// still reported (cursor.progress), the lease is not held past expiry.
		{name: "lease.fresh: a lease a repair session released at its end is not held past expiry",
			mutate: func(s *Snapshot) {
				stale(s, StateCatchingUp, 20*time.Minute)
				s.SQL.Lease.Owner, s.SQL.Lease.Fence = RepairLeaseOwnerPrefix+"plan-1-x", 4
				s.SQL.Lease.ExpiresAt, s.SQL.Lease.RenewedAt = fxNow.Add(-10*time.Minute), fxNow.Add(-10*time.Minute-time.Second)
			},
			want:    []string{"cursor.progress@" + cursor + "=scope_stuck"},
			actions: []string{"trigger_cycle:" + cursor}},
		{name: "lease.fresh: a lease a rehearsal released at its end is not held past expiry",
			mutate: func(s *Snapshot) {
				stale(s, StateCatchingUp, 20*time.Minute)
				s.SQL.Lease.Owner, s.SQL.Lease.Fence = RehearsalLeaseOwnerPrefix+"recon-s-1", 4
				s.SQL.Lease.ExpiresAt, s.SQL.Lease.RenewedAt = fxNow.Add(-10*time.Minute), fxNow.Add(-10*time.Minute-time.Second)
			},
			want:    []string{"cursor.progress@" + cursor + "=scope_stuck"},
			actions: []string{"trigger_cycle:" + cursor}},
		// A worker's own release (shutdown, deletion: store.ReleaseLease and
		// ReleaseAll stamp renewed_at = expires_at) is not a death: the row
		// looks like a dead holder's except for that stamp.
		{name: "lease.fresh: a lease its worker released is not held past expiry",
			mutate: func(s *Snapshot) {
				stale(s, StateCatchingUp, 20*time.Minute)
				s.SQL.Lease.Owner, s.SQL.Lease.Fence = "manager-a", 4
				s.SQL.Lease.ExpiresAt, s.SQL.Lease.RenewedAt = fxNow.Add(-10*time.Minute), fxNow.Add(-10*time.Minute)
			},
			want:    []string{"cursor.progress@" + cursor + "=scope_stuck"},
			actions: []string{"trigger_cycle:" + cursor}},
		{name: "run.single_selected: two selected runs are manual",
			mutate: func(s *Snapshot) {
				r := s.SQL.Runs[0]
				r.RunID = 2
				s.SQL.Runs = append(s.SQL.Runs, r)
			},
			want:   []string{"run.single_selected@" + runs + "=double_select"},
			manual: map[string]string{"run.single_selected@" + runs: "runs belong to the trade-processor"}},
		{name: "run.eligible: a SEALED run leaves the scope ineligible",
			mutate: func(s *Snapshot) { s.SQL.Runs[0].Phase = PhaseSealed },
			want:   []string{"run.eligible@" + runs + "=no_eligible_run"},
			manual: map[string]string{"run.eligible@" + runs: "runs belong to the trade-processor"}},
		{name: "outbox.delivered: one skipped row is republished (irreversible)",
			mutate:  func(s *Snapshot) { outbox(s, 2, "m-2", 10*time.Minute) },
			want:    []string{"outbox.delivered@" + ob("2", "m-2") + "=message_not_picked_up"},
			actions: []string{"republish:" + ob("2", "m-2")},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if a := action(t, p, "republish:"+ob("2", "m-2")); a.Reversible || a.After["msg_id"] != "m-2" || a.LifecycleEvent != "outbox.published" {
					t.Errorf("republish action: %+v", a)
				}
			}},
		{name: "outbox.delivered: nothing drains: publisher_not_draining, refused",
			mutate: func(s *Snapshot) {
				s.SQL.Outbox = nil
				outbox(s, 2, "m-2", 10*time.Minute)
			},
			want:   []string{"outbox.delivered@" + ob("2", "m-2") + "=publisher_not_draining"},
			manual: map[string]string{"outbox.delivered@" + ob("2", "m-2"): "fix the publisher first"}},
		{name: "outbox.delivered: the manager reports the connection down",
			mutate: func(s *Snapshot) {
				outbox(s, 2, "m-2", 10*time.Minute)
				s.Publisher = &PublisherStatus{Connected: false}
			},
			want:   []string{"outbox.delivered@" + ob("2", "m-2") + "=publisher_not_draining"},
			manual: map[string]string{"outbox.delivered@" + ob("2", "m-2"): "fix the publisher first"}},
		{name: "outbox.identity_unique: the overdue copy is collapsed, never republished",
			mutate: func(s *Snapshot) {
				outbox(s, 2, "m-2", time.Minute)
				outbox(s, 3, "m-3", 10*time.Minute)
			},
			want:    []string{"outbox.identity_unique@" + ob("3", "m-3") + "=double_publish", "outbox.delivered@" + ob("3", "m-3") + "=message_not_picked_up"},
			actions: []string{"collapse:" + ob("3", "m-3")},
			check: func(t *testing.T, s *Snapshot, r *Report, p *Plan) {
				if a := action(t, p, "collapse:"+ob("3", "m-3")); a.After["collapse_into_id"] != "2" || len(a.Findings) != 2 || a.Reversible {
					t.Errorf("collapse action: %+v", a)
				}
			}},
		// A repair announces the key it changed at the cursor the scope
		// stands at, beside the page's unsent notification it corrects: not
		// a copy of it (store.NotifyRepairTx).
		{name: "outbox.identity_unique: a repair's notification at the page's cursor seq is no copy",
			mutate: func(s *Snapshot) {
				outbox(s, 2, "m-2", time.Minute)
				outbox(s, 3, RepairMsgIDPrefix+"m-3", time.Minute)
				s.SQL.Outbox[2].Quantity = d("4")
			}},
		{name: "outbox.delivered: a manager without NATS says why it does not republish",
			mutate: func(s *Snapshot) {
				outbox(s, 2, "m-2", 10*time.Minute)
				s.Publisher = &PublisherStatus{Missing: "the manager has no NATS connection (--nats-url is not set)"}
			},
			want:   []string{"outbox.delivered@" + ob("2", "m-2") + "=message_not_picked_up"},
			manual: map[string]string{"outbox.delivered@" + ob("2", "m-2"): "cannot republish: the manager has no NATS connection"}},
		{name: "outbox.identity_unique: copies with different values are manual",
			mutate: func(s *Snapshot) {
				outbox(s, 2, "m-2", time.Minute)
				outbox(s, 3, "m-3", time.Minute)
				s.SQL.Outbox[2].Quantity = d("4")
			},
			want:   []string{"outbox.identity_unique@" + ob("3", "m-3") + "=double_publish"},
			manual: map[string]string{"outbox.identity_unique@" + ob("3", "m-3"): "different values"}},
	}
}
