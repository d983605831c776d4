#!/usr/bin/env bash
# make test: every phase in order, each timed, and a table of where the time
# went printed at the end (also when a phase fails), so a slower phase or
# test package shows in the log CI keeps. The table is also written to
# bin/test-phases.tsv.
#
# Phases run one after another: on 2 cores each one already keeps both busy,
# and a failure names the phase it happened in.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "${root}"
mkdir -p bin
table="bin/test-phases.tsv"
: >"${table}"
make=("${MAKE:-make}" --no-print-directory)
start_all=$(date +%s)

phase() {
	local name="$1"
	shift
	local t0 t1 rc
	t0=$(date +%s)
	echo "==> phase ${name}"
	"$@"
	rc=$?
	t1=$(date +%s)
	printf '%s\t%d\t%s\n' "${name}" $((t1 - t0)) "$([[ ${rc} -eq 0 ]] && echo ok || echo FAILED)" >>"${table}"
	return ${rc}
}

report() {
	local rc=$?
	local total=$(($(date +%s) - start_all))
	echo
	echo "---- make test: where the time went (${total} s in all; bin/test-phases.tsv) ----"
	awk -F'\t' '{ printf "  %-34s %6d s  %s\n", $1, $2, $3 }' "${table}"
	if [[ -s bin/test.log ]] && grep -qE '^(ok  |FAIL)\s' bin/test.log; then
		echo "  test packages, slowest first (the test binary's own run; compiling is in the phase above):"
		grep -E '^(ok  |FAIL)\s+\S+\s+[0-9.]+s' bin/test.log |
			awk '{ t=$3; sub(/s$/, "", t); p=$2; sub(/^[^\/]+\/[^\/]+\//, "", p); printf "    %-32s %7.1f s  %s\n", p, t, ($1 == "ok" ? "ok" : "FAILED") }' |
			sort -k2 -n -r
	fi
	exit ${rc}
}
trap report EXIT

# The tools the checks use (helm, controller-gen) first, as their own phase.
phase control-plane "${make[@]}" control-plane || exit 1
phase tools "${make[@]}" tools || exit 1
for p in fmt-check vet tidy-check verify-requirements verify-docs verify-reconciliation verify-generated verify-reference chart-check build demo-smoke; do
	phase "${p}" "${make[@]}" "${p}" || exit 1
done
# The -race variant of the dependencies compiles here, once: the -race test
# run and test/soak (which runs these binaries) would otherwise compile it
# side by side.
phase build-soak "${make[@]}" build-soak || exit 1
# The tests take the binaries built above instead of linking their own.
export PROJECTION_BIN_DIR="${root}/bin"
PROJECTION_PHASES="${root}/${table}" phase "go test" hack/postgres.sh run -- hack/test.sh ./... || exit 1
# The chart on a real node (docs/e2e.md): install as the install guide says,
# CURRENT, kstatus, the replay check, uninstall, then the guide's production
# install against a stand-in database and member. As root; the node's binaries
# are built once and cached outside the clone; one node per machine at a time.
phase e2e-smoke "${make[@]}" e2e-smoke || exit 1
