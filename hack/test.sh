#!/usr/bin/env bash
# Runs `go test` verbosely into a log and prints a readable digest: every
# top-level test with its result (so the envtest suite and the PostgreSQL
# tests visibly ran, not skipped), each package's line, and a closing
# "N passed, N failed, N skipped" line. Exit status is go test's.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
log="${root}/bin/test.log"
mkdir -p "${root}/bin"
echo "test: PROJECTION_TEST_DSN=${PROJECTION_TEST_DSN:+set (real PostgreSQL)} KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-unset}"
go test -count=1 -timeout=40m -v "$@" >"${log}" 2>&1
rc=$?
grep -E '^(--- (PASS|FAIL|SKIP)|ok  |FAIL|panic:|envtest:|pgtest:)' "${log}" | grep -vE '^--- (PASS|SKIP).*/' || true
if [[ ${rc} -ne 0 ]]; then
  echo "---- failures (full log: ${log}) ----"
  grep -nE -B2 -A25 '^\s*--- FAIL' "${log}" | head -400 || true
fi
passed=$(grep -cE '^\s*--- PASS' "${log}" || true)
failed=$(grep -cE '^\s*--- FAIL' "${log}" || true)
skipped=$(grep -cE '^\s*--- SKIP' "${log}" || true)
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
exit ${rc}
