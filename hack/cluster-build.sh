#!/usr/bin/env bash
# Builds the node's binaries from source through the Go module proxy, the way
# hack/control-plane.sh builds kube-apiserver: kube-controller-manager,
# kube-scheduler, kubelet and kube-proxy of the same Kubernetes version (so
# the build shares every compiled package with the apiserver's), and CoreDNS
# from its Go module. Cached per user and version outside the clone; a second
# checkout links instead of compiling.
#
# Usage: hack/cluster-build.sh      # build what is missing, print the bin dir
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
# The control plane's pins: the node must run the apiserver's version.
K8S_VERSION="${K8S_VERSION:-1.37.2}"
K8S_STAGING_VERSION="${K8S_STAGING_VERSION:-0.37.2}"
ETCD_VERSION="${ETCD_VERSION:-3.7.3}"
COREDNS_VERSION="${COREDNS_VERSION:-1.15.0}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/projection-recovery/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}"
coredns_cache="${XDG_CACHE_HOME:-$HOME/.cache}/projection-recovery/coredns-${COREDNS_VERSION}"
node_bins=(kube-controller-manager kube-scheduler kubelet kube-proxy)

log() { echo "cluster-build: $*" >&2; }

have_node() {
  local b
  for b in "${node_bins[@]}"; do [[ -x "${cache}/${b}" ]] || return 1; done
}

build_node() {
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "${work}"' RETURN
  log "building ${node_bins[*]} v${K8S_VERSION} from source (cold: see docs/e2e.md)"
  (
    cd "${work}"
    go mod init local/kubenode >/dev/null 2>&1
    go mod edit -require="k8s.io/kubernetes@v${K8S_VERSION}"
    # As in control-plane.sh: kubernetes requires its staging modules at
    # v0.0.0 with replaces into ./staging that the module zip lacks.
    GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" >/dev/null
    gomod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v${K8S_VERSION}.mod"
    awk '/^require \(/{r=1;next} r&&/^\)/{r=0} r && $1 ~ /^k8s.io\// && $2=="v0.0.0" {print $1}' "${gomod}" |
      while read -r m; do go mod edit -replace="${m}=${m}@v${K8S_STAGING_VERSION}"; done
    {
      echo '//go:build tools'
      echo
      echo 'package tools'
      echo
      echo 'import ('
      for b in "${node_bins[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/${b}\""; done
      echo ')'
    } > tools.go
    go mod tidy >/dev/null 2>&1 || go mod tidy
    major="${K8S_VERSION%%.*}"
    minor="$(echo "${K8S_VERSION}" | cut -d. -f2)"
    ld="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld="${ld} -X ${p}.gitVersion=v${K8S_VERSION} -X ${p}.gitMajor=${major} -X ${p}.gitMinor=${minor} -X ${p}.gitTreeState=clean"
    done
    mkdir -p "${work}/out" "${cache}"
    pkgs=()
    for b in "${node_bins[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/${b}"); done
    # Same flags as the apiserver's build, so its compiled packages are reused.
    CGO_ENABLED=0 go build -trimpath -ldflags "${ld}" -o "${work}/out/" "${pkgs[@]}"
    for b in "${node_bins[@]}"; do mv "${work}/out/${b}" "${cache}/${b}"; done
  )
}

build_coredns() {
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "${work}"' RETURN
  log "building coredns v${COREDNS_VERSION} from its Go module"
  (
    cd "${work}"
    go mod init local/corednsbuild >/dev/null 2>&1
    cat > tools.go <<'GO'
//go:build tools

package tools

import _ "github.com/coredns/coredns"
GO
    go mod edit -require="github.com/coredns/coredns@v${COREDNS_VERSION}"
    go mod tidy >/dev/null 2>&1 || go mod tidy
    mkdir -p "${coredns_cache}"
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${coredns_cache}/coredns.tmp" github.com/coredns/coredns
    mv "${coredns_cache}/coredns.tmp" "${coredns_cache}/coredns"
  )
}

if ! have_node || [[ ! -x "${coredns_cache}/coredns" ]]; then
  # One build at a time per cache, as control-plane.sh does (same lock file):
  # two heavy Go builds at once on 2 cores take longer than both in turn.
  mkdir -p "$(dirname "${cache}")"
  exec 9>"${cache}.lock"
  command -v flock >/dev/null 2>&1 && flock 9
  have_node || build_node
  [[ -x "${coredns_cache}/coredns" ]] || build_coredns
fi

# The control plane (apiserver, etcd, kubectl) is control-plane.sh's.
"${root}/hack/control-plane.sh" >/dev/null
bin="${root}/bin/k8s"
for b in "${node_bins[@]}"; do ln -sf "${cache}/${b}" "${bin}/${b}"; done
ln -sf "${coredns_cache}/coredns" "${bin}/coredns"
echo "${bin}"
