#!/usr/bin/env bash
# make demo: the whole loop on this machine. Needs nothing but the repository:
# the control-plane binaries are built (once, cached) by hack/control-plane.sh,
# PostgreSQL is Debian's server (installed when missing) run as a throwaway
# cluster, the member and manager are built by `make build`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "${root}"
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "demo: installing Debian's PostgreSQL server" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql >&2
fi
export KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-${root}/bin/k8s}"
exec go run ./hack/demo "$@"
