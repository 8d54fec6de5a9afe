#!/usr/bin/env bash
# The release mirror (targets/mirror.go) runs the CNCF distribution registry: Debian's
# docker-registry package (distribution 2.8.2; docs/mirror.md says why not a v3 build).
# labbuild starts its own registry processes; the package's system service, which would take
# port 5000 with its own config, is disabled.
set -euo pipefail
if ! command -v docker-registry >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-mirror: not root: skipping docker-registry (mirror tests skip, or fail under CI=true)" >&2
    exit 0
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker-registry >/dev/null
fi
if [ "$(id -u)" = 0 ] && [ -d /run/systemd/system ]; then
  systemctl disable --now docker-registry >/dev/null 2>&1 || true
fi
docker-registry --version >/dev/null
