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
# make's build variant when run on its own (Makefile: CGO_ENABLED=0, -trimpath).
export CGO_ENABLED="${CGO_ENABLED:-0}"
case " ${GOFLAGS:-} " in *" -trimpath "*) ;; *) export GOFLAGS="${GOFLAGS:+${GOFLAGS} }-trimpath" ;; esac
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
# PROJECTION_PHASES (set by hack/make-test.sh) receives each run's time.
phases="${PROJECTION_PHASES:-/dev/null}"
timed() {
  local name="$1" out="$2" t0 r
  shift 2
  t0=$(date +%s)
  "$@" >"${out}" 2>&1
  r=$?
  printf '  %s\t%d\t%s\n' "${name}" $(($(date +%s) - t0)) "$([[ ${r} -eq 0 ]] && echo ok || echo FAILED)" >>"${phases}"
  return ${r}
}
# The -race run and the plain run go side by side, each into its own log:
# the race packages' envtest suite spends most of its time waiting on the
# API server, PostgreSQL and members, and the plain packages fill those
# waits instead of queueing behind them.
race_rc=0 plain_rc=0
if [[ ${#race[@]} -gt 0 ]]; then
  echo "test: -race over ${race[*]#"${module}/"}"
  # The race detector needs cgo, whatever the caller's CGO_ENABLED.
  CGO_ENABLED=1 timed "go test -race (${#race[@]} packages)" "${log%.log}-race.log" \
    go test -race -count=1 -timeout=40m -v "${race[@]}" &
  race_pid=$!
fi
if [[ ${#plain[@]} -gt 0 ]]; then
  timed "go test (${#plain[@]} packages)" "${log%.log}-plain.log" go test -count=1 -timeout=40m -v "${plain[@]}" || plain_rc=1
fi
if [[ -n "${race_pid:-}" ]]; then
  wait "${race_pid}" || race_rc=1
fi
[[ ${race_rc} -eq 0 && ${plain_rc} -eq 0 ]] || rc=1
for f in "${log%.log}-race.log" "${log%.log}-plain.log"; do
  [[ -f "${f}" ]] && cat "${f}" >>"${log}" && rm -f "${f}"
done
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
