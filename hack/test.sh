#!/usr/bin/env bash
# Runs `go test` verbosely into a log and prints a readable digest: every
# top-level test with its result (so the envtest suite and the PostgreSQL
# tests visibly ran, not skipped), each package's line, and a closing
# "N passed, N failed, N skipped" line. Exit status is non-zero when any
# go test run failed.
#
# The packages whose code runs concurrently (the controller's workers and
# shutdown, the outbox publishers, the source client, the store's parallel
# decoding and fenced transactions) run under the race detector; the rest run
# without it. Each package runs exactly once.
#
# Usage: hack/test.sh [packages...]   (default ./...)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
log="${root}/bin/test.log"
mkdir -p "${root}/bin"
module="$(go list -m)"
race_pkgs=("${module}/controllers" "${module}/internal/notify" "${module}/internal/source" "${module}/internal/store")
echo "test: PROJECTION_TEST_DSN=${PROJECTION_TEST_DSN:+set (real PostgreSQL)} KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-unset}"
mapfile -t all < <(go list "${@:-./...}")
race=() plain=()
for p in "${all[@]}"; do
  if printf '%s\n' "${race_pkgs[@]}" | grep -qx "${p}"; then race+=("${p}"); else plain+=("${p}"); fi
done
: >"${log}"
rc=0
if [[ ${#race[@]} -gt 0 ]]; then
  echo "test: -race over ${race[*]#"${module}/"}"
  go test -race -count=1 -timeout=40m -v "${race[@]}" >>"${log}" 2>&1 || rc=1
fi
if [[ ${#plain[@]} -gt 0 ]]; then
  go test -count=1 -timeout=40m -v "${plain[@]}" >>"${log}" 2>&1 || rc=1
fi
grep -E '^(--- (PASS|FAIL|SKIP)|ok  |FAIL|panic:|WARNING: DATA RACE|envtest:|pgtest:)' "${log}" | grep -vE '^--- (PASS|SKIP).*/' || true
if [[ ${rc} -ne 0 ]]; then
  echo "---- failures (full log: ${log}) ----"
  grep -nE -B2 -A25 '^\s*--- FAIL|WARNING: DATA RACE' "${log}" | head -400 || true
fi
passed=$(grep -cE '^\s*--- PASS' "${log}" || true)
failed=$(grep -cE '^\s*--- FAIL' "${log}" || true)
skipped=$(grep -cE '^\s*--- SKIP' "${log}" || true)
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
exit ${rc}
