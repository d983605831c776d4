#!/usr/bin/env bash
# hack/cluster.sh: a disposable single-node Kubernetes cluster on this
# machine, as root, for `make e2e` (docs/e2e.md).
#
#   hack/cluster.sh up        build (cached) and start the node; prints KUBECONFIG=...
#   hack/cluster.sh images    build the three images and import them into containerd
#   hack/cluster.sh exec CMD  run CMD inside the cluster's network namespace
#   hack/cluster.sh down      stop everything it started and remove its state
#   hack/cluster.sh check     say what is missing, change nothing
#
# Everything runs inside one network namespace of its own (pr-e2e): etcd, the
# apiserver, controller-manager, scheduler, containerd, kubelet, kube-proxy
# and CoreDNS. The pods' bridge, their veths, kube-proxy's iptables rules and
# the Service addresses exist only there; the namespace has no route off the
# machine, so nothing is routed or masqueraded anywhere. Processes enter the
# namespace with `nsenter --net` (not `ip netns exec`, which also gives each
# process a mount namespace of its own: the kubelet's volume mounts would then
# be invisible to runc).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
NETNS="${E2E_NETNS:-pr-e2e}"
STATE="${E2E_STATE:-/var/lib/projection-e2e}"
RUN="${E2E_RUN:-/run/projection-e2e}"
NODE="${E2E_NODE_NAME:-e2e-node}"
# The node's address: the pods' bridge gateway. Pod and Service ranges are
# only ever assigned inside the namespace.
NODE_IP=10.244.0.1
POD_CIDR=10.244.0.0/24
CLUSTER_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
BRIDGE=cni0
# The images the node runs; `images` builds and imports them.
PAUSE_IMAGE="localhost/projection-recovery-e2e/pause:1"
POSTGRES_IMAGE="localhost/projection-recovery-e2e/postgres:15"
CGROUP_ROOT=projection-e2e
bin="${root}/bin/k8s"
cni_bin="${E2E_CNI_BIN:-/usr/lib/cni}"

log() { echo "cluster: $*" >&2; }
die() { echo "cluster: $*" >&2; exit 1; }
in_ns() { nsenter --net="/var/run/netns/${NETNS}" -- "$@"; }

# missing prints one line per thing `up` needs that this machine lacks.
missing() {
  [[ $(id -u) -eq 0 ]] || echo "not root: the node needs root (network namespace, mounts, cgroups)"
  local c
  for c in containerd containerd-shim-runc-v2 runc ctr iptables ip nsenter openssl mount flock; do
    command -v "$c" >/dev/null 2>&1 || echo "no ${c} (Debian: apt-get install containerd runc iptables iproute2 util-linux openssl)"
  done
  for c in bridge host-local loopback portmap; do
    [[ -x "${cni_bin}/${c}" ]] || echo "no CNI plugin ${cni_bin}/${c} (Debian: apt-get install containernetworking-plugins)"
  done
  grep -qw overlay /proc/filesystems || echo "no overlayfs in this kernel (containerd's overlayfs snapshotter)"
  [[ -d /sys/fs/cgroup/memory || -f /sys/fs/cgroup/cgroup.controllers ]] || echo "no memory cgroup"
  [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] || echo "no br_netfilter (modprobe br_netfilter): Service replies between pods on one bridge would bypass kube-proxy's NAT"
}

