#!/usr/bin/env bash
# hack/e2e.sh: the chart on a real node (docs/e2e.md). Brings the node up
# (hack/cluster.sh), builds and imports the images, then:
#   1. helm install with values-auto-recovery-local.yaml into a namespace that
#      enforces the restricted Pod Security level; every pod Ready, the
#      migrate hook Job completed (helm waits for it);
#   2. the sample ProjectionRecovery goes CATCHING_UP → CURRENT; kubectl and
#      the kubectl plugin show it;
#   3. its positions equal an independent replay of the member's log;
#   4. helm uninstall while the resources exist: nothing left but the CRDs,
#      no finalizer stuck.
# Then tears the node down (E2E_KEEP=1 leaves it up for a look).
#
# Usage: HELM=bin/helm-v3.22.0 hack/e2e.sh
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "${root}"
HELM="${HELM:?HELM must name the helm binary (make e2e sets it)}"
HELM="$(cd "$(dirname "${HELM}")" && pwd)/$(basename "${HELM}")"
NS="${E2E_NAMESPACE:-e2e}"
RELEASE=projection-recovery
SCOPE=local
# The member trades a bounded log (MEMBER_COMMANDS at MEMBER_RATE per second)
# and then only serves it, so CURRENT is reached at a boundary that stays put
# and the replay compares one settled log with one settled projection.
MEMBER_COMMANDS="${E2E_MEMBER_COMMANDS:-3000}"
MEMBER_RATE="${E2E_MEMBER_RATE:-300}"
out="${root}/bin/e2e"
mkdir -p "${out}"

t0=$(date +%s)
say() { printf '==> [%4ss] %s\n' "$(($(date +%s) - t0))" "$*"; }
fail() {
  echo "e2e: FAIL: $*" >&2
  diagnose || true
  exit 1
}
X() { hack/cluster.sh exec env PATH="${root}/bin/k8s:${out}:${PATH}" "$@"; }
k() { X kubectl "$@"; }

diagnose() {
  echo "---- pods" >&2
  k get pods -A -o wide >&2 || true
  k -n "${NS}" get events --sort-by=.lastTimestamp >&2 2>/dev/null | tail -30 || true
  local p
  for p in $(k -n "${NS}" get pods -o name 2>/dev/null); do
    echo "---- logs ${p}" >&2
    k -n "${NS}" logs "${p}" --all-containers --tail=30 >&2 || true
  done
}

cleanup() {
  if [[ -n "${E2E_KEEP:-}" ]]; then
    echo "e2e: E2E_KEEP set: node left up; hack/cluster.sh exec kubectl ... / hack/cluster.sh down" >&2
    return
  fi
  hack/cluster.sh down || true
}

say "building the node (cached) and bringing it up"
hack/cluster.sh up >/dev/null
trap cleanup EXIT
say "building the images and importing them into containerd"
pg_image="$(hack/cluster.sh images | sed -n 's/^POSTGRES_IMAGE=//p')"
go build -o "${out}/replaycheck" ./hack/e2e/replaycheck
go build -o "${out}/kubectl-projection" ./cmd/kubectl-projection

say "helm install into namespace ${NS} (pod-security.kubernetes.io/enforce=restricted)"
k create namespace "${NS}" >/dev/null
k label namespace "${NS}" pod-security.kubernetes.io/enforce=restricted >/dev/null
# --wait-for-jobs: helm returns only once the migrate hook Job has completed.
X "${HELM}" install "${RELEASE}" charts/projection-recovery -n "${NS}" \
  -f charts/projection-recovery/values-auto-recovery-local.yaml \
  --set localEnvironment.postgres.image="${pg_image}" \
  --set localEnvironment.member.maxCommands="${MEMBER_COMMANDS}" \
  --set localEnvironment.member.rate="${MEMBER_RATE}" \
  --wait --wait-for-jobs --timeout 5m >"${out}/helm-install.log" 2>&1 ||
  { cat "${out}/helm-install.log" >&2; fail "helm install"; }
say "helm install done: the migrate hook Job completed"
k -n "${NS}" wait --for=condition=Ready pods --all --timeout=3m >/dev/null || fail "pods not Ready"
k -n "${NS}" get pods -o wide

say "waiting for ${SCOPE} to go CURRENT"
seen="" last="" stable=0
for ((i = 0; i < 600; i++)); do
  row="$(k -n "${NS}" get projectionrecovery "${SCOPE}" \
    -o jsonpath='{.status.state} {.status.verifiedThroughSeq} {.status.observedBoundarySeq}' 2>/dev/null || true)"
  state="${row%% *}"
  if [[ -n "${state}" && "${state}" != "${seen##* }" ]]; then
    seen="${seen} ${state}"
    say "state ${row}"
  fi
  # CURRENT at a boundary that no longer moves: the member has stopped trading.
  if [[ "${state}" == CURRENT && "${row}" == "${last}" ]]; then
    stable=$((stable + 1))
    ((stable >= 3)) && break
  else
    stable=0
  fi
  last="${row}"
  sleep 2
done
((stable >= 3)) || fail "${SCOPE} not CURRENT at a settled boundary (states seen:${seen})"
say "states seen:${seen}"
k -n "${NS}" get projectionrecoveries
X kubectl-projection status -n "${NS}" || fail "kubectl projection status"

say "replay check: the projection's positions against an independent replay of the member's log"
pw="$(k -n "${NS}" get secret "${RELEASE}-postgres" -o jsonpath='{.data.password}' | base64 -d)"
pg_ip="$(k -n "${NS}" get service "${RELEASE}-postgres" -o jsonpath='{.spec.clusterIP}')"
member_ip="$(k -n "${NS}" get service "${RELEASE}-member" -o jsonpath='{.spec.clusterIP}')"
X replaycheck --member "http://${member_ip}:8090" --scope "${SCOPE}" \
  --dsn "postgres://postgres:${pw}@${pg_ip}:5432/projection?sslmode=disable" | tee "${out}/replay.log"
grep -qE '^==> all [0-9]+ position keys equal an independent replay' "${out}/replay.log" || fail "replay check"

say "helm uninstall while the resources exist"
X "${HELM}" uninstall "${RELEASE}" -n "${NS}" --wait --timeout 3m || fail "helm uninstall"
for ((i = 0; i < 60; i++)); do
  left="$(k -n "${NS}" get all,configmaps,secrets,serviceaccounts,roles,rolebindings,networkpolicies,poddisruptionbudgets,jobs,projectionrecoveries,projectionreconciliations \
    -o name 2>/dev/null | grep -v -e '^configmap/kube-root-ca.crt$' -e '^serviceaccount/default$' || true)"
  [[ -z "${left}" ]] && break
  sleep 2
done
[[ -z "${left}" ]] || fail "left behind after helm uninstall:"$'\n'"${left}"
cluster_left="$(k get clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings -o name | grep -i projection || true)"
[[ -z "${cluster_left}" ]] || fail "cluster-scoped objects left behind after helm uninstall:"$'\n'"${cluster_left}"
k get crd projectionrecoveries.recovery.projection.io >/dev/null || fail "the CRDs should stay (README)"
say "uninstalled: nothing left but the CRDs"
say "PASS: e2e smoke (install, CURRENT, replay check, uninstall) in $(($(date +%s) - t0))s"
