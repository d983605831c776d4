#!/usr/bin/env bash
# Lints (--strict) and renders the Helm chart (default, the profile, every
# optional switch), checks that values.schema.json refuses typo'd, wrong-typed
# and out-of-set values by name, that leader-election rights stay in the
# release namespace and Secret rights in the watched ones, and checks the
# safety defaults that matter most: auto-recovery is off unless the auto-recovery-local profile
# turns it on (NFR-APR01), and the approval admission policy and the
# view/edit/approver roles render by default, from byte-identical copies of
# config/ (the manifests the envtest suite proves, TestEnvtest_ApprovalOnlyTheAPIServerGrants)
# that `make manifests` makes (hack/chart-copies.sh --check: every copy is current).
set -euo pipefail
helm="${HELM:?HELM must point at helm}"
chart="$(cd "$(dirname "$0")/.." && pwd)/charts/projection-recovery"
# helm built with `go install` defaults to Kubernetes v1.20 for template and
# lint; the chart's kubeVersion (>=1.30, CEL) refuses that, so name the version
# the tests run against.
kv=(--kube-version 1.37.0)
"${helm}" lint --strict "${kv[@]}" "${chart}" >/dev/null
"${helm}" lint --strict "${kv[@]}" "${chart}" -f "${chart}/values-auto-recovery-local.yaml" >/dev/null
default="$("${helm}" template ci "${chart}" "${kv[@]}")"
profile="$("${helm}" template ci "${chart}" "${kv[@]}" -f "${chart}/values-auto-recovery-local.yaml")"
# Every switch renders (the server-side dry run of each is test/chart's).
for set in leaderElection.enabled=true metrics.secure=true metrics.serviceMonitor.enabled=true networkPolicy.enabled=true \
  dashboard.enabled=true 'watchNamespaces={ns-a,ns-b}' replicaCount=2 image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef \
  'migrate.enabled=true,migrate.dsnSecretRef.name=owner-db'; do
  "${helm}" template ci "${chart}" "${kv[@]}" --set "${set}" >/dev/null || { echo "chart-check: --set ${set} does not render" >&2; exit 1; }
done
doc() { awk -v name="$2" 'BEGIN { RS = "\n---" } $0 ~ ("\n  name: " name "\n") { print }' <<<"$1"; }
# values.schema.json refuses a typo'd key, a wrong type and a value outside
# its enum, naming the offending value.
refuse() {
  local want="$1"; shift
  local out
  if out="$("${helm}" template ci "${chart}" "${kv[@]}" "$@" 2>&1)"; then
    echo "chart-check: $* was accepted; values.schema.json must refuse it" >&2; exit 1
  fi
  grep -qF -- "${want}" <<<"${out}" || { echo "chart-check: $* was refused without naming ${want}:" >&2; echo "${out}" >&2; exit 1; }
}
refuse "'leaderElectoin' not allowed" --set leaderElectoin.enabled=true
refuse "'enable' not allowed" --set autoRecovery.enable=true
refuse "/replicaCount" --set replicaCount=two
refuse "/logLevel" --set logLevel=verbose
refuse "/reconciliation/detectCPU" --set reconciliation.detectCPU=1.5
refuse "/reconciliation/detectCPU" --set-json reconciliation.detectCPU=2
# --set passes a fraction as a string: 0.05 must render as the flag's value.
"${helm}" template ci "${chart}" "${kv[@]}" --set reconciliation.detectCPU=0.05 | grep -qF -- '--reconciliation-detect-cpu=0.05' || {
  echo "chart-check: --set reconciliation.detectCPU=0.05 does not reach --reconciliation-detect-cpu" >&2; exit 1; }
refuse "/image/pullPolicy" --set image.pullPolicy=Sometimes
refuse "/watchNamespaces/0" --set 'watchNamespaces={Team_A}'
refuse "/metrics/port" --set metrics.port=0
refuse "/migrate/timeout" --set migrate.timeout=soon
# The schema step outside the profile needs the owner's DSN Secret, and runs
# before the manager (pre-install/pre-upgrade).
refuse "migrate.dsnSecretRef.name" --set migrate.enabled=true
mig="$("${helm}" template ci "${chart}" "${kv[@]}" --set migrate.enabled=true --set migrate.dsnSecretRef.name=owner-db)"
job="$(doc "${mig}" ci-projection-recovery-migrate)"
grep -q 'helm.sh/hook: pre-install,pre-upgrade' <<<"${job}" && grep -q 'args: \["migrate"' <<<"${job}" && grep -q 'name: "owner-db"' <<<"${job}" ||
  { echo "chart-check: migrate.enabled does not render a pre-install/pre-upgrade Job running manager migrate with migrate.dsnSecretRef" >&2; exit 1; }
