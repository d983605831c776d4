#!/usr/bin/env bash
# hack/soak.sh: `make soak`, the long seeded tests, one stage after another.
# Every stage prints the seed of its run and of each failing case, so a
# failure replays exactly; the full log of a stage is in bin/.
#
# Stage 1, property: the page path (internal/store TestProperty_PagePathEqualsReplay)
# at full size against a throwaway PostgreSQL: random workloads x random feed
# drops x random live arrival orders x random page sizes, each case's SQL
# compared with the independent replay.
#   PROJECTION_PROPERTY_CASES     cases (default 10000; `make test` runs 200)
#   PROJECTION_PROPERTY_RUN_SEED  replay a whole run (random by default)
#   PROJECTION_PROPERTY_SEED      replay one case
#   SOAK_PROPERTY_TIMEOUT         go test -timeout of the stage (default 120m)
#   SOAK_PROPERTY_LOG             the stage's full log (default bin/soak-property.log)
#
# Usage: hack/soak.sh
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "${root}"
mkdir -p bin
rc=0

cases="${PROJECTION_PROPERTY_CASES:-10000}"
log="${SOAK_PROPERTY_LOG:-bin/soak-property.log}"
echo "soak: stage 1, property: ${cases} cases of the page path (log: ${log})"
start=$(date +%s)
hack/postgres.sh run -- env PROJECTION_PROPERTY_CASES="${cases}" \
	go test -count=1 -v -timeout "${SOAK_PROPERTY_TIMEOUT:-120m}" -run '^TestProperty_PagePathEqualsReplay$' ./internal/store/ >"${log}" 2>&1 || rc=1
grep -E 'property_test.go:[0-9]+: (run:|[0-9]+ cases in)|^--- (PASS|FAIL)|^(ok|FAIL|panic:)' "${log}" || true
if [[ ${rc} -ne 0 ]]; then
	echo "---- failures (full log: ${log}) ----"
	grep -E 'property_test.go:[0-9]+: ' "${log}" | grep -vE 'property_test.go:[0-9]+: (replay:|run:|B [0-9]+,|[0-9]+ cases in)' | head -100 || true
	grep -oE -- '--- FAIL: TestProperty_PagePathEqualsReplay/cases/[0-9]+/seed=[0-9]+' "${log}" | sed -E 's/.*seed=//' |
		while read -r seed; do
			echo "replay: hack/postgres.sh run -- env PROJECTION_PROPERTY_SEED=${seed} go test -count=1 -v -run '^TestProperty_PagePathEqualsReplay\$' ./internal/store/"
		done
fi
echo "soak: stage 1, property: $(grep -cE '^\s+--- PASS: TestProperty_PagePathEqualsReplay/cases/' "${log}" || true) cases passed," \
	"$(grep -cE '^\s+--- FAIL: TestProperty_PagePathEqualsReplay/cases/' "${log}" || true) failed in $(($(date +%s) - start))s"

exit ${rc}
