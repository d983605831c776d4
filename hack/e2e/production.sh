# hack/e2e/production.sh, sourced by hack/e2e.sh (the full run and the
# smoke) once the local profile is uninstalled: docs/install.md section 3, the production install,
# against a stand-in for the user's own platform in namespace trading
# (hack/e2e/trading.yaml). Uses e2e.sh's k, X, say, fail, guide,
# wait_current, replay_check, kstatus_check and check_uninstalled.
#
# What runs as written: docs/database-role.md's marked SQL blocks (role_sql,
# through psql in the stand-in's PostgreSQL pod, as the role each section
# names) and every marked block of the guide's section 3 and its uninstall.
# What this file adds, and the guide says so: the stand-in itself, its
# passwords (typed at psql's \password prompt, as the document tells the
# reader) and the values of the guide's "your values" block (MIGRATOR_DSN,
# RECOVERY_DSN: sslmode=disable, the stand-in serves no TLS; the migrator's
# at the Service's cluster address, which the node and the hook Job reach).

TRADING=trading

# pg_in ROLE [PSQL ARGS...]: psql inside the stand-in's PostgreSQL pod as
# ROLE, over its socket (trust: the pod's own processes), in the projection
# database.
pg_in() {
  local role="$1"
  shift
  k -n "${TRADING}" exec -i deployment/postgres -- \
    psql -X -q -v ON_ERROR_STOP=1 -h /var/run/postgresql -U "${role}" -d projection "$@"
}

# role_sql NAME ROLE: runs the block of docs/database-role.md marked
# `<!-- e2e: NAME -->` as ROLE, one psql command per line of the block (each
# line is one statement or one psql meta-command: a block that breaks this is
# refused, not guessed at). A \password line reads its password twice from
# stdin, as psql does without a terminal: the role's password from
# role_password.
declare -A role_password=()
role_sql() {
  local name="$1" role="$2" block line args=() input="" pw_re='^\\password ([a-z_]+)$'
  block="$(awk -v m="<!-- e2e: ${name} -->" '$0 == m { f = 1; next } f && /^```/ { if (++n == 2) exit; next } f && n == 1 { print }' docs/database-role.md)"
  [[ -n "${block}" ]] || fail "docs/database-role.md has no block marked e2e: ${name}"
  say "docs/database-role.md, ${name} (psql as ${role}):"
  sed 's/^/    => /' <<<"${block}"
  while IFS= read -r line; do
    [[ -z "${line// /}" || "${line}" == --* ]] && continue
    if [[ "${line}" =~ ${pw_re} ]]; then
      [[ -n "${role_password[${BASH_REMATCH[1]}]:-}" ]] || fail "no password for ${BASH_REMATCH[1]}"
      input+="${role_password[${BASH_REMATCH[1]}]}"$'\n'"${role_password[${BASH_REMATCH[1]}]}"$'\n'
    elif [[ "${line}" != *";" ]]; then
      fail "docs/database-role.md, ${name}: not one statement per line: ${line}"
    fi
    args+=(-c "${line}")
  done <<<"${block}"
  printf '%s' "${input}" | pg_in "${role}" "${args[@]}" 2>&1 | sed '/^Enter /d; /^$/d' ||
    fail "docs/database-role.md, ${name}: a statement failed as ${role}"
}

# standin_up: the platform the guide's section 3 takes as given. A
# PostgreSQL whose database projection belongs to the trade-processor's own
# role (trade_processor: it owns the base tables and selects the run), a
# member for scope venue-a behind Service member-0 (the sample's source URL).
standin_up() {
  local image pw descriptor hash
  image="ghcr.io/projection-recovery/projection-recovery:$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/projection-recovery/Chart.yaml)"
  k create namespace "${TRADING}" >/dev/null
  k label namespace "${TRADING}" pod-security.kubernetes.io/enforce=restricted >/dev/null
  pw="$(openssl rand -hex 16)"
  k -n "${TRADING}" create secret generic postgres --from-literal=password="${pw}" >/dev/null
  sed -e "s|@POSTGRES_IMAGE@|${pg_image}|" -e "s|@PROJECTION_IMAGE@|${image}|" \
    -e "s|@MEMBER_RATE@|${MEMBER_RATE}|" -e "s|@MEMBER_COMMANDS@|${PROD_MEMBER_COMMANDS}|" hack/e2e/trading.yaml |
    k -n "${TRADING}" apply -f - >/dev/null
  k -n "${TRADING}" rollout status deployment/postgres --timeout=2m >/dev/null || fail "the stand-in's PostgreSQL is not Ready"
  k -n "${TRADING}" rollout status statefulset/member --timeout=2m >/dev/null || fail "the stand-in's member is not Ready"
  # The trade-processor: its role owns the database (so the public schema,
  # PostgreSQL 15's pg_database_owner) and creates its tables.
  pg_in postgres -c "CREATE ROLE trade_processor LOGIN;" -c "ALTER DATABASE projection OWNER TO trade_processor;" ||
    fail "creating the trade-processor's role"
  pg_in trade_processor -f - <charts/projection-recovery/files/base.sql || fail "the trade-processor's tables (base.sql)"
  # The run it selects carries the member's descriptor hash (the chart's
  # local profile computes it the same way: engine.Descriptor.Hash).
  descriptor='{"protocolVersion":1,"engineId":"reference-engine-v1","scope":"venue-a","instruments":["BTC-USD","ETH-USD"]}'
  hash="$(printf '%s' "${descriptor}" | sha256sum | cut -d' ' -f1)"
  pg_in trade_processor -v hash="${hash}" <<'EOF' || fail "selecting the trade-processor's run"
INSERT INTO projection_runs (scope, epoch, managed, selected, phase, descriptor_hash, protocol_version)
VALUES ('venue-a', 1, true, true, 'ACTIVE', :'hash', 1);
EOF
  say "stand-in up: PostgreSQL (database projection, owner trade_processor), member-0 trading ${PROD_MEMBER_COMMANDS} commands"
}

