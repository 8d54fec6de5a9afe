#!/usr/bin/env bash
# The cluster family's tests (targets/cluster_test.go) run Debian's etcd with kube-apiserver
# and kube-controller-manager from .ci/build-kube.sh (which .ci/install.sh runs). Idempotent.
set -euo pipefail
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  if ! command -v etcd >/dev/null; then
    [ -n "${LABBUILD_APT_UPDATED:-}" ] || apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends etcd-server >/dev/null
  fi
else
  echo "install-cluster: not root: skipping etcd-server (cluster tests skip, or fail under CI=true)" >&2
fi
