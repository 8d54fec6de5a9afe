#!/usr/bin/env bash
# build-kube.sh [VERSION...]: builds the Kubernetes and etcd programs the rehearsal runs for each
# supported release, one module per version (the rig's table by release, internal/rig/testenv
# Toolchains, says which release runs which):
#   .ci/kube/<v>/  kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl
#   .ci/etcd/<v>/  etcd
# into ~/.cache/labbuild/tools/<v>/ (etcd into ~/.cache/labbuild/tools/etcd-<v>/), once per
# version: a program already there is not rebuilt. Without arguments it builds every version
# (what `make check` needs). Each Kubernetes set takes about 12-27 minutes cold on 2 shared cores
# (docs/rehearsal.md has the measured times); nothing when its programs are already there.
#
# Programs built from the module proxy report "v0.0.0-master+$Format:%H$" unless the build says
# its version, so the version packages are set by -ldflags as Kubernetes' own
# hack/lib/version.sh does: `kube-apiserver --version` and the kubelet's Node status say the
# version (etcd reports its own).
set -euo pipefail
ci=$(cd "$(dirname "$0")" && pwd)
root=${LABBUILD_TOOLS_ROOT:-$HOME/.cache/labbuild/tools}
versions=("$@")
if [ ${#versions[@]} = 0 ]; then
  for d in "$ci"/kube/*/ "$ci"/etcd/*/; do versions+=("$(basename "$d")"); done
fi
for v in "${versions[@]}"; do
  if [ -d "$ci/kube/$v" ]; then
    dest=$root/$v
    minor=${v#v1.}; minor=${minor%%.*}
    ld=""
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    done
    cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
    mod=$ci/kube/$v
    pkgof() { echo "k8s.io/kubernetes/cmd/$1"; }
  elif [ -d "$ci/etcd/$v" ]; then
    dest=$root/etcd-$v
    ld=""
    cmds=(etcd)
    mod=$ci/etcd/$v
    pkgof() { echo "go.etcd.io/etcd/server/v3"; }
  else
    echo "build-kube: no module for $v under .ci/kube or .ci/etcd (have: $(ls "$ci/kube" "$ci/etcd" | grep '^v' | tr '\n' ' '))" >&2
    exit 2
  fi
  mkdir -p "$dest"
  for cmd in "${cmds[@]}"; do
    if [ -x "$dest/$cmd" ]; then continue; fi
    echo "build-kube: building $cmd $v into $dest" >&2
    start=$(date +%s)
    (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$dest/$cmd.tmp" "$(pkgof "$cmd")")
    mv "$dest/$cmd.tmp" "$dest/$cmd"
    echo "build-kube: $cmd $v built in $(( $(date +%s) - start )) s" >&2
  done
  echo "$dest"
done
