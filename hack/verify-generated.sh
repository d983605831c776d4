#!/usr/bin/env bash
# Fails when the committed generated files (deepcopy, CRDs, RBAC, the chart's
# copies: hack/chart-copies.sh) differ from what `make generate manifests`
# produces from the current sources.
# It regenerates into a scratch copy of the tree, so it never touches the work tree.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
gen="${CONTROLLER_GEN:?CONTROLLER_GEN must point at controller-gen}"
scratch="$(mktemp -d)"
trap 'rm -rf "${scratch}"' EXIT
cd "${root}"
# Every source file (tracked or new, not ignored), so packages resolve as in the work tree.
git ls-files -z --cached --others --exclude-standard | xargs -0 tar cf - 2>/dev/null | tar xf - -C "${scratch}"
(
  cd "${scratch}"
  "${gen}" object:headerFile=hack/boilerplate.go.txt paths=./api/...
  "${gen}" rbac:roleName=projection-recovery-manager crd paths=./api/... paths=./controllers/... \
    output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
  hack/chart-copies.sh
)
status=0
for p in api/v1alpha1/zz_generated.deepcopy.go config/crd/bases config/rbac/role.yaml charts/projection-recovery/crds charts/projection-recovery/files \
  charts/projection-recovery/docs; do
  if ! diff -ru "${root}/${p}" "${scratch}/${p}"; then
    echo "verify-generated: ${p} is out of date: run 'make generate manifests' and commit the result" >&2
    status=1
  fi
done
[[ ${status} -eq 0 ]] && echo "verify-generated: generated files are up to date"
exit ${status}
