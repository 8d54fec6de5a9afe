#!/usr/bin/env bash
# bench-mirror: the release mirror's copy (mirror/release's code) of a 24-image payload into an
# empty real distribution registry, against `crane copy` of the same images and against the
# raw blob bytes over loopback, all in one run; then the second copy onto the full mirror.
# Needs docker-registry (.ci/install-mirror.sh) and crane (.ci/install-release.sh, in
# $LABBUILD_TOOLS). Appends its line to $BENCH_OUT.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
: "${LABBUILD_TOOLS:=$HOME/.cache/labbuild/tools/v1.31.13}"
export LABBUILD_TOOLS LABBUILD_MIRROR_BENCH=1
go test ./targets -run '^TestMirrorBench$' -count=1 -v -timeout 20m | grep '^BENCH-MIRROR: ' | sed 's/^BENCH-MIRROR: //'
