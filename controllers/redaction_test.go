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
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	recoveryv1 "github.com/projection-recovery/projection-recovery/api/v1alpha1"
)

// TestEventNote_WithinTheAPIBound: every note recordEvent sends fits
// events.k8s.io/v1's 1,024 bytes, is valid UTF-8, shows it was cut, and is
// redacted before it is cut.
func TestEventNote_WithinTheAPIBound(t *testing.T) {
	pw := "s3cret-repair-password"
	sec := resolvedSecrets{dsn: "postgres://repair:" + pw + "@db:5432/exchange"}
	for _, tc := range []struct {
		name      string
		note      string
		wantSame  bool
		forbidden string
	}{
		{"a short note is unchanged", "apply ok (correlation c-1)", true, ""},
		{"exactly the bound is unchanged", strings.Repeat("a", maxEventNote), true, ""},
		{"one byte over is cut", strings.Repeat("a", maxEventNote+1), false, ""},
		{"a rune across the cut is not split", strings.Repeat("a", maxEventNote-4) + strings.Repeat("€", 10), false, ""},
		{"invalid UTF-8 is made valid", strings.Repeat("a", 10) + "\xff\xfe", false, "\xff"},
		{"a secret across the cut leaves no half", strings.Repeat("a", maxEventNote-10) + pw + " and more", false, pw[:8]},
		{"a secret anywhere is redacted", "refused: " + sec.dsn, false, pw},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := eventNote(tc.note, sec)
			switch {
			case len(got) > maxEventNote || !utf8.ValidString(got):
				t.Fatalf("note of %d bytes (valid UTF-8: %t)", len(got), utf8.ValidString(got))
			case tc.wantSame && got != tc.note:
				t.Fatalf("note changed: %q", got)
			case len(tc.note) > maxEventNote && !strings.HasSuffix(got, "..."):
				t.Fatalf("a cut note must end in an ellipsis: …%q", got[max(0, len(got)-20):])
			case tc.forbidden != "" && strings.Contains(got, tc.forbidden):
				t.Fatalf("note keeps %q: %q", tc.forbidden, got)
			}
		})
	}
}

// TestReconStatus_FinalisesEveryMessage: whatever path set a message (an
// outcome's, a failed dry run's, a stall's), computeStatus redacts it of the
// recovery's and the repair DSN's secrets before bounding it.
func TestReconStatus_FinalisesEveryMessage(t *testing.T) {
	recoveryPW, repairPW := "recovery-pw-1234", "repair-pw-5678"
	secrets := resolvedSecrets{dsn: "postgres://projection_recovery:" + recoveryPW + "@db:5432/exchange", token: "member-token-abcd"}
	repairDSN := "host=db port=5432 user=repair password='" + repairPW + "' dbname=exchange"
	leak := "failed to connect to `user=" + repairPW + " database=exchange`: db:5432: " + repairDSN + " / " + secrets.dsn + " / " + secrets.token
	// Over the bound raw, within it redacted: bounding first would cut the
	// password and leave its first half.
	long := strings.Repeat("x", maxMessage-12) + repairPW
	for _, tc := range []struct {
		name  string
		scope func(*reconScope)
	}{
		{"an apply outcome", func(s *reconScope) {
			s.obj.Status.Outcome = &recoveryv1.OutcomeSummary{Operation: opApply, Result: "lease_unavailable", Message: leak}
		}},
		{"a rollback outcome cut at the bound", func(s *reconScope) {
			s.obj.Status.Outcome = &recoveryv1.OutcomeSummary{Operation: opRollback, Result: "internal", Message: long}
			s.obj.Spec.Rollback = &recoveryv1.ReconciliationRollback{CorrelationID: "c-1", Approver: "alice"}
		}},
		{"a failed dry run", func(s *reconScope) {
			s.obj.Status.RunState = recoveryv1.RunFailed
			s.runError = leak
		}},
		{"a stall", func(s *reconScope) { s.stallReason, s.stallMessage = ReasonRecoveryNotFound, leak }},
		{"a report's cause line", func(s *reconScope) {
			s.obj.Status.RunState = recoveryv1.RunReported
			s.obj.Status.Report = &recoveryv1.ReportSummary{Findings: 1, Top: []recoveryv1.FindingSummary{{ID: "f-1", Invariant: "i", Cause: leak}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &reconScope{obj: &recoveryv1.ProjectionReconciliation{ObjectMeta: metav1.ObjectMeta{Generation: 2}},
				now: time.Now(), secrets: secrets, repairDSN: repairDSN}
			tc.scope(s)
			(&ProjectionReconciliationReconciler{}).computeStatus(s)
			text := string(mustMarshal(t, s.obj.Status))
			for _, secret := range []string{recoveryPW, repairPW, repairPW[:8], secrets.token} {
				if strings.Contains(text, secret) {
					t.Fatalf("status keeps %q: %s", secret, text)
				}
			}
			if o := s.obj.Status.Outcome; o != nil && (len(o.Message) > maxMessage || !strings.Contains(o.Message, "[redacted]")) {
				t.Fatalf("outcome message of %d bytes, redacted: %t", len(o.Message), strings.Contains(o.Message, "[redacted]"))
			}
		})
	}
}

// TestRedactingLogger: the workflow's logger redacts messages, values
// (given with the line or before, with WithValues), errors and Stringers.
func TestRedactingLogger(t *testing.T) {
	const secret = "the-repair-password"
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{Verbosity: 1})
	log := redactingLogger(base, func(s string) string { return strings.ReplaceAll(s, secret, "[redacted]") }).WithName("reconciliation")
	log.WithValues("dsn", "postgres://u:"+secret+"@db").Info("refused: "+secret, "detail", errors.New("dial "+secret), "n", 3)
	log.V(1).Info("debug", "why", secret)
	log.Error(errors.New("connect "+secret), "store the run", "scope", "s")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3: %q", len(lines), lines)
	}
	for _, l := range lines {
		if strings.Contains(l, secret) || !strings.Contains(l, "[redacted]") {
			t.Fatalf("line not redacted: %s", l)
		}
	}
}

// TestEvents_EveryNoteGoesThroughRecordEvent: no code of this package calls
// a recorder's Eventf except recordEvent, so no note skips its redaction
// and bound.
func TestEvents_EveryNoteGoesThroughRecordEvent(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Name.Name == "recordEvent" {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Eventf" || sel.Sel.Name == "AnnotatedEventf") {
					t.Errorf("%s: %s calls %s directly; use recordEvent", fset.Position(sel.Pos()), fn.Name.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
}

func TestRedact_RemovesCredentials(t *testing.T) {
	sec := resolvedSecrets{dsn: "postgres://app:p%40ss-w0rd@db.internal:5432/proj", token: "tok-123456"}
	msg := `failed to connect to postgres://app:p%40ss-w0rd@db.internal:5432/proj (password p@ss-w0rd), bearer tok-123456`
	got := redact(msg, sec)
	for _, leak := range []string{"p@ss-w0rd", "p%40ss-w0rd", "tok-123456"} {
		if strings.Contains(got, leak) {
			t.Fatalf("redact left %q in %q", leak, got)
		}
	}
	kv := resolvedSecrets{dsn: "host=db user=app password='hunter22' dbname=proj"}
	if got := redact("auth failed for password hunter22", kv); strings.Contains(got, "hunter22") {
		t.Fatalf("redact left a key/value password in %q", got)
	}
	if s := (resolvedSecrets{dsn: "x"}).String(); strings.Contains(s, "x}") {
		t.Fatalf("resolvedSecrets prints its content: %s", s)
	}
}
