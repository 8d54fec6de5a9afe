#!/usr/bin/env bash
# Optional tool of the release payload benchmark (targets/oci BenchmarkExtract/crane): crane,
# go-containerregistry's CLI at the version go.mod pins, built into $LABBUILD_TOOLS.
# Nothing else is needed: the release family pulls with go-containerregistry as a library.
set -euo pipefail
: "${LABBUILD_TOOLS:=$HOME/.cache/labbuild/tools/v1.31.13}"
mkdir -p "$LABBUILD_TOOLS"
if [ ! -x "$LABBUILD_TOOLS/crane" ]; then
  GOBIN="$LABBUILD_TOOLS" CGO_ENABLED=0 go install github.com/google/go-containerregistry/cmd/crane@v0.22.1
fi
"$LABBUILD_TOOLS/crane" version >/dev/null
