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

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
	"github.com/projection-recovery/projection-recovery/internal/codes"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/store/storetest"
	"github.com/projection-recovery/projection-recovery/internal/testenv"
)

// reconName is the walk-through's ProjectionReconciliation.
const reconName = "fix-orphan"

// orphanID is the trade the walk-through plants: the trade-processor never
// books a trade the member did not produce, so the recovery must refuse to
// certify the page holding it (ORPHAN_TRADE) rather than prove around it.
const orphanID = "orphan-1"

// orphanSQL copies the newest real trade under a new trade_id at seq $3,
// past the member's boundary (the page that covers $3 meets it). It writes
// trades only, as a buggy or replayed consumer would: positions are left
// alone, so the repair is the quarantine of this one row.
const orphanSQL = `INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity,
    buy_order_id, sell_order_id, buy_account, sell_account, ts, booking_status, written_by)
  SELECT scope, $2, 1000000, $3, instrument, price, quantity,
    buy_order_id, sell_order_id, buy_account, sell_account, ts, 'BOOKED', 'live'
  FROM trades WHERE scope = $1 ORDER BY seq DESC LIMIT 1`

// extraCommands is what the member trades after the orphan is planted:
// enough to cover its seq with a page, few enough to stay quick.
const extraCommands = 200

// stepTimeout bounds each wait of the walk-through (a smoke run must fail,
// not hang, when a controller never gets there).
const stepTimeout = 2 * time.Minute

// walkThrough is `make demo-reconcile`: after the demo's CURRENT, break a
// row, watch the recovery BLOCK, report and plan with a
// ProjectionReconciliation, approve with the kubectl plugin as the user the
// API server authenticates, watch the outcome verified and the recovery
// CURRENT again, and re-run the independent replay.
type walkThrough struct {
	ctx                                                      context.Context
	scope, root, work, bin, kubeconfig, repairDSN, memberURL string
	// kubectl runs kubectl on the demo's cluster (output and errors
	// together, as a user sees them); kubectlPath is the binary.
	kubectl     func(...string) (string, error)
	kubectlPath string
	pool        *pgxpool.Pool
	manager     *testenv.Process
	commands    int
	// restartMember stops the member and starts it again on its log (a new
	// recording term) trading up to maxCommands.
	restartMember func(maxCommands int) (*testenv.Process, error)
}

