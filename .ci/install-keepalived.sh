#!/usr/bin/env bash
# The in-cluster VIP tests (internal/rig/standin/mco keepalived_test.go) run Debian's keepalived in network
# namespaces, with the configuration the lab's bootstrap and master assets render, and the
# bootstrap keepalived container's own command line, which serves its control socket with
# Debian's socat (MCO manifests/on-prem/keepalived.yaml). The in-cluster flow (internal/rig/rehearsal
# TestInClusterFlow) builds the masters' on-prem pod images from these programs, haproxy and
# iptables among them (OnPremImages). Idempotent.
set -euo pipefail
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  if ! command -v keepalived >/dev/null || ! command -v socat >/dev/null || ! command -v pgrep >/dev/null ||
    ! command -v haproxy >/dev/null || ! command -v iptables >/dev/null || ! command -v curl >/dev/null; then
    [ -n "${LABBUILD_APT_UPDATED:-}" ] || apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends keepalived socat procps curl haproxy iptables >/dev/null
  fi
else
  echo "install-keepalived: not root: skipping keepalived and socat (the VIP failover tests skip, or fails under CI=true)" >&2
fi
