#!/usr/bin/env bash
# hack/soak.sh: `make soak`, the long seeded tests, one stage after another.
# Every stage prints the seed of its run and of each failing case, so a
# failure replays exactly; the full log of a stage is in bin/.
#
# Stage "faults": seeded fault schedules against real processes (test/soak):
# two manager processes built with -race, a member per schedule, PostgreSQL,
# NATS and a control plane of the stage's own; managers killed mid-page and
# frozen past their lease, PostgreSQL restarted and its backends terminated,
# NATS restarted, the API server unreachable, members restarted, slowed, cut
# and reset, clocks skewed; after each batch, every scope CURRENT at B and its
# SQL equal to an independent replay.
#   SOAK_SCHEDULES   schedules (default 1000; `make test` runs 20)
#   SOAK_PARALLEL    schedules per batch, sharing its faults (default 25)
#   SOAK_SEED        first batch seed (default: random); a failure prints the
#                    seed and the command that replays its batch
#   SOAK_WINDOW      faults start within it (default 8s)
#   SOAK_FAULTS_LOG  the stage's full log (default bin/soak-faults.log)
#
# Stage "property": the page path (internal/store TestProperty_PagePathEqualsReplay)
# at full size against a throwaway PostgreSQL: random workloads x random feed
# drops x random live arrival orders x random page sizes, each case's SQL
# compared with the independent replay.
#   PROJECTION_PROPERTY_CASES     cases (default 10000; `make test` runs 200)
#   PROJECTION_PROPERTY_RUN_SEED  replay a whole run (random by default)
#   PROJECTION_PROPERTY_SEED      replay one case
#   SOAK_PROPERTY_TIMEOUT         go test -timeout of the stage (default 120m)
#   SOAK_PROPERTY_LOG             the stage's full log (default bin/soak-property.log)
#
# Usage: hack/soak.sh            (SOAK_STAGES="faults property" by default)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "${root}"
mkdir -p bin
rc=0
stages="${SOAK_STAGES:-faults property}"

if [[ " ${stages} " == *" faults "* ]]; then
	hack/control-plane.sh >/dev/null
	seed="${SOAK_SEED:-$(( (RANDOM << 15 | RANDOM) + 1 ))}"
	schedules="${SOAK_SCHEDULES:-1000}"
	log="${SOAK_FAULTS_LOG:-bin/soak-faults.log}"
	echo "soak: stage faults: ${schedules} schedules, first seed ${seed} (log: ${log})"
	start=$(date +%s)
	frc=0
	KUBEBUILDER_ASSETS="${root}/bin/k8s" PROJECTION_SOAK_SCHEDULES="${schedules}" PROJECTION_SOAK_PARALLEL="${SOAK_PARALLEL:-25}" \
		PROJECTION_SOAK_SEED="${seed}" PROJECTION_SOAK_WINDOW="${SOAK_WINDOW:-8s}" \
		go test -count=1 -v -timeout 180m -run '^TestSoak_FaultSchedules$' ./test/soak/ >"${log}" 2>&1 || frc=1
	# The summary, every failure with its replay command, the verdict.
	sed -n '/soak summary:/,/^--- /p' "${log}" | grep -v '^--- ' || true
	grep -E -A1 'soak_test.go:[0-9]+: seed=' "${log}" | head -200 || true
	grep -E '^(--- (PASS|FAIL)|ok|FAIL|panic:)' "${log}" || true
	echo "soak: stage faults: $([[ ${frc} -eq 0 ]] && echo passed || echo FAILED) in $(($(date +%s) - start))s"
	[[ ${frc} -eq 0 ]] || rc=1
fi

if [[ " ${stages} " == *" property "* ]]; then
cases="${PROJECTION_PROPERTY_CASES:-10000}"
log="${SOAK_PROPERTY_LOG:-bin/soak-property.log}"
echo "soak: stage property: ${cases} cases of the page path (log: ${log})"
start=$(date +%s)
prc=0
hack/postgres.sh run -- env PROJECTION_PROPERTY_CASES="${cases}" \
	go test -count=1 -v -timeout "${SOAK_PROPERTY_TIMEOUT:-120m}" -run '^TestProperty_PagePathEqualsReplay$' ./internal/store/ >"${log}" 2>&1 || prc=1
grep -E 'property_test.go:[0-9]+: (run:|[0-9]+ cases in)|^--- (PASS|FAIL)|^(ok|FAIL|panic:)' "${log}" || true
if [[ ${prc} -ne 0 ]]; then
	rc=1
	echo "---- failures (full log: ${log}) ----"
	grep -E 'property_test.go:[0-9]+: ' "${log}" | grep -vE 'property_test.go:[0-9]+: (replay:|run:|B [0-9]+,|[0-9]+ cases in)' | head -100 || true
	grep -oE -- '--- FAIL: TestProperty_PagePathEqualsReplay/cases/[0-9]+/seed=[0-9]+' "${log}" | sed -E 's/.*seed=//' |
		while read -r seed; do
			echo "replay: hack/postgres.sh run -- env PROJECTION_PROPERTY_SEED=${seed} go test -count=1 -v -run '^TestProperty_PagePathEqualsReplay\$' ./internal/store/"
		done
fi
echo "soak: stage property: $(grep -cE '^\s+--- PASS: TestProperty_PagePathEqualsReplay/cases/' "${log}" || true) cases passed," \
	"$(grep -cE '^\s+--- FAIL: TestProperty_PagePathEqualsReplay/cases/' "${log}" || true) failed in $(($(date +%s) - start))s"
fi

exit ${rc}
