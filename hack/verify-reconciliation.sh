#!/usr/bin/env bash
# make verify-reconciliation: the reconciliation engine's CI guard. It fails when
#   - an invariant is declared but never checked, or checked but never declared
#     (TestGuard_InvariantsWired, TestGuard_EmitRefusesUndeclared);
#   - an invariant has no repair strategy, or a drift kind disappears (TestGuard_InvariantsWired);
#   - an invariant or cause has no scenario (TestGuard_EveryInvariantAndCauseHasAScenario);
#   - a blocking refusal code has no invariant to explain it (TestRefusal_EveryBlockingCodeHasAnInvariant);
#   - detection or planning gains a write path: a forbidden import anywhere in
#     what they link, a writer among the arguments they receive, behaviour in
#     the snapshot (TestGuard_NoWritePathImports, TestGuard_DetectionReceivesNoWriter),
#     or a mutation of the snapshot (TestPurity_DetectAndPlanNeverMutate);
#   - the apply path loses a guard: permission, confirmation, tamper, expiry,
#     irreversible opt-in, blast radius, handlers, fresh read, stale plan, or
#     its rollback (TestGuard_ApplyPathKeepsItsGuards, TestApply_GuardsWriteNothing,
#     TestApply_GuardOrder, TestApply_IrreversibleNeedsOptIn, TestApply_FailureRollsBackNewestFirst,
#     TestRollback_Guards).
set -euo pipefail
cd "$(dirname "$0")/.."
tests='^(TestGuard_.*|TestRefusal_EveryBlockingCodeHasAnInvariant|TestPurity_DetectAndPlanNeverMutate|TestApply_GuardsWriteNothing|TestApply_GuardOrder|TestApply_IrreversibleNeedsOptIn|TestApply_FailureRollsBackNewestFirst|TestRollback_Guards)$'
if ! out="$(go test -count=1 -run "${tests}" -v ./internal/recon 2>&1)"; then
  echo "${out}" | grep -E '^\s*(--- FAIL|\S+_test\.go:[0-9]+:)' | head -60
  echo "verify-reconciliation: FAILED"
  exit 1
fi
n="$(echo "${out}" | grep -cE '^--- PASS' || true)"
echo "verify-reconciliation: ${n} guard tests pass (invariants wired, no write path in detection or planning, apply guards intact)"
