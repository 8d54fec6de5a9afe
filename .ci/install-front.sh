#!/usr/bin/env bash
# The front's differential test (cmd/labbuild-full TestFrontDifferential) also runs on a loop-mounted
# ext4 made with 128-byte inodes (whole-second timestamps): mkfs.ext4 from e2fsprogs, mount
# and losetup from mount/util-linux.
set -euo pipefail
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends e2fsprogs mount >/dev/null
fi
