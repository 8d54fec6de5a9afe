#!/usr/bin/env bash
# Host integration tests (targets host/firewall) run the real nft inside a network namespace
# they create: nothing is loaded into the root namespace's ruleset. The rehearsal
# (internal/rig/rehearsal TestRehearsalFlow) measures each labbuild run's peak RSS with GNU time.
# A lab on several hosts pings the other hosts' underlay in host/preflight, and its tests send
# DF-set pings that fill the machine network's MTU (iputils' ping -M do).
# Idempotent.
set -euo pipefail
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  if ! command -v nft >/dev/null || [ ! -x /usr/bin/time ] || ! command -v ping >/dev/null; then
    if [ -z "${LABBUILD_APT_UPDATED:-}" ]; then
      apt-get update -qq
    fi
    # nftables only (the nft program); its systemd unit is not started here.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nftables time iputils-ping >/dev/null
  fi
else
  echo "install-host: not root: skipping Debian packages (host/firewall's nft test skips, or fails under CI=true)" >&2
fi
