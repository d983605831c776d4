#!/usr/bin/env bash
# hack/fuzz.sh: runs every Go fuzz target of the module, one after the other,
# each for FUZZTIME (default 1m), and prints a table: target, minutes, result.
#
# Targets are discovered (`go test -list '^Fuzz'`), never listed by hand, so a
# new Fuzz function is fuzzed without touching this script. A target that finds
# a failing input makes the run fail; Go writes the input under the package's
# testdata/fuzz/<Target>/ — commit it: from then on plain `go test` (and so
# `make test`) replays it as a regression case.
#
# Usage: hack/fuzz.sh [packages...]        (default ./...)
#        FUZZTIME=10m hack/fuzz.sh ./internal/wire
# Targets that need PostgreSQL skip without PROJECTION_TEST_DSN: run it under
# `hack/postgres.sh run --` (make fuzz does).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "${root}"
fuzztime="${FUZZTIME:-1m}"
log="${root}/bin/fuzz.log"
mkdir -p "${root}/bin"
: >"${log}"
mapfile -t pkgs < <(go list "${@:-./...}")
rows=() rc=0 n=0
for p in "${pkgs[@]}"; do
  mapfile -t targets < <(go test -list '^Fuzz' "${p}" 2>/dev/null | grep -E '^Fuzz' || true)
  for t in "${targets[@]}"; do
    n=$((n + 1))
    echo "fuzz: ${p#github.com/projection-recovery/projection-recovery/} ${t} for ${fuzztime}" >&2
    start=$(date +%s)
    if go test -run '^$' -fuzz "^${t}\$" -fuzztime "${fuzztime}" "${p}" >>"${log}" 2>&1; then
      result="ok"
    else
      result="FAILED (see ${log}; the input is under testdata/fuzz/${t}/)"
      rc=1
    fi
    secs=$(( $(date +%s) - start ))
    rows+=("$(printf '%-48s %-36s %6.1f  %s' "${p#github.com/projection-recovery/projection-recovery/}" "${t}" "$(awk -v s="${secs}" 'BEGIN{print s/60}')" "${result}")")
  done
done
printf '%-48s %-36s %6s  %s\n' package target min result
printf '%s\n' "${rows[@]}"
echo "fuzz: ${n} targets, FUZZTIME=${fuzztime} each"
if [[ ${n} -eq 0 ]]; then echo "fuzz: no fuzz target found" >&2; exit 1; fi
exit ${rc}
