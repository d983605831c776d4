#!/usr/bin/env bash
# hack/e2e.sh: the chart on a real node (docs/e2e.md). Brings the node up
# (hack/cluster.sh), builds and imports the images, then:
#   1. helm install with values-auto-recovery-local.yaml into a namespace that
#      enforces the restricted Pod Security level; every pod Ready, the
#      migrate hook Job completed (helm waits for it);
#   2. the sample ProjectionRecovery goes CATCHING_UP → CURRENT; kubectl and
#      the kubectl plugin show it;
#   3. its positions equal an independent replay of the member's log;
#   4. (full run) the faults a cluster produces, each followed by CURRENT
#      again and the replay check: the manager pod deleted mid catch-up;
#      helm upgrade to two replicas with leader election, then a rollout
#      restart during catch-up; the member pod restarted; the PostgreSQL
#      pod deleted;
#      Metrics and the completeness endpoint through the Service with a
#      reader's token (metrics.secure).
#   5. helm uninstall while the resources exist: nothing left but the CRDs,
#      no finalizer stuck.
#   6. the guide's production install (section 3) against a
#      stand-in for the user's own platform in namespace trading
#      (hack/e2e/trading.yaml): docs/database-role.md's roles and grants,
#      `manager migrate` by hand, the chart with auto-recovery and the migrate
#      hook, the sample venue-a CURRENT and replay-checked, then the guide's
#      uninstall.
# Then tears the node down (E2E_KEEP=1 leaves it up for a look).
#
# Usage: HELM=bin/helm-v3.22.0 hack/e2e.sh          # everything (make e2e)
#        HELM=bin/helm-v3.22.0 hack/e2e.sh --smoke  # install, CURRENT, replay, uninstall; the production install
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "${root}"
HELM="${HELM:?HELM must name the helm binary (make e2e sets it)}"
HELM="$(cd "$(dirname "${HELM}")" && pwd)/$(basename "${HELM}")"
# The namespace and names docs/install.md uses: the guide's blocks run here as written.
NS=projection-recovery
RELEASE=projection-recovery
SCOPE=local
# Where the checks below look: the recovery's namespace, its member's and
# its PostgreSQL's Services and the Secret with PostgreSQL's superuser
# password. The local profile's first; the production phase points them at
# its stand-in platform in namespace trading.
REC_NS="${NS}"
MEMBER_NS="${NS}" MEMBER_SVC="${RELEASE}-member"
PG_NS="${NS}" PG_SVC="${RELEASE}-postgres" PG_SECRET="${RELEASE}-postgres"
# The member trades a bounded log (MEMBER_COMMANDS at MEMBER_RATE per second)
# and then only serves it, so CURRENT is reached at a boundary that stays put
# and the replay compares one settled log with one settled projection.
# The full run trades longer, so that its faults land during catch-up.
smoke=""
[[ "${1:-}" == "--smoke" ]] && smoke=1
if [[ -n "${smoke}" ]]; then
  MEMBER_COMMANDS="${E2E_MEMBER_COMMANDS:-3000}"
else
  MEMBER_COMMANDS="${E2E_MEMBER_COMMANDS:-45000}"
fi
# The stand-in platform's member (the production phase): a short log,
# traded while the roles and the schema are set up.
PROD_MEMBER_COMMANDS="${E2E_PROD_MEMBER_COMMANDS:-3000}"
MEMBER_RATE="${E2E_MEMBER_RATE:-300}"
out="${root}/bin/e2e"
mkdir -p "${out}"

# One node per machine: its network namespace, bridge, addresses and
# cgroup root are fixed, so a second run (another checkout's make test)
# waits here for the first instead of colliding with it.
[[ $(id -u) -eq 0 ]] || { echo "e2e: needs root (a kubelet, containerd and a network namespace); run make e2e as root" >&2; exit 1; }
mkdir -p /run/lock
exec 9>/run/lock/projection-recovery-e2e.lock
flock -w 1800 9 || { echo "e2e: another node run held the lock for 30 minutes" >&2; exit 1; }

t0=$(date +%s)
say() { printf '==> [%4ss] %s\n' "$(($(date +%s) - t0))" "$*"; }
# fail stops the run; inside a probe (probe=1, a subshell whose failure the
# caller handles) it only says why.
fail() {
  if [[ -n "${probe:-}" ]]; then
    echo "e2e: probe: $*" >&2
    exit 1
  fi
  echo "e2e: FAIL: $*" >&2
  diagnose || true
  exit 1
}
X() { hack/cluster.sh exec env PATH="${root}/bin/k8s:${out}:${PATH}" "$@"; }
k() { X kubectl "$@"; }

