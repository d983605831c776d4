#!/usr/bin/env bash
# Every requirement id cited in Go code or tests (FR-APRnn, NFR-APRnn, and the
# R1/R2 clauses of FR-APR06) must resolve to a section of docs/requirements.md,
# and every section there must name at least one test that exists. A comment
# citing an id nobody documented, or a mapping naming a test that was renamed
# away, fails `make test`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "${root}"
doc=docs/requirements.md
[[ -f ${doc} ]] || { echo "verify-requirements: ${doc} is missing"; exit 1; }
fail=0
mapfile -t ids < <(git ls-files '*.go' | xargs grep -ohE '\bN?FR-APR[0-9]{2}\b' | sort -u)
for id in "${ids[@]}"; do
  if ! grep -qE "^### ${id}\b" "${doc}"; then
    echo "verify-requirements: ${id} is cited in code but has no '### ${id}' section in ${doc}"
    fail=1
  fi
done
# Every test named in the document exists.
mapfile -t tests < <(grep -ohE '\b(Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*[A-Za-z0-9]\b' "${doc}" | sort -u)
for t in "${tests[@]}"; do
  if ! git ls-files '*_test.go' | xargs grep -qE "^func ${t}\("; then
    echo "verify-requirements: ${doc} names ${t}, which no test file defines"
    fail=1
  fi
done
if [[ ${fail} -ne 0 ]]; then exit 1; fi
echo "verify-requirements: ${#ids[@]} requirement ids resolve; ${#tests[@]} named tests exist"
