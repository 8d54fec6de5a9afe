#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kubectl (the version .ci/kube/go.mod
# pins) into $LABBUILD_TOOLS, once per version: 5-10 minutes cold on 2 cores, nothing warm.
set -euo pipefail
cd "$(dirname "$0")/kube"
version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' go.mod)
dest=${LABBUILD_TOOLS:-$HOME/.cache/labbuild/tools/$version}
mkdir -p "$dest"
for cmd in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
  if [ -x "$dest/$cmd" ]; then continue; fi
  echo "build-kube: building $cmd $version into $dest" >&2
  CGO_ENABLED=0 go build -trimpath -o "$dest/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd"
  mv "$dest/$cmd.tmp" "$dest/$cmd"
done
echo "$dest"