func (w *walkThrough) run() error {
	fmt.Println()
	say("RECONCILIATION WALK-THROUGH: a trade the trade-processor never booked appears in SQL")
	d, err := fetchDescriptor(w.memberURL)
	if err != nil {
		return err
	}
	seq := d.BoundarySeq + 1
	fmt.Printf("  %s\n  -- $1=%q $2=%q $3=%d\n", orphanSQL, w.scope, orphanID, seq)
	tag, err := w.pool.Exec(w.ctx, orphanSQL, w.scope, orphanID, seq)
	if err != nil {
		return fmt.Errorf("planting the orphan trade: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("planting the orphan trade inserted %d rows, want 1", tag.RowsAffected())
	}

	if err := w.tradeOn(); err != nil {
		return err
	}

	say("kubectl get projectionrecoveries: the page covering seq %d holds a trade the source never produced", seq)
	rec, err := w.waitRecovery("BLOCKED", func(r *recoveryv1.ProjectionRecovery) (bool, error) {
		if r.Status.State != recoveryv1.StateBlocked {
			return false, nil
		}
		if r.Status.Reason != string(codes.OrphanTrade) {
			return false, fmt.Errorf("the recovery is BLOCKED by %s (%s), want %s", r.Status.Reason, r.Status.Message, codes.OrphanTrade)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("  status.message: %s\n", rec.Status.Message)

	user, err := w.grantApprover()
	if err != nil {
		return err
	}
	if err := w.createReconciliation(rec.Name); err != nil {
		return err
	}

	say("kubectl get projectionreconciliations: a dry run reports, plans and rehearses the repair")
	pr, err := w.waitReconciliation("a report with a plan", func(o *recoveryv1.ProjectionReconciliation) bool {
		return o.Status.RunState == recoveryv1.RunReported && o.Status.Report != nil && o.Status.Plan != nil && o.Status.Plan.PlanID != ""
	})
	if err != nil {
		return err
	}
	// report exits 3 while the report holds any finding (drift), 0 only
	// when there is none: here the planted orphan is a finding.
	if code, err := w.plugin("report", reconName); err != nil || code != 3 {
		return fmt.Errorf("kubectl projection report exited %d (%v), want 3 (drift found)", code, err)
	}
	if !reportsOrphan(pr.Status.Report) {
		return fmt.Errorf("the report does not name %s: %+v", orphanID, *pr.Status.Report)
	}
	planID := pr.Status.Plan.PlanID
	if code, err := w.plugin("approve", reconName, "--plan-id", planID); err != nil || code != 0 {
		return fmt.Errorf("kubectl projection approve exited %d (%v), want 0", code, err)
	}

	say("kubectl get projectionreconciliations: the controller checks the approve verb (SubjectAccessReview), applies and verifies")
	pr, err = w.waitReconciliation("the outcome of the approval", func(o *recoveryv1.ProjectionReconciliation) bool {
		oc := o.Status.Outcome
		return oc != nil && oc.Operation == "apply" && oc.PlanID == planID && o.Status.ObservedGeneration == o.Generation
	})
	if err != nil {
		return err
	}
	oc := pr.Status.Outcome
	fmt.Printf("  outcome: apply %s by %s, %d action(s) applied, %d verified, %d still drifting, correlation %s\n",
		oc.Result, oc.Approver, oc.Applied, oc.Verified, oc.StillDrifting, oc.CorrelationID)
	if oc.Result != "ok" || !oc.VerificationRan || oc.Verified == 0 || oc.StillDrifting != 0 || oc.Approver != user {
		return fmt.Errorf("the approved apply did not end verified: %+v", *oc)
	}
	var left int
	if err := w.pool.QueryRow(w.ctx, `SELECT count(*) FROM trades WHERE scope = $1 AND trade_id = $2`, w.scope, orphanID).Scan(&left); err != nil {
		return err
	}
	if left != 0 {
		return fmt.Errorf("the apply reported ok but %s is still in trades", orphanID)
	}
	say("%s is out of trades (quarantined, reversible: kubectl projection rollback %s)", orphanID, reconName)

	say("kubectl get projectionrecoveries: the repair re-triggers the recovery, which proves the rest")
	b, err := fetchDescriptor(w.memberURL)
	if err != nil {
		return err
	}
	rec, err = w.waitRecovery("CURRENT", func(r *recoveryv1.ProjectionRecovery) (bool, error) {
		return r.Status.State == recoveryv1.StateCurrent && r.Status.VerifiedThroughSeq == b.BoundarySeq && r.Status.LastReconciliation != "", nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("  status.lastReconciliation: %s\n", rec.Status.LastReconciliation)
	if want := reconName + "/" + oc.CorrelationID; rec.Status.LastReconciliation != want {
		return fmt.Errorf("the recovery names reconciliation %q, want %q", rec.Status.LastReconciliation, want)
	}
	if out, err := w.kubectl("get", "projectionreconciliations", "-n", "default", "-o", "wide"); err == nil {
		fmt.Print(out)
	}

	keys, err := storetest.VerifyAgainstSource(w.ctx, w.memberURL, w.pool, w.scope)
	if err != nil {
		return fmt.Errorf("the repaired projection does not match the source: %w", err)
	}
	say("after the approved repair: all %d position keys equal an independent replay of the member's log (plan %s, correlation %s)", keys, planID, oc.CorrelationID)
	return nil
}

// reportsOrphan says whether the report's top findings name the planted
// trade under trade.present_in_source.
func reportsOrphan(r *recoveryv1.ReportSummary) bool {
	for _, f := range r.Top {
		if f.Invariant == string(recon.TradePresentInSource) && strings.Contains(f.ID, "trade_id="+orphanID) {
			return true
		}
	}
	return false
}

// tradeOn restarts the member to trade extraCommands more, so that a page
// of the recovery covers the orphan's seq.
func (w *walkThrough) tradeOn() error {
	target := w.commands + extraCommands
	say("the member trades %d more commands (restarted on its log: a new recording term)", extraCommands)
	m, err := w.restartMember(target)
	if err != nil {
		return err
	}
	deadline := time.After(stepTimeout)
	for {
		if d, err := fetchDescriptor(w.memberURL); err == nil && d.BoundarySeq >= int64(target) {
			return nil
		}
		select {
		case <-w.ctx.Done():
			return w.ctx.Err()
		case <-m.Exited:
			return fmt.Errorf("the member exited (%v); see %s/member.log:\n%s", m.Err, w.work, tail(filepath.Join(w.work, "member.log")))
		case <-deadline:
			return fmt.Errorf("the member did not reach %d commands within %s", target, stepTimeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// grantApprover binds the shipped approver role to the demo's user and
// installs the shipped admission policy, and returns the user's name as the
// API server knows it. The controller's SubjectAccessReview names the user
// without its groups, so system:masters alone would not pass it: the
// approve verb must be granted by RBAC, as in production.
func (w *walkThrough) grantApprover() (string, error) {
	user, err := w.kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
	if err != nil {
		return "", fmt.Errorf("kubectl auth whoami: %w: %s", err, user)
	}
	user = strings.TrimSpace(user)
	say("granting %s the approve verb (config/rbac/reconciliation_approver_role.yaml) and installing the approval admission policy (config/admission)", user)
	root := w.root
	steps := [][]string{
		{"apply", "-f", filepath.Join(root, "config/rbac/reconciliation_approver_role.yaml")},
		{"apply", "-f", filepath.Join(root, "config/admission/approval_policy.yaml")},
		{"apply", "-f", filepath.Join(root, "config/admission/approval_policy_binding.yaml")},
		{"create", "rolebinding", "demo-approver", "-n", "default", "--clusterrole", "projection-reconciliation-approver", "--user", user},
	}
	for _, args := range steps {
		out, err := w.kubectl(args...)
		fmt.Print(indent(out))
		if err != nil {
			return "", fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
		}
	}
	return user, nil
}

// createReconciliation applies the repair Secret and the
// ProjectionReconciliation, printing the manifest.
func (w *walkThrough) createReconciliation(recovery string) error {
	// The repair DSN is the projection_reconciliation role's
	// (docs/database-role.md): it may quarantine and correct rows, nothing
	// else; the recovery's DSN (projection_recovery) cannot.
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %[1]s-repair-db, namespace: default}
stringData: {dsn: %[2]q}
---
apiVersion: recovery.projection.io/v1alpha1
kind: ProjectionReconciliation
metadata: {name: %[3]s, namespace: default}
spec:
  recoveryRef: {name: %[4]s}
  repairDsnSecretRef: {name: %[1]s-repair-db, key: dsn}
`, w.scope, w.repairDSN, reconName, recovery)
	path := filepath.Join(w.work, "reconciliation.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		return err
	}
	say("creating ProjectionReconciliation %s (%s; the Secret holds the repair DSN)", reconName, path)
	shown := strings.Replace(manifest, fmt.Sprintf("%q", w.repairDSN), `"<repair DSN>"`, 1)
	fmt.Print(indent(shown))
	out, err := w.kubectl("apply", "-f", path)
	fmt.Print(indent(out))
	return err
}

// plugin runs bin/kubectl-projection against the demo's cluster, printing
// the command as a user would type it and its output; it returns the exit
// code (the plugin's are stable: 0 ok, 3 not clean or refused).
func (w *walkThrough) plugin(args ...string) (int, error) {
	say("$ kubectl projection %s", strings.Join(args, " "))
	cmd := exec.CommandContext(w.ctx, filepath.Join(w.bin, "kubectl-projection"), append([]string{"--kubeconfig", w.kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	fmt.Print(indent(out.String()))
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}

// waitRecovery prints the recoveries' table as it changes until done holds
// for the demo's scope.
func (w *walkThrough) waitRecovery(what string, done func(*recoveryv1.ProjectionRecovery) (bool, error)) (*recoveryv1.ProjectionRecovery, error) {
	r := &recoveryv1.ProjectionRecovery{}
	err := watchTable(w.ctx, w.kubectl, "projectionrecoveries", stepTimeout, w.manager, w.work, func(string) (bool, error) {
		if err := w.getJSON("projectionrecovery", w.scope, r); err != nil {
			return false, nil // transient: polled again
		}
		return done(r)
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the recovery to be %s: %w", what, err)
	}
	return r, nil
}

// waitReconciliation prints the reconciliations' table as it changes until
// done holds for the walk-through's reconciliation.
func (w *walkThrough) waitReconciliation(what string, done func(*recoveryv1.ProjectionReconciliation) bool) (*recoveryv1.ProjectionReconciliation, error) {
	var r *recoveryv1.ProjectionReconciliation
	err := watchTable(w.ctx, w.kubectl, "projectionreconciliations", stepTimeout, w.manager, w.work, func(string) (bool, error) {
		got := &recoveryv1.ProjectionReconciliation{}
		if err := w.getJSON("projectionreconciliation", reconName, got); err != nil {
			return false, nil
		}
		r = got
		return done(got), nil
	})
	if err != nil {
		if r != nil {
			return nil, fmt.Errorf("waiting for %s (run state %q, conditions %+v): %w", what, r.Status.RunState, r.Status.Conditions, err)
		}
		return nil, fmt.Errorf("waiting for %s: %w", what, err)
	}
	return r, nil
}

// getJSON reads one object of the default namespace with kubectl (the demo
// decides on what a user could see). Only stdout is decoded: a warning on
// stderr must not break the JSON.
func (w *walkThrough) getJSON(resource, name string, into any) error {
	cmd := exec.CommandContext(w.ctx, w.kubectlPath, "--kubeconfig", w.kubeconfig, "get", resource, name, "-n", "default", "-o", "json")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl get %s %s: %w: %s", resource, name, err, strings.TrimSpace(errOut.String()))
	}
	return json.Unmarshal(out.Bytes(), into)
}

// indent prefixes every line with two spaces, so command output stands
// apart from the demo's narration.
func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ") + "\n"
}
