#!/usr/bin/env bash
# PKI tests run Debian's etcd (mutual TLS on 127.0.0.1) and openssl verify.
set -euo pipefail
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends etcd-server etcd-client openssl >/dev/null
fi
