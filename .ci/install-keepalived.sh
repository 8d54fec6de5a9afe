#!/usr/bin/env bash
# The in-cluster VIP test (targets/vip_keepalived_test.go) runs Debian's keepalived in network
# namespaces, with the configuration the lab's bootstrap and master assets render. Idempotent.
set -euo pipefail
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  if ! command -v keepalived >/dev/null; then
    [ -n "${LABBUILD_APT_UPDATED:-}" ] || apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends keepalived curl >/dev/null
  fi
else
  echo "install-keepalived: not root: skipping keepalived (the VIP failover test skips, or fails under CI=true)" >&2
fi