production_phase() {
  local r pg_ip left i
  standin_up
  REC_NS="${TRADING}" SCOPE=venue-a
  MEMBER_NS="${TRADING}" MEMBER_SVC=member-0
  PG_NS="${TRADING}" PG_SVC=postgres PG_SECRET=postgres
  for r in projection_recovery_migrator projection_recovery projection_recovery_readonly projection_reconciliation; do
    role_password[${r}]="$(openssl rand -hex 16)"
  done
  # database-role.md sections 1 to 3, each as the role it names: a
  # superuser, the database's owner, the tables' owner.
  role_sql roles postgres
  role_sql passwords postgres
  role_sql database-grants trade_processor
  role_sql hardening trade_processor
  role_sql trade-processor-grants trade_processor

  # The guide's "your values" (not run: set here, as its section 3 says).
  pg_ip="$(k -n "${TRADING}" get service postgres -o jsonpath='{.spec.clusterIP}')"
  guide_env=(
    "MIGRATOR_DSN=postgres://projection_recovery_migrator:${role_password[projection_recovery_migrator]}@${pg_ip}:5432/projection?sslmode=disable"
    "RECOVERY_DSN=postgres://projection_recovery:${role_password[projection_recovery]}@postgres.${TRADING}.svc:5432/projection?sslmode=disable"
  )
  guide migrate | tee "${out}/migrate.txt"
  grep -q '^applied version 1:' "${out}/migrate.txt" || fail "manager migrate by hand applied nothing on a new database"
  grep -q '^state: current$' "${out}/migrate.txt" || fail "manager migrate --status: the schema is not current"
  # Section 4 for every migration the step printed, as the migrator.
  role_sql migration-1 projection_recovery_migrator
  role_sql migration-2 projection_recovery_migrator
  role_sql migration-3 projection_recovery_migrator

  # The production install gets nothing from the node but a timeout: the
  # chart's default image is the one imported, and there is no profile.
  E2E_HELM_SETS="--timeout 5m"
  # The local profile's namespace, deleted when this phase began.
  for ((i = 0; i < 120; i++)); do
    k get namespace "${NS}" >/dev/null 2>&1 || break
    sleep 1
  done
  ! k get namespace "${NS}" >/dev/null 2>&1 || fail "the local profile's namespace is still there after 2 minutes"
  guide production-install
  k -n "${NS}" get events --field-selector involvedObject.kind=Job,involvedObject.name="${RELEASE}-migrate",reason=Completed -o name |
    grep -q . || fail "the chart's migrate hook Job did not run to completion"
  say "the migrate hook Job completed (as the migrator, from the Secret projection-owner-db)"
  # The member's bounded log complete, so that the guide's wait for Ready
  # ends at the boundary wait_current checks (the sample's interval is 30s).
  for ((i = 0; i < 120; i++)); do
    [[ "$(member_head)" == "${PROD_MEMBER_COMMANDS}" ]] && break
    sleep 1
  done
  [[ "$(member_head)" == "${PROD_MEMBER_COMMANDS}" ]] || fail "member-0 did not trade its ${PROD_MEMBER_COMMANDS} commands in 2 minutes"
  guide production-sample
  wait_current
  kstatus_check
  replay_check

  say "uninstall: the resources first, in every namespace, then the release"
  guide uninstall
  check_uninstalled secret/projection-owner-db
  left="$(k get projectionrecoveries,projectionreconciliations -A -o name)"
  [[ -z "${left}" ]] || fail "resources left after the guide's uninstall:"$'\n'"${left}"
}