# ensure_packages installs Debian's packages the node needs when missing.
ensure_packages() {
  local need=()
  command -v containerd >/dev/null 2>&1 || need+=(containerd)
  command -v runc >/dev/null 2>&1 || need+=(runc)
  command -v iptables >/dev/null 2>&1 || need+=(iptables)
  command -v conntrack >/dev/null 2>&1 || need+=(conntrack)
  [[ -x "${cni_bin}/bridge" ]] || need+=(containernetworking-plugins)
  if ((${#need[@]})); then
    [[ $(id -u) -eq 0 ]] || die "need root to apt-get install ${need[*]}"
    log "installing Debian's ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
  fi
}

cmd_check() {
  local m
  m="$(missing)"
  if [[ -n "${m}" ]]; then
    echo "${m}" >&2
    return 1
  fi
  echo "cluster: this machine has what the node needs" >&2
}

# start NAME CMD...: run CMD in the namespace in the background, logging to
# ${STATE}/logs/NAME.log, its pid in ${RUN}/NAME.pid (what `down` kills).
start() {
  local name="$1"
  shift
  nsenter --net="/var/run/netns/${NETNS}" -- "$@" >"${STATE}/logs/${name}.log" 2>&1 &
  echo $! >"${RUN}/${name}.pid"
}

# wait_for WHAT SECONDS CMD...: poll CMD until it succeeds.
wait_for() {
  local what="$1" secs="$2"
  shift 2
  local i
  for ((i = 0; i < secs * 2; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  die "${what} did not come up within ${secs}s (logs: ${STATE}/logs)"
}

pki() {
  local d="${STATE}/pki"
  mkdir -p "${d}"
  cd "${d}"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=projection-e2e-ca" 2>/dev/null
  cat >apiserver.ext <<EOF
subjectAltName=DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:${SERVICE_IP},IP:${NODE_IP},IP:127.0.0.1
extendedKeyUsage=serverAuth
EOF
  openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
  openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 2 -extfile apiserver.ext 2>/dev/null
  # The apiserver's client certificate towards the kubelet (logs, exec).
  echo "extendedKeyUsage=clientAuth" >client.ext
  openssl req -newkey rsa:2048 -nodes -keyout kubelet-client.key -out kubelet-client.csr -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
  openssl x509 -req -in kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out kubelet-client.crt -days 2 -extfile client.ext 2>/dev/null
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  # Static tokens: one identity per component, the bootstrap RBAC roles
  # of each (system:kube-controller-manager, system:kube-scheduler,
  # system:node:<name> in system:nodes, system:kube-proxy) apply as in kubeadm.
  : >tokens.csv
  local who
  for who in admin controller-manager scheduler kubelet kube-proxy coredns; do
    openssl rand -hex 16 >"${who}.token"
  done
  {
    echo "$(cat admin.token),e2e-admin,e2e-admin,\"system:masters\""
    echo "$(cat controller-manager.token),system:kube-controller-manager,system:kube-controller-manager"
    echo "$(cat scheduler.token),system:kube-scheduler,system:kube-scheduler"
    echo "$(cat kubelet.token),system:node:${NODE},system:node:${NODE},\"system:nodes\""
    echo "$(cat kube-proxy.token),system:kube-proxy,system:kube-proxy"
    echo "$(cat coredns.token),e2e-coredns,e2e-coredns"
  } >tokens.csv
  cd - >/dev/null
}

kubeconfig() { # kubeconfig WHO: a kubeconfig for a static-token identity
  local who="$1"
  cat >"${STATE}/${who}.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: "https://${NODE_IP}:6443", certificate-authority: "${STATE}/pki/ca.crt"}
users:
- name: ${who}
  user: {token: "$(cat "${STATE}/pki/${who}.token")"}
contexts:
- name: e2e
  context: {cluster: e2e, user: ${who}}
current-context: e2e
EOF
}

network() {
  ip netns add "${NETNS}"
  in_ns ip link set lo up
  in_ns ip link add "${BRIDGE}" type bridge
  in_ns ip addr add "${NODE_IP}/24" dev "${BRIDGE}"
  in_ns ip link set "${BRIDGE}" up
  # The namespace has no default route (nothing leaves it): Service addresses
  # need one of their own for connections from the node itself (the e2e
  # checks, the apiserver's webhooks); kube-proxy's OUTPUT rules DNAT them.
  in_ns ip route add "${SERVICE_CIDR}" dev "${BRIDGE}" src "${NODE_IP}"
  # Both settings are per network namespace: the host's stay as they are.
  in_ns sysctl -qw net.ipv4.ip_forward=1
  in_ns sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
  mkdir -p "${STATE}/cni/net.d"
  cat >"${STATE}/cni/net.d/10-e2e.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "e2e",
  "plugins": [
    {"type": "bridge", "bridge": "${BRIDGE}", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "${POD_CIDR}", "rangeStart": "10.244.0.10", "gateway": "${NODE_IP}"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "${STATE}/cni/ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

containerd_up() {
  mkdir -p "${STATE}/containerd" "${RUN}/containerd"
  cat >"${STATE}/containerd.toml" <<EOF
version = 2
root = "${STATE}/containerd"
state = "${RUN}/containerd"
[grpc]
  address = "${RUN}/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  # The kubelet asks for oom_score_adj -998 (pause) and -997 (guaranteed
  # pods); this machine's root may not lower its own score, and runc fails
  # the sandbox on it. Clamp to the current score instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        # runc's state beside containerd's, not in the system containerd's /run/containerd.
        Root = "${RUN}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${cni_bin}"
    conf_dir = "${STATE}/cni/net.d"
EOF
  start containerd containerd --config "${STATE}/containerd.toml"
  wait_for containerd 30 ctr --address "${RUN}/containerd.sock" version
}

control_plane_up() {
  mkdir -p "${STATE}/etcd"
  start etcd "${bin}/etcd" --data-dir "${STATE}/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --unsafe-no-fsync
  wait_for etcd 30 in_ns bash -c 'exec 3<>/dev/tcp/127.0.0.1/2379'
  local p="${STATE}/pki"
  start kube-apiserver "${bin}/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 --bind-address=0.0.0.0 --secure-port=6443 \
    --advertise-address="${NODE_IP}" --service-cluster-ip-range="${SERVICE_CIDR}" \
    --tls-cert-file="${p}/apiserver.crt" --tls-private-key-file="${p}/apiserver.key" \
    --client-ca-file="${p}/ca.crt" --token-auth-file="${p}/tokens.csv" \
    --authorization-mode=Node,RBAC \
    --kubelet-client-certificate="${p}/kubelet-client.crt" --kubelet-client-key="${p}/kubelet-client.key" \
    --kubelet-certificate-authority="${p}/ca.crt" \
    --kubelet-preferred-address-types=InternalIP \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="${p}/sa.pub" --service-account-signing-key-file="${p}/sa.key" \
    --cert-dir="${STATE}/apiserver-certs"
  wait_for kube-apiserver 90 in_ns "${bin}/kubectl" --kubeconfig "${STATE}/admin.kubeconfig" get --raw /readyz
  start kube-controller-manager "${bin}/kube-controller-manager" \
    --kubeconfig="${STATE}/controller-manager.kubeconfig" \
    --authentication-kubeconfig="${STATE}/controller-manager.kubeconfig" \
    --authorization-kubeconfig="${STATE}/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --use-service-account-credentials \
    --service-account-private-key-file="${p}/sa.key" --root-ca-file="${p}/ca.crt" \
    --cluster-cidr="${CLUSTER_CIDR}" --service-cluster-ip-range="${SERVICE_CIDR}" \
    --leader-elect=false
  start kube-scheduler "${bin}/kube-scheduler" \
    --kubeconfig="${STATE}/scheduler.kubeconfig" \
    --authentication-kubeconfig="${STATE}/scheduler.kubeconfig" \
    --authorization-kubeconfig="${STATE}/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false
}

kubelet_up() {
  mkdir -p "${STATE}/kubelet" "${STATE}/kubelet-certs"
  # The pods' resolver is CoreDNS on the node address; nothing is forwarded.
  echo "nameserver ${NODE_IP}" >"${STATE}/resolv.conf"
  cat >"${STATE}/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${NODE_IP}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "${STATE}/pki/ca.crt"}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: /${CGROUP_ROOT}
# This machine's cgroups are v1 (the unified hierarchy only mounted beside them).
failCgroupV1: false
failSwapOn: false
clusterDNS: ["${NODE_IP}"]
clusterDomain: cluster.local
resolvConf: "${STATE}/resolv.conf"
containerRuntimeEndpoint: "unix://${RUN}/containerd.sock"
# The machine's disk is shared: evict only when it is really full.
evictionHard: {"nodefs.available": "1%", "imagefs.available": "1%", "memory.available": "100Mi"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
podCIDR: ${POD_CIDR}
tlsCertFile: "${STATE}/kubelet-certs/kubelet.crt"
tlsPrivateKeyFile: "${STATE}/kubelet-certs/kubelet.key"
EOF
  # Serving certificate signed by the cluster CA, so the apiserver verifies it.
  (
    cd "${STATE}/pki"
    echo "subjectAltName=IP:${NODE_IP},DNS:${NODE}" >kubelet.ext
    echo "extendedKeyUsage=serverAuth" >>kubelet.ext
    openssl req -newkey rsa:2048 -nodes -keyout "${STATE}/kubelet-certs/kubelet.key" -out kubelet.csr -subj "/CN=${NODE}" 2>/dev/null
    openssl x509 -req -in kubelet.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out "${STATE}/kubelet-certs/kubelet.crt" -days 2 -extfile kubelet.ext 2>/dev/null
  )
  local c
  for c in /sys/fs/cgroup/*/; do
    [[ -f "${c}cgroup.procs" ]] && mkdir -p "${c}${CGROUP_ROOT}"
  done
  start kubelet "${bin}/kubelet" --config="${STATE}/kubelet.yaml" \
    --kubeconfig="${STATE}/kubelet.kubeconfig" --root-dir="${STATE}/kubelet" \
    --hostname-override="${NODE}" --node-ip="${NODE_IP}"
  wait_for "the node" 90 in_ns "${bin}/kubectl" --kubeconfig "${STATE}/admin.kubeconfig" get node "${NODE}"
}

proxy_dns_up() {
  cat >"${STATE}/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "${STATE}/kube-proxy.kubeconfig"}
mode: iptables
clusterCIDR: ${CLUSTER_CIDR}
hostnameOverride: ${NODE}
bindAddress: ${NODE_IP}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# nf_conntrack_max is not the namespace's to set: leave conntrack alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  start kube-proxy "${bin}/kube-proxy" --config="${STATE}/kube-proxy.yaml"
  # CoreDNS reads Services and EndpointSlices: the view role, bound here.
  local k=("${bin}/kubectl" --kubeconfig "${STATE}/admin.kubeconfig")
  in_ns "${k[@]}" create clusterrolebinding e2e-coredns --clusterrole=view --user=e2e-coredns >/dev/null
  in_ns "${k[@]}" create clusterrole e2e-coredns-discovery --verb=list,watch --resource=endpointslices.discovery.k8s.io,namespaces,services >/dev/null
  in_ns "${k[@]}" create clusterrolebinding e2e-coredns-discovery --clusterrole=e2e-coredns-discovery --user=e2e-coredns >/dev/null
  # Cluster names from the API; every other name is NXDOMAIN here, nothing
  # is forwarded off the machine.
  cat >"${STATE}/Corefile" <<EOF
cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
    bind ${NODE_IP}
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig ${STATE}/coredns.kubeconfig e2e
        pods insecure
    }
    cache 5
}
.:53 {
    bind ${NODE_IP}
    template ANY ANY {
        rcode NXDOMAIN
    }
}
EOF
  start coredns "${bin}/coredns" -conf "${STATE}/Corefile"
  wait_for coredns 30 in_ns bash -c "exec 3<>/dev/tcp/${NODE_IP}/53"
}

cmd_up() {
  [[ $(id -u) -eq 0 ]] || die "the node needs root (network namespace, mounts, cgroups); run as root"
  if [[ -e "/var/run/netns/${NETNS}" ]]; then
    die "network namespace ${NETNS} exists: a node is up (or was not torn down); run: hack/cluster.sh down"
  fi
  ensure_packages
  local m
  m="$(missing)"
  [[ -z "${m}" ]] || die "cannot start the node:"$'\n'"${m}"
  "${root}/hack/cluster-build.sh" >/dev/null
  rm -rf "${STATE}" "${RUN}"
  mkdir -p "${STATE}/logs" "${RUN}"
  network
  pki
  local who
  for who in admin controller-manager scheduler kubelet kube-proxy coredns; do kubeconfig "${who}"; done
  containerd_up
  control_plane_up
  kubelet_up
  proxy_dns_up
  # Pods are refused until the service-account controller made the
  # namespace's default account.
  wait_for "the default service account" 60 in_ns "${bin}/kubectl" --kubeconfig "${STATE}/admin.kubeconfig" -n default get serviceaccount default
  log "node ${NODE} is up (logs: ${STATE}/logs)"
  echo "KUBECONFIG=${STATE}/admin.kubeconfig"
}

cmd_images() {
  local out="${root}/bin/e2e-images"
  mkdir -p "${out}"
  (cd "${root}" && go run ./hack/image --out "${out}" --version "$(git describe --tags --always --dirty 2>/dev/null || echo dev)") >&2
  (cd "${root}" && go run ./hack/image --flavor pause --out "${out}" --reference "${PAUSE_IMAGE}") >&2
  (cd "${root}" && go run ./hack/image --flavor postgres --out "${out}" --reference "${POSTGRES_IMAGE}") >&2
  local t
  for t in projection-recovery.tar pause.tar postgres.tar; do
    in_ns ctr --address "${RUN}/containerd.sock" -n k8s.io images import "${out}/${t}" >&2
  done
  echo "POSTGRES_IMAGE=${POSTGRES_IMAGE}"
}

# stop_pid NAME: SIGTERM the process `start` recorded, SIGKILL after 10s.
stop_pid() {
  local f="${RUN}/$1.pid" pid i
  [[ -f "${f}" ]] || return 0
  pid="$(cat "${f}")"
  if kill -TERM "${pid}" 2>/dev/null; then
    for ((i = 0; i < 20; i++)); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "${pid}" 2>/dev/null || true
  fi
  rm -f "${f}"
}

cmd_down() {
  [[ $(id -u) -eq 0 ]] || die "run as root"
  local n
  for n in kubelet kube-proxy coredns kube-scheduler kube-controller-manager; do stop_pid "${n}"; done
  # The containers outlive containerd (each has its shim): kill every task
  # of this containerd first, then containerd, then any shim still naming
  # its socket.
  if [[ -S "${RUN}/containerd.sock" ]]; then
    local c=(ctr --address "${RUN}/containerd.sock" -n k8s.io)
    local id
    # The pods' network namespaces (/run/netns/cni-*) are files containerd
    # made for this node's sandboxes: read them off the sandboxes' specs so
    # that only ours are removed.
    for id in $("${c[@]}" containers ls -q 2>/dev/null); do
      "${c[@]}" containers info "${id}" 2>/dev/null |
        grep -o '"path": *"/var/run/netns/cni-[^"]*"' | sed 's/.*"\(\/var[^"]*\)"/\1/' >>"${RUN}/pod-netns" || true
    done
    for id in $("${c[@]}" tasks ls -q 2>/dev/null); do
      "${c[@]}" tasks kill -s SIGKILL "${id}" >/dev/null 2>&1 || true
    done
    sleep 1
    for id in $("${c[@]}" tasks ls -q 2>/dev/null); do "${c[@]}" tasks delete -f "${id}" >/dev/null 2>&1 || true; done
  fi
  stop_pid containerd
  local p
  for p in /proc/[0-9]*; do
    if tr '\0' ' ' 2>/dev/null <"${p}/cmdline" | grep -q -- "-address ${RUN}/containerd.sock"; then
      kill -KILL "${p#/proc/}" 2>/dev/null || true
    fi
  done
  for n in kube-apiserver etcd; do stop_pid "${n}"; done
  # Mounts under the state directories (pods' volumes, rootfs, netns
  # bind mounts of the pods), deepest first.
  local m
  for m in $(awk -v s="${STATE}" -v r="${RUN}" '$2 ~ "^"s"/" || $2 ~ "^"r"/" {print $2}' /proc/self/mounts | sort -r); do
    umount -l "${m}" 2>/dev/null || true
  done
  if [[ -f "${RUN}/pod-netns" ]]; then
    for m in $(sort -u "${RUN}/pod-netns"); do
      umount -l "${m}" 2>/dev/null || true
      rm -f "${m}"
    done
  fi
  if [[ -e "/var/run/netns/${NETNS}" ]]; then ip netns delete "${NETNS}"; fi
  # The kubelet's cgroups, deepest first.
  for m in /sys/fs/cgroup/*/"${CGROUP_ROOT}"; do
    [[ -d "${m}" ]] && find "${m}" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  rm -rf "${STATE}" "${RUN}"
  log "node torn down"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  check) cmd_check ;;
  images) cmd_images ;;
  exec)
    shift
    exec nsenter --net="/var/run/netns/${NETNS}" -- env KUBECONFIG="${STATE}/admin.kubeconfig" "$@"
    ;;
  *) die "usage: hack/cluster.sh up|images|exec CMD...|down|check" ;;
esac
