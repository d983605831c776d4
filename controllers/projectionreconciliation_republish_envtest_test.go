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
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/notify"
	"github.com/projection-recovery/projection-recovery/internal/recon"
)

// TestEnvtest_RepublishThroughTheManagersNATS, on real parts (apiserver,
// PostgreSQL with the documented roles, the suite's nats-server): with the
// recovery suspended (its worker holds the scope's lease while it cycles),
// the database's outbox publisher is stuck on one row (a session holds its
// drain lock) while the scope's other rows went out, so the row is overdue
// and a ProjectionReconciliation plans republish; its rehearsal would
// succeed, and the approved apply sends the row through the manager's NATS
// connection as the publisher would (subject, body, Nats-Msg-Id) and
// stamps it sent. Without the manager's Publish wiring the rehearsal fails
// ("no publisher") and so does the apply.
func TestEnvtest_RepublishThroughTheManagersNATS(t *testing.T) {
	installApprovalManifests(t)
	ns := newNamespace(t)
	grantApprove(t, ns, "alice")
	f := newFixture(t, "republish", 60, 0.3) // lost live events: pages change keys and notify
	rec := f.recovery(ns, "republish", nil, nil)
	waitState(t, ns, rec.Name, 60*time.Second, "CURRENT", isCurrentAt(f.boundary()))

	// The publisher drains the scope's rows, then its drain lock is held.
	eventually(t, 60*time.Second, "the outbox drained", func() (bool, error) {
		var unsent int
		err := f.pool.QueryRow(bg, `SELECT count(*) FROM projection_catchup_outbox WHERE sent_at IS NULL`).Scan(&unsent)
		return unsent == 0, err
	})
	// The worker keeps the scope's lease while it runs cycles: suspended,
	// its lease expires and a repair session may take it.
	cur := &recoveryv1.ProjectionRecovery{}
	if err := k8sClient.Get(bg, client.ObjectKeyFromObject(rec), cur); err != nil {
		t.Fatal(err)
	}
	orig := cur.DeepCopy()
	cur.Spec.Suspend = true
	if err := k8sClient.Patch(bg, cur, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the worker's lease expired", func() (bool, error) {
		var expired bool
		err := f.pool.QueryRow(bg, `SELECT expires_at <= now() FROM projection_catchup_lease WHERE scope = $1`, f.scope).Scan(&expired)
		return expired, err
	})
	lock, err := f.pool.Acquire(bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(bg, `SELECT pg_advisory_lock(hashtextextended('projection-recovery:outbox', 0))`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = lock.Exec(bg, `SELECT pg_advisory_unlock(hashtextextended('projection-recovery:outbox', 0))`)
		lock.Release()
	})
	var id int64
	var msgID, qty, avg string
	if err := f.pool.QueryRow(bg, `UPDATE projection_catchup_outbox SET sent_at = NULL, created_at = now() - interval '10 minutes'
 WHERE id = (SELECT max(id) FROM projection_catchup_outbox WHERE scope = $1) RETURNING id, msg_id, quantity::text, avg_cost::text`, f.scope).
		Scan(&id, &msgID, &qty, &avg); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(bg, `UPDATE projection_catchup_outbox SET sent_at = now() WHERE scope = $1 AND id <> $2`, f.scope, id); err != nil {
		t.Fatal(err)
	}

	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", suiteNATSPort))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	got := make(chan *nats.Msg, 4)
	if _, err := nc.ChanSubscribe(notify.DefaultSubjectPrefix+"."+f.scope, got); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	createSecret(t, ns, "repair-db", map[string]string{"dsn": f.reconDSN})
	pr := &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fix-republish"},
		Spec: recoveryv1.ProjectionReconciliationSpec{RecoveryRef: recoveryv1.RecoveryReference{Name: rec.Name},
			RepairDSNSecretRef: &recoveryv1.SecretKeySelector{Name: "repair-db", Key: "dsn"}}}
	if err := k8sClient.Create(bg, pr); err != nil {
		t.Fatal(err)
	}
	want := "republish:projection_catchup_outbox/id=" + fmt.Sprint(id) + ",msg_id=" + msgID
	o := waitRecon(t, ns, pr.Name, "a plan that republishes the row", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.RunState == recoveryv1.RunReported && o.Status.Plan != nil && o.Status.ObservedGeneration == o.Generation &&
			len(o.Status.Plan.Items) == 1 && o.Status.Plan.Items[0].ID == want
	})
	if !o.Status.Plan.WouldSucceed {
		t.Fatalf("plan %+v: the preflight of republish fails", o.Status.Plan)
	}

	specAs(t, "alice", nil, ns, pr.Name, func(s *recoveryv1.ProjectionReconciliationSpec) {
		s.Approval = approvalOf(o, "alice", nil)
		s.Approval.AllowIrreversible = true
	})
	o = waitRecon(t, ns, pr.Name, "republish applied", outcomeIs(opApply, resultOK, o.Status.Plan.PlanID))
	if oc := o.Status.Outcome; oc.Applied != 1 {
		t.Fatalf("outcome %+v: want the republish applied", oc)
	}
	select {
	case m := <-got:
		var n notify.Notification
		if err := json.Unmarshal(m.Data, &n); err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(nats.MsgIdHdr) != msgID || n.MsgID != msgID || n.Scope != f.scope || n.Quantity != qty || n.AvgCost != avg {
			t.Fatalf("republished %s %+v, want msg id %s with %s@%s", m.Header.Get(nats.MsgIdHdr), n, msgID, qty, avg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing republished on NATS")
	}
	var sent bool
	if err := f.pool.QueryRow(bg, `SELECT sent_at IS NOT NULL FROM projection_catchup_outbox WHERE id = $1`, id).Scan(&sent); err != nil || !sent {
		t.Fatalf("the republished row is not stamped sent (%v)", err)
	}
	// The apply's follow-up dry run finds the outbox delivered.
	o = waitRecon(t, ns, pr.Name, "a clean report after the republish", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.Report != nil && o.Status.Report.Findings == 0
	})
	for _, c := range o.Status.Report.ByInvariant {
		if c.Name == string(recon.OutboxDelivered) {
			t.Fatalf("the report after the republish: %+v", o.Status.Report)
		}
	}
}
