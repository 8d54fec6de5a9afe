#!/usr/bin/env bash
# labbuild ssh and gather are tested against Debian's sshd in rehearsal nodes' network
# namespaces (internal/nodessh, internal/rig/rehearsal), logging in as core with the node's
# Ignition keys and sudo as RHCOS gives core. The package's own service is not started here:
# the tests start sshd inside the namespaces they create. Idempotent.
set -euo pipefail
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  if [ ! -x /usr/sbin/sshd ] || ! command -v sudo >/dev/null; then
    [ -n "${LABBUILD_APT_UPDATED:-}" ] || apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openssh-server sudo >/dev/null
  fi
else
  echo "install-ssh: not root: skipping openssh-server (the ssh and gather tests skip, or fail under CI=true)" >&2
fi
