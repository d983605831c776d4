#!/usr/bin/env bash
# Lints and renders the Helm chart and checks the safety defaults that
# matter most: auto-recovery is off unless the auto-recovery-local profile
# turns it on (NFR-APR01), and the approval admission policy and the
# view/edit/approver roles render by default, from byte-identical copies of
# config/ (the manifests the envtest suite proves, TestEnvtest_ApprovalOnlyTheAPIServerGrants).
set -euo pipefail
helm="${HELM:?HELM must point at helm}"
chart="$(cd "$(dirname "$0")/.." && pwd)/charts/projection-recovery"
"${helm}" lint --strict "${chart}" >/dev/null
default="$("${helm}" template ci "${chart}")"
profile="$("${helm}" template ci "${chart}" -f "${chart}/values-auto-recovery-local.yaml")"
grep -q -- '--enable-auto-recovery=false' <<<"${default}" || { echo "chart-check: default values do not render --enable-auto-recovery=false" >&2; exit 1; }
grep -q -- '--enable-auto-recovery=true' <<<"${profile}" || { echo "chart-check: the auto-recovery-local profile does not enable auto-recovery" >&2; exit 1; }
[[ -f "${chart}/crds/recovery.projection.io_projectionrecoveries.yaml" ]] || { echo "chart-check: the chart has no CRD" >&2; exit 1; }
root="$(cd "$(dirname "$0")/.." && pwd)"
for f in config/rbac/projection_view_role.yaml config/rbac/projection_edit_role.yaml config/rbac/reconciliation_approver_role.yaml \
  config/admission/approval_policy.yaml config/admission/approval_policy_binding.yaml; do
  cmp -s "${root}/${f}" "${chart}/files/$(basename "${f}")" || { echo "chart-check: ${chart}/files/$(basename "${f}") differs from ${f}: cp ${f} charts/projection-recovery/files/" >&2; exit 1; }
done
for want in 'kind: ValidatingAdmissionPolicy$' 'kind: ValidatingAdmissionPolicyBinding$' "check('approve').allowed()" \
  'name: projection-reconciliation-approval$' 'name: projection-reconciliation-approver$' 'name: projection-recovery-view$' 'name: projection-recovery-edit$'; do
  grep -q -- "${want}" <<<"${default}" || { echo "chart-check: default values do not render ${want}" >&2; exit 1; }
done
# The binding must deny (not only warn or audit).
[[ "$(grep -A1 'validationActions:' <<<"${default}")" == *"- Deny"* ]] || { echo "chart-check: the approval policy binding does not Deny" >&2; exit 1; }
echo "chart-check: chart lints, renders, keeps auto-recovery off by default, and ships the approval policy and roles"
