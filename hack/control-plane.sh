#!/usr/bin/env bash
# Builds the local control-plane binaries (kube-apiserver, etcd, kubectl) from source
# through the Go module proxy, since no prebuilt binary can be downloaded here.
#
# The binaries are cached per user, keyed by version, outside the repository
# (a clean clone in CI has no bin/), and linked into bin/k8s/ which is what
# KUBEBUILDER_ASSETS points at. A cache hit costs nothing; a cold build takes
# about 10 minutes on 2 cores.
#
# Usage: hack/control-plane.sh            # build if missing, print the assets dir
#        hack/control-plane.sh --print    # print the assets dir only
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.2}"
K8S_STAGING_VERSION="${K8S_STAGING_VERSION:-0.37.2}"
ETCD_VERSION="${ETCD_VERSION:-3.7.3}"

root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/projection-recovery/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}"
assets="${root}/bin/k8s"

if [[ "${1:-}" == "--print" ]]; then
  echo "${assets}"
  exit 0
fi

log() { echo "control-plane: $*" >&2; }

have() { [[ -x "${cache}/kube-apiserver" && -x "${cache}/etcd" && -x "${cache}/kubectl" ]]; }

build_kube() {
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "${work}"' RETURN
  log "building kube-apiserver and kubectl v${K8S_VERSION} from source (cold: ~10 min)"
  (
    cd "${work}"
    go mod init local/kubebuild >/dev/null 2>&1
    go mod edit -require="k8s.io/kubernetes@v${K8S_VERSION}"
    # kubernetes' own go.mod requires its staging modules at v0.0.0 and replaces them
    # with ./staging paths that do not exist in the module zip: point each one at
    # the published k8s.io/<name> of the matching minor.
    GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" >/dev/null
    gomod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v${K8S_VERSION}.mod"
    awk '/^require \(/{r=1;next} r&&/^\)/{r=0} r && $1 ~ /^k8s.io\// && $2=="v0.0.0" {print $1}' "${gomod}" |
      while read -r m; do go mod edit -replace="${m}=${m}@v${K8S_STAGING_VERSION}"; done
    cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
    go mod tidy >/dev/null 2>&1 || go mod tidy
    major="${K8S_VERSION%%.*}"
    minor="$(echo "${K8S_VERSION}" | cut -d. -f2)"
    ld="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld="${ld} -X ${p}.gitVersion=v${K8S_VERSION} -X ${p}.gitMajor=${major} -X ${p}.gitMinor=${minor} -X ${p}.gitTreeState=clean"
    done
    mkdir -p "${cache}"
    # One go build for both: their shared packages compile once, on both cores.
    mkdir -p "${work}/out"
    CGO_ENABLED=0 go build -trimpath -ldflags "${ld}" -o "${work}/out/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
    mv "${work}/out/kube-apiserver" "${cache}/kube-apiserver"
    mv "${work}/out/kubectl" "${cache}/kubectl"
  )
}

build_etcd() {
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "${work}"' RETURN
  log "building etcd v${ETCD_VERSION} from source (cold: ~2 min)"
  (
    cd "${work}"
    go mod init local/etcdbuild >/dev/null 2>&1
    cat > tools.go <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
    go mod edit -require="go.etcd.io/etcd/server/v3@v${ETCD_VERSION}"
    go mod tidy >/dev/null 2>&1 || go mod tidy
    mkdir -p "${cache}"
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${cache}/etcd.tmp" go.etcd.io/etcd/server/v3
    mv "${cache}/etcd.tmp" "${cache}/etcd"
  )
}

if ! have; then
  # One build at a time per cache: checkouts that call this at once (several
  # worktrees, CI jobs sharing a runner) would each build the control plane
  # from source, multiplying a ~10-minute build on 2 cores. The second waits
  # for the lock, then finds the binaries and only links them.
  mkdir -p "$(dirname "${cache}")"
  exec 9>"${cache}.lock"
  if command -v flock >/dev/null 2>&1; then
    flock 9
  fi
  if ! have; then
    [[ -x "${cache}/etcd" ]] || build_etcd
    [[ -x "${cache}/kube-apiserver" && -x "${cache}/kubectl" ]] || build_kube
  fi
fi

mkdir -p "${assets}"
for b in kube-apiserver etcd kubectl; do
  ln -sf "${cache}/${b}" "${assets}/${b}"
done
echo "${assets}"
