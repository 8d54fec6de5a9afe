#!/usr/bin/env bash
# The rehearsal lab (internal/rig/rehearsal, `make rehearsal`) joins nodes with a real kubelet
# (built by .ci/build-kube.sh) on a real container runtime: Debian's containerd and runc, and
# the CNI plugins (bridge, host-local, loopback) in /usr/lib/cni. Nothing is started here: the
# rehearsal starts one containerd per node inside that node's network namespace. Idempotent.
# The pause image is built locally by the test (go-containerregistry) and imported: the
# default registry.k8s.io/pause cannot be pulled here (../shared/notes/real-tools.md).
set -euo pipefail
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  if ! command -v containerd >/dev/null || ! command -v runc >/dev/null || [ ! -x /usr/lib/cni/bridge ]; then
    [ -n "${LABBUILD_APT_UPDATED:-}" ] || apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      -o DPkg::Lock::Timeout=600 containerd runc containernetworking-plugins iproute2 >/dev/null
  fi
else
  echo "install-kubelet-runtime: not root: skipping containerd, runc, CNI plugins (rehearsal skips, or fails under CI=true)" >&2
fi
