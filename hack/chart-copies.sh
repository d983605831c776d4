#!/usr/bin/env bash
# The chart's copies of files whose source lives elsewhere in the repository,
# listed once: `make manifests` copies them (after controller-gen wrote the
# CRDs and the manager's Role), `make verify-generated` regenerates a scratch
# tree with this script and diffs it, and `make chart-check` fails on any copy
# that differs from its source (--check). A copy edited by hand, or a source
# changed without `make manifests`, would ship a chart that renders other
# RBAC, admission policies, health check or base tables than config/ and the
# code the tests prove.
#
# Usage: hack/chart-copies.sh [--check]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "${root}"
chart=charts/projection-recovery
# source  destination (relative to the repository root)
copies=()
for crd in config/crd/bases/*.yaml; do
  copies+=("${crd} ${chart}/crds/$(basename "${crd}")")
done
copies+=(
  "config/rbac/role.yaml ${chart}/files/role.yaml"
  "config/rbac/projection_view_role.yaml ${chart}/files/projection_view_role.yaml"
  "config/rbac/projection_edit_role.yaml ${chart}/files/projection_edit_role.yaml"
  "config/rbac/reconciliation_approver_role.yaml ${chart}/files/reconciliation_approver_role.yaml"
  "config/admission/approval_policy.yaml ${chart}/files/approval_policy.yaml"
  "config/admission/approval_policy_binding.yaml ${chart}/files/approval_policy_binding.yaml"
  "config/admission/secret_reference_policy.yaml ${chart}/files/secret_reference_policy.yaml"
  "config/admission/secret_reference_policy_binding.yaml ${chart}/files/secret_reference_policy_binding.yaml"
  "internal/store/sql/base.sql ${chart}/files/base.sql"
  "config/health/health.lua ${chart}/docs/health.lua"
)
case "${1:-}" in
  "")
    for c in "${copies[@]}"; do
      read -r src dst <<<"${c}"
      mkdir -p "$(dirname "${dst}")"
      cp "${src}" "${dst}"
    done
    ;;
  --check)
    status=0
    for c in "${copies[@]}"; do
      read -r src dst <<<"${c}"
      if ! cmp -s "${src}" "${dst}"; then
        echo "chart-copies: ${dst} differs from ${src}: run 'make manifests' and commit the result" >&2
        status=1
      fi
    done
    exit ${status}
    ;;
  *)
    echo "usage: $0 [--check]" >&2
    exit 2
    ;;
esac