grep -q 'kind: Job$' <<<"$("${helm}" template ci "${chart}" "${kv[@]}")" && { echo "chart-check: default values render a Job" >&2; exit 1; }
# Leader-election rights live in the release namespace only, as a Role.
le="$("${helm}" template ci "${chart}" "${kv[@]}" -n ops --set leaderElection.enabled=true)"
grep -q -- '--leader-election-namespace=ops' <<<"${le}" || { echo "chart-check: leader election does not name the release namespace" >&2; exit 1; }
grep -q 'coordination.k8s.io' <<<"$(awk '/^kind: ClusterRole$/,/^---/' <<<"${le}")" && { echo "chart-check: a ClusterRole grants leases" >&2; exit 1; }
# With watchNamespaces no ClusterRole grants Secrets.
ns="$("${helm}" template ci "${chart}" "${kv[@]}" --set 'watchNamespaces={ns-a}')"
grep -q -- '- secrets' <<<"$(awk '/^kind: ClusterRole$/,/^---/' <<<"${ns}")" && { echo "chart-check: watchNamespaces set, yet a ClusterRole grants Secrets" >&2; exit 1; }
grep -q -- '--watch-namespace=ns-a' <<<"${ns}" || { echo "chart-check: watchNamespaces does not reach --watch-namespace" >&2; exit 1; }
# metrics.secure puts the completeness endpoint (every watched namespace's
# scopes) behind the API server's authorization too: its own ClusterRole
# grants get on its path, and the scraper's metrics-reader does not.
sec="$("${helm}" template ci "${chart}" "${kv[@]}" --set metrics.secure=true)"
reader="$(doc "${sec}" ci-projection-recovery-completeness-reader)"
grep -q '^kind: ClusterRole$' <<<"${reader}" && grep -qF -- '- nonResourceURLs: ["/v2/projection-completeness"]' <<<"${reader}" && grep -qF 'verbs: ["get"]' <<<"${reader}" ||
  { echo "chart-check: metrics.secure renders no ClusterRole ci-projection-recovery-completeness-reader granting get on /v2/projection-completeness" >&2; exit 1; }
grep -qF '/v2/projection-completeness' <<<"$(doc "${sec}" ci-projection-recovery-metrics-reader)" &&
  { echo "chart-check: the metrics-reader ClusterRole grants the completeness endpoint; a scraper must not read scope names" >&2; exit 1; }
"$(dirname "$0")/chart-copies.sh" --check || { echo "chart-check: the chart's copies are not current" >&2; exit 1; }
grep -q -- '--enable-auto-recovery=false' <<<"${default}" || { echo "chart-check: default values do not render --enable-auto-recovery=false" >&2; exit 1; }
grep -q -- '--enable-auto-recovery=true' <<<"${profile}" || { echo "chart-check: the auto-recovery-local profile does not enable auto-recovery" >&2; exit 1; }
for want in 'kind: ProjectionRecovery$' 'command: \["/member"\]' 'args: \["migrate"' 'name: ci-projection-recovery-postgres$'; do
  grep -q -- "${want}" <<<"${profile}" || { echo "chart-check: the auto-recovery-local profile does not render ${want}" >&2; exit 1; }
done
grep -q 'kind: ProjectionRecovery$' <<<"${default}" && { echo "chart-check: default values render the local environment" >&2; exit 1; }
[[ -f "${chart}/crds/recovery.projection.io_projectionrecoveries.yaml" ]] || { echo "chart-check: the chart has no CRD" >&2; exit 1; }
for want in 'kind: ValidatingAdmissionPolicy$' 'kind: ValidatingAdmissionPolicyBinding$' "check('approve').allowed()" \
  'name: projection-reconciliation-approval$' 'name: projection-reconciliation-approver$' 'name: projection-recovery-view$' 'name: projection-recovery-edit$' \
  'name: projection-recovery-secret-references$'; do
  grep -q -- "${want}" <<<"${default}" || { echo "chart-check: default values do not render ${want}" >&2; exit 1; }
done
# The binding must deny (not only warn or audit).
[[ "$(grep -c -A1 'validationActions:' <<<"${default}")" -ge 2 && "$(grep -A1 'validationActions:' <<<"${default}" | grep -c -- '- Deny')" -ge 2 ]] ||
  { echo "chart-check: the approval and Secret-reference policy bindings do not both Deny" >&2; exit 1; }
echo "chart-check: chart lints, renders every switch and the profile, refuses bad values, runs the migrate step only when asked (with an owner's Secret) or in the profile, keeps auto-recovery off by default, scopes leader-election and Secret rights, gives the completeness endpoint its own reader role, and ships the approval and Secret-reference policies and roles"