# guide NAME [lenient]: runs the block of docs/install.md marked
# `<!-- e2e: NAME -->` as written (strict: stops at the first failing
# command), with the node's kubectl, helm and plugin. What the node needs
# beyond the guide is added here, visibly: helm install and upgrade get
# E2E_HELM_SETS (the locally built PostgreSQL image, the member's bounded
# trading); kubectl gets --as E2E_AS (the person the guide has in mind);
# the block's environment gets guide_env, the VAR=value pairs of the
# guide's "your values" block (section 3), which the test sets itself.
guide_env=()
guide() {
  local name="$1" block flags="-euo pipefail"
  [[ "${2:-}" == lenient ]] && flags="-uo pipefail"
  block="$(awk -v m="<!-- e2e: ${name} -->" '$0 == m { f = 1; next } f && /^```/ { if (++n == 2) exit; next } f && n == 1 { print }' docs/install.md)"
  [[ -n "${block}" ]] || fail "docs/install.md has no block marked e2e: ${name}"
  say "docs/install.md, ${name}${E2E_AS:+ (as ${E2E_AS})}:"
  sed 's/^/    $ /' <<<"${block}"
  X env E2E_AS="${E2E_AS:-}" E2E_HELM_SETS="${E2E_HELM_SETS}" "${guide_env[@]}" bash ${flags} -c '
helm() { case "$1" in install | upgrade) command helm "$@" ${E2E_HELM_SETS} ;; *) command helm "$@" ;; esac; }
kubectl() { command kubectl "$@" ${E2E_AS:+--as=${E2E_AS}}; }
'"${block}" || fail "docs/install.md, ${name}: a command failed"
}

