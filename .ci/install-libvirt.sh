#!/usr/bin/env bash
# Host-infrastructure tests (render/libvirt, render/haproxy, targets/virt, targets libvirt and
# haproxy families) run a real libvirtd with its network driver's dnsmasq inside a network
# namespace they create, virt-xml-validate, qemu-img, dig and haproxy. Idempotent.
#
# Not libvirt-daemon-system: it autostarts a NAT network on a 192.168.x address in the root
# namespace (../shared/notes/real-tools.md). Nothing is started here: the tests start their own
# libvirtd (internal/rig/testenv/libvirt.go) and haproxy, and no systemd runs on these machines.
set -euo pipefail
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  if [ -z "${LABBUILD_APT_UPDATED:-}" ]; then
    apt-get update -qq
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    libvirt-clients libvirt-daemon libvirt-daemon-driver-qemu libxml2-utils qemu-utils \
    qemu-system-x86 dnsmasq-base dnsutils iptables iproute2 haproxy >/dev/null
  # libvirtd started by hand wants these groups and user (the Debian package scripts of
  # libvirt-daemon-system would make them).
  getent group kvm >/dev/null || groupadd -r kvm
  getent group libvirt-qemu >/dev/null || groupadd -r libvirt-qemu
  getent passwd libvirt-qemu >/dev/null || useradd -r -g libvirt-qemu -G kvm -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
else
  echo "install-libvirt: not root: skipping Debian packages (libvirt/haproxy tests skip, or fail under CI=true)" >&2
fi

# A guest kernel and a static busybox for the test that boots a domain labbuild defined
# (targets/virt TestBootKernel). The kernel package is downloaded and unpacked, not installed
# (installing linux-image-amd64 would pull systemd and udev onto the host).
kdir="${LABBUILD_CACHE:-$HOME/.cache/labbuild}/test/kernel"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends busybox-static cpio >/dev/null
  if [ ! -s "$kdir/vmlinuz" ]; then
    pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')
    tmp=$(mktemp -d) && chmod 755 "$tmp"  # apt-get download runs as _apt
    (cd "$tmp" && apt-get download -q "$pkg" >/dev/null && dpkg-deb -x ./*.deb x)
    mkdir -p "$kdir"
    cp "$tmp"/x/boot/vmlinuz-* "$kdir/vmlinuz.tmp" && mv "$kdir/vmlinuz.tmp" "$kdir/vmlinuz"
    rm -rf "$tmp"
  fi
fi
