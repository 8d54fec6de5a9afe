#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine: Debian packages (when root) and the
# kube-apiserver/kube-controller-manager/kube-scheduler/kubelet build, cached by version. Idempotent.
# Each area has its own .ci/install-<area>.sh; this runs them all.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  if [ -z "${LABBUILD_APT_UPDATED:-}" ]; then
    apt-get update -qq
    export LABBUILD_APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    openssl ninja-build hyperfine graphviz >/dev/null
else
  echo "install: not root: skipping Debian packages (tests needing them skip, or fail under CI=true)" >&2
fi
for f in .ci/install-*.sh; do
  [ -e "$f" ] || continue
  echo "install: $f" >&2
  bash "$f"
done
if [ -x .ci/build-kube.sh ] || [ -f .ci/build-kube.sh ]; then
  bash .ci/build-kube.sh
fi