diagnose() {
  echo "---- pods" >&2
  k get pods -A -o wide >&2 || true
  local p n
  for n in $(printf '%s\n' "${NS}" "${REC_NS}" "${PG_NS}" | sort -u); do
    k -n "${n}" get events --sort-by=.lastTimestamp >&2 2>/dev/null | tail -30 || true
    for p in $(k -n "${n}" get pods -o name 2>/dev/null); do
      echo "---- logs ${n}/${p}" >&2
      k -n "${n}" logs "${p}" --all-containers --tail=30 >&2 || true
    done
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
go build -o "${out}/kstatuscheck" ./hack/e2e/kstatuscheck
go build -o "${out}/manager" ./cmd/manager
ln -sf "${HELM}" "${out}/helm"
E2E_HELM_SETS="--set localEnvironment.postgres.image=${pg_image} --set localEnvironment.member.maxCommands=${MEMBER_COMMANDS} --set localEnvironment.member.rate=${MEMBER_RATE} --timeout 5m"

guide local-install
say "helm install done: the migrate hook Job completed, the sample Ready"
k -n "${NS}" get pods -o wide

# state prints the sample's state, verified and boundary sequence numbers.
# The state column alone is not enough: on a failed cycle it keeps the last
# known state (CURRENT with Ready=False, SCHEMA_MISSING after the database was
# lost); the Ready condition says whether it was re-checked.
state() {
  k -n "${REC_NS}" get projectionrecovery "${SCOPE}" \
    -o jsonpath='{.status.state} {.status.verifiedThroughSeq} {.status.observedBoundarySeq} {.status.conditions[?(@.type=="Ready")].status} {.status.lastSuccessfulVerification} {.status.reason}' 2>/dev/null || true
}

# member_head prints the member's boundary (the end of its log).
member_head() {
  local ip
  ip="$(k -n "${MEMBER_NS}" get service "${MEMBER_SVC}" -o jsonpath='{.spec.clusterIP}')"
  # Empty while the member (re)starts: the callers poll.
  { X curl -sf -m 5 "http://${ip}:8090/recon/descriptor" || true; } | sed -n 's/.*"boundarySeq":\([0-9]*\).*/\1/p'
}

# wait_current: CURRENT with everything the member has written verified,
# twice in a row (the member has stopped trading), printing every state it
# passes through.
wait_current() {
  local seen="" stable=0 row st v head i secs="${1:-600}" since="${2:-}"
  say "waiting for ${SCOPE} to go CURRENT through the member's whole log (at most ${secs}s)"
  for ((i = 0; i < secs / 2; i++)); do
    row="$(state)"
    st="${row%% *}"
    if [[ -n "${st}" && "${st}" != "${seen##* }" ]]; then
      seen="${seen} ${st}"
      say "state ${row}"
    fi
    v="$(echo "${row}" | cut -d' ' -f2)"
    head="$(member_head)"
    # since: a verification from before a fault proves nothing after it.
    if [[ "${st}" == CURRENT && -n "${head}" && "${v}" == "${head}" && "$(echo "${row}" | cut -d' ' -f4)" == True &&
      ! "$(echo "${row}" | cut -d' ' -f5)" < "${since}" ]]; then
      stable=$((stable + 1))
      ((stable >= 2)) && break
    else
      stable=0
    fi
    sleep 2
  done
  ((stable >= 2)) || fail "${SCOPE} not CURRENT through the member's log (last: ${row}, member at ${head:-?}; states seen:${seen})"
  say "CURRENT at ${v}, the member's whole log (states seen:${seen})"
}

# admin_dsn: PostgreSQL's superuser at its Service's address, the checks'
# view of the projection (never what the operator connects as).
admin_dsn() {
  local pw pg_ip
  pw="$(k -n "${PG_NS}" get secret "${PG_SECRET}" -o jsonpath='{.data.password}' | base64 -d)"
  pg_ip="$(k -n "${PG_NS}" get service "${PG_SVC}" -o jsonpath='{.spec.clusterIP}')"
  echo "postgres://postgres:${pw}@${pg_ip}:5432/projection?sslmode=disable"
}

# replay_check: the projection's positions equal an independent replay of
# the member's whole log (the demo's check).
replay_check() {
  local member_ip
  say "replay check: the projection's positions against an independent replay of the member's log"
  member_ip="$(k -n "${MEMBER_NS}" get service "${MEMBER_SVC}" -o jsonpath='{.spec.clusterIP}')"
  X replaycheck --member "http://${member_ip}:8090" --scope "${SCOPE}" --dsn "$(admin_dsn)" | tee "${out}/replay.log" ||
    fail "replay check"
  grep -qE '^==> all [0-9]+ position keys equal an independent replay' "${out}/replay.log" || fail "replay check"
}

# kstatus_check: every object of the release Current, as GitOps tools read it.
kstatus_check() {
  say "kstatus: every object of the release"
  X "${HELM}" get manifest "${RELEASE}" -n "${NS}" | X kstatuscheck -n "${NS}" --timeout 3m >"${out}/kstatus.log" 2>&1 ||
    { cat "${out}/kstatus.log" >&2; fail "kstatus: not every object of the release is Current"; }
  tail -1 "${out}/kstatus.log"
}

# psql_local runs SQL on the profile's PostgreSQL as its owner.
psql_local() {
  X psql -X -q -t -A -v ON_ERROR_STOP=1 "$(admin_dsn)" -c "$1"
}

# leader: the holder of the manager's leader-election Lease, checked to be a
# running manager pod of the release.
leader() {
  local holder pods
  holder="$(k -n "${NS}" get lease -o jsonpath='{range .items[*]}{.spec.holderIdentity}{"\n"}{end}' | grep -v '^$' | head -1)"
  pods="$(k -n "${NS}" get pods -l app.kubernetes.io/name=projection-recovery,app.kubernetes.io/instance="${RELEASE}" \
    --field-selector=status.phase=Running -o jsonpath='{.items[*].metadata.name}')"
  for p in ${pods}; do
    if [[ "${holder}" == "${p}"* ]]; then
      echo "${p}"
      return 0
    fi
  done
  return 1
}

# wait_catching_up: until the member's log is ahead of what the sample has
# verified (the member is still trading: the manager has pages to apply).
wait_catching_up() {
  local row v head i
  for ((i = 0; i < 120; i++)); do
    row="$(state)"
    v="$(echo "${row}" | cut -d' ' -f2)"
    head="$(member_head)"
    if [[ -n "${v}" && -n "${head}" && "${v}" -lt "${head}" ]]; then
      say "mid catch-up: verified ${v}, the member's log at ${head}"
      return 0
    fi
    sleep 0.5
  done
  fail "never saw ${SCOPE} behind the member's log (last: ${row}, member at ${head:-?})"
}

if [[ -n "${smoke}" ]]; then
  wait_current
  k -n "${NS}" get projectionrecoveries
  X kubectl-projection status -n "${NS}" || fail "kubectl projection status"
  kstatus_check
  replay_check
else
  say "fault: the manager pod deleted mid catch-up"
  wait_catching_up
  k -n "${NS}" delete pod -l app.kubernetes.io/name=projection-recovery,app.kubernetes.io/instance="${RELEASE}" --wait=false
  k -n "${NS}" rollout status deployment/"${RELEASE}" --timeout=2m >/dev/null || fail "no new manager pod"

  say "fault: helm upgrade to two replicas with leader election, then a rollout restart mid catch-up"
  guide upgrade
  k -n "${NS}" get pdb,lease -o name
  [[ "$(k -n "${NS}" get deployment "${RELEASE}" -o jsonpath='{.status.readyReplicas}')" == 2 ]] || fail "two manager replicas not Ready"
  first="$(leader)" || fail "no running manager pod holds the leader Lease"
  say "leader: ${first} (one of two replicas)"
  wait_catching_up
  k -n "${NS}" rollout restart deployment/"${RELEASE}"
  k -n "${NS}" rollout status deployment/"${RELEASE}" --timeout=3m >/dev/null || fail "rollout restart"
  for ((i = 0; i < 60; i++)); do
    now="$(leader)" && [[ "${now}" != "${first}" ]] && break
    sleep 2
  done
  [[ -n "${now:-}" && "${now}" != "${first}" ]] || fail "the leader Lease did not pass to a new pod after the rollout (holder ${now:-none})"
  say "leader after the rollout: ${now}"
  wait_current
  k -n "${NS}" get projectionrecoveries
  X kubectl-projection status -n "${NS}" || fail "kubectl projection status"
  kstatus_check
  replay_check

  say "metrics and completeness through the Service, with a reader's token (metrics.secure)"
  k create namespace monitoring >/dev/null
  k -n monitoring create serviceaccount prometheus >/dev/null
  guide metrics-reader
  token="$(k -n monitoring create token prometheus)"
  svc="$(k -n "${NS}" get service "${RELEASE}" -o jsonpath='{.spec.clusterIP}')"
  code="$(X curl -sk -o /dev/null -w '%{http_code}' -m 10 "https://${svc}:8080/metrics" || true)"
  [[ "${code}" == 401 ]] || fail "metrics without a token answered ${code}, want 401"
  ok=""
  # The filter may cache a denial from before the binding: retry a while.
  for ((i = 0; i < 40; i++)); do
    if X curl -skf -m 10 -H "Authorization: Bearer ${token}" "https://${svc}:8080/metrics" >"${out}/metrics.txt" 2>/dev/null &&
      grep -q '^projection_recovery_verified_through_seq{' "${out}/metrics.txt" &&
      X curl -skf -m 10 -H "Authorization: Bearer ${token}" "https://${svc}:8082/v2/projection-completeness" >"${out}/completeness.json" 2>/dev/null; then
      ok=1
      break
    fi
    sleep 1
  done
  [[ -n "${ok}" ]] || fail "metrics or the completeness endpoint refused the reader's token"
  grep '^projection_recovery_verified_through_seq{' "${out}/metrics.txt" | head -1
  say "completeness: $(tr -s " \n" " " <"${out}/completeness.json" | head -c 240)"
  k delete clusterrolebinding prometheus-projection-metrics prometheus-projection-completeness >/dev/null
  k delete namespace monitoring --wait=false >/dev/null

  say "a repair approved through the chart's roles and admission policy"
  # Two people: bob edits (the built-in edit role, which aggregates the
  # chart's), alice approves (the chart's approver role, bound here).
  guide approver
  # Drift no live write explains: a position's average cost nudged and a
  # retained trade deleted.
  psql_local "UPDATE positions SET avg_cost = avg_cost + 1 WHERE scope = '${SCOPE}' AND (account, instrument) =
    (SELECT account, instrument FROM positions WHERE scope = '${SCOPE}' AND quantity <> 0 ORDER BY account, instrument LIMIT 1)" >/dev/null
  gone="$(psql_local "DELETE FROM trades WHERE scope = '${SCOPE}' AND trade_id = (SELECT trade_id FROM trades
    WHERE scope = '${SCOPE}' AND seq IS NOT NULL ORDER BY seq LIMIT 1 OFFSET 3) RETURNING trade_id")"
  [[ -n "${gone}" ]] || fail "no trade to delete"
  if (probe=1 replay_check) >/dev/null 2>&1; then fail "the replay check passed with a nudged position"; fi
  E2E_AS=bob guide reconciliation
  plan="$(k -n "${NS}" get projectionreconciliation "${SCOPE}-repair" -o jsonpath='{.status.plan.planId}')"
  [[ -n "${plan}" ]] || fail "no repair plan"
  E2E_AS=alice guide review lenient >"${out}/review.txt" 2>&1
  sed -n '/ plan /,$p' "${out}/review.txt" | head -60
  grep -q "restore_trade.*trade_id=${gone}" "${out}/review.txt" || fail "the plan does not restore trade ${gone}"
  set +e
  X kubectl-projection approve "${SCOPE}-repair" -n "${NS}" --plan-id "${plan}" --as bob >"${out}/approve-bob.txt" 2>&1
  rc=$?
  set -e
  [[ "${rc}" == 3 ]] || { cat "${out}/approve-bob.txt" >&2; fail "bob's approval: exit ${rc}, want 3 (refused)"; }
  say "bob (edit) refused: $(tail -1 "${out}/approve-bob.txt")"
  [[ -z "$(k -n "${NS}" get projectionreconciliation "${SCOPE}-repair" -o jsonpath='{.spec.approval}')" ]] || fail "bob's approval was stored"
  E2E_AS=alice guide approve <<<"${plan}"
  result="$(k -n "${NS}" get projectionreconciliation "${SCOPE}-repair" \
    -o jsonpath='{.status.outcome.planId} {.status.outcome.result} {.status.outcome.applied} {.status.outcome.verified} {.status.outcome.stillDrifting} {.status.outcome.approver}')"
  read -r _ res applied verified drifting approver <<<"${result}"
  [[ "${res}" == ok && "${applied}" -gt 0 && "${verified}" == "${applied}" && "${drifting}" == 0 && "${approver}" == alice ]] ||
    fail "apply outcome: ${result:-none}, want ok, every applied action verified, approved by alice"
  say "alice's approval applied ${applied} actions, ${verified} verified"
  [[ "$(psql_local "SELECT count(*) FROM trades WHERE scope = '${SCOPE}' AND trade_id = '${gone}'")" == 1 ]] || fail "trade ${gone} not restored"
  replay_check

  say "fault: the member pod restarted (emptyDir: it trades its seeded log again from genesis, same clock, same history; CURRENT again only once it proves its chain at the cursor)"
  k -n "${NS}" delete pod -l app.kubernetes.io/component=member
  k -n "${NS}" rollout status deployment/"${RELEASE}-member" --timeout=2m >/dev/null || fail "no new member pod"
  wait_current
  replay_check

  say "fault: the PostgreSQL pod deleted (emptyDir: the projection and recovery's tables are gone)"
  k -n "${NS}" delete pod -l app.kubernetes.io/component=postgres
  k -n "${NS}" rollout status deployment/"${RELEASE}-postgres" --timeout=2m >/dev/null || fail "no new PostgreSQL pod"
  replaced="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  # The manager applies recovery's schema to the new database on its own
  # (it may: the profile's DSN is the schema owner's) and re-verifies.
  wait_current 300 "${replaced}"
  replay_check

  say "a newcomer's path: a BLOCKED code, its troubleshooting entry, what the entry says to do"
  # A trade the source never emitted, inside the verified window, found when
  # the scope is re-verified from genesis (its cursor reset).
  orphan="$(psql_local "INSERT INTO trades (scope, trade_id, trade_seq, seq, instrument, price, quantity, buy_order_id,
      sell_order_id, buy_account, sell_account, ts, booking_status, written_by)
    SELECT scope, 'T-e2e-orphan', trade_seq + 1000000, seq, instrument, price, quantity, buy_order_id, sell_order_id,
      buy_account, sell_account, ts, booking_status, 'live'
    FROM trades WHERE scope = '${SCOPE}' AND seq IS NOT NULL ORDER BY seq LIMIT 1 OFFSET 10 RETURNING trade_id")"
  [[ "${orphan}" == T-e2e-orphan ]] || fail "could not plant an orphan trade"
  psql_local "DELETE FROM projection_catchup_cursor WHERE scope = '${SCOPE}'" >/dev/null
  for ((i = 0; i < 150; i++)); do
    [[ "$(state | cut -d' ' -f1)" == BLOCKED ]] && break
    sleep 2
  done
  row="$(state)"
  [[ "${row%% *}" == BLOCKED ]] || fail "the orphan trade did not block the scope (last: ${row})"
  code="${row##* }"
  set +e
  X kubectl projection status -n "${NS}" >"${out}/status-blocked.txt"
  rc=$?
  set -e
  cat "${out}/status-blocked.txt"
  [[ "${rc}" == 3 ]] || fail "kubectl projection status: exit ${rc} with a BLOCKED scope, want 3"
  anchor="$(sed -nE 's|.*docs/troubleshooting\.md#([a-z0-9_-]+).*|\1|p' "${out}/status-blocked.txt" | head -1)"
  [[ -n "${anchor}" ]] || fail "kubectl projection status printed no troubleshooting link for BLOCKED ${code}"
  headings="$(sed -nE 's/^#{2,4} (.*)$/\1/p' docs/troubleshooting.md | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9_\n-')"
  grep -qxF -- "${anchor}" <<<"${headings}" || fail "docs/troubleshooting.md has no entry #${anchor} (the link for ${code})"
  say "BLOCKED ${code}: docs/troubleshooting.md#${anchor}:"
  awk -v h="### ${code}" '$0 == h { f = 1; next } f && /^#/ { exit } f' docs/troubleshooting.md | sed 's/^/    /'
  # What the entry says to do: approve the plan's quarantine_trade, with the
  # guide's reconciliation, review and approve steps.
  k -n "${NS}" delete projectionreconciliation "${SCOPE}-repair" --wait >/dev/null
  E2E_AS=bob guide reconciliation
  plan="$(k -n "${NS}" get projectionreconciliation "${SCOPE}-repair" -o jsonpath='{.status.plan.planId}')"
  E2E_AS=alice guide review lenient >"${out}/review-orphan.txt" 2>&1
  grep -q "quarantine_trade.*trade_id=${orphan}" "${out}/review-orphan.txt" ||
    { cat "${out}/review-orphan.txt" >&2; fail "the plan does not quarantine ${orphan}"; }
  E2E_AS=alice guide approve <<<"${plan}"
  wait_current 300
  [[ "$(psql_local "SELECT count(*) FROM trades WHERE scope = '${SCOPE}' AND trade_id = '${orphan}'")" == 0 ]] ||
    fail "the orphan trade is still in the projection"
  replay_check
  k -n "${NS}" delete rolebinding bob-edits alice-views alice-approves >/dev/null
fi

# check_uninstalled [NAME...]: nothing of the release is left in its
# namespace but the NAMEs (what the guide says stays), no cluster-scoped
# object of the chart, and the CRDs are still there.
check_uninstalled() {
  local keep=(-e '^configmap/kube-root-ca.crt$' -e '^serviceaccount/default$') n left cluster_left i
  for n in "$@"; do keep+=(-e "^${n}\$"); done
  for ((i = 0; i < 60; i++)); do
    left="$(k -n "${NS}" get all,configmaps,secrets,serviceaccounts,roles,rolebindings,networkpolicies,poddisruptionbudgets,jobs,projectionrecoveries,projectionreconciliations \
      -o name 2>/dev/null | grep -v "${keep[@]}" || true)"
    [[ -z "${left}" ]] && break
    sleep 2
  done
  [[ -z "${left}" ]] || fail "left behind after helm uninstall:"$'\n'"${left}"
  cluster_left="$(k get clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings -o name | grep -i projection || true)"
  [[ -z "${cluster_left}" ]] || fail "cluster-scoped objects left behind after helm uninstall:"$'\n'"${cluster_left}"
  k get crd projectionrecoveries.recovery.projection.io >/dev/null || fail "the CRDs should stay (README)"
  say "uninstalled: nothing left but the CRDs${1:+ and what the guide says stays ($*)}"
}

if [[ -n "${smoke}" ]]; then
  say "uninstall: the resources first, then the release"
  guide uninstall
else
  say "helm uninstall while the resources exist (the profile's drain hook releases them)"
  guide uninstall-local
fi
check_uninstalled

# ---- The guide's section 3: the production install against "your own" platform.
say "production: docs/install.md section 3 against a stand-in for your platform (namespace trading)"
# The guide creates the release namespace: the local profile's goes first
# (same release and namespace names; only one release of the chart's
# cluster-scoped objects can exist at a time). The stand-in comes up while
# it is deleted; the guide's install waits for it.
k delete namespace "${NS}" --wait=false >/dev/null || fail "deleting the local profile's namespace"
source hack/e2e/production.sh
production_phase
say "PASS: e2e${smoke:+ smoke} in $(($(date +%s) - t0))s"
