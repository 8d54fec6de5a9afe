#!/usr/bin/env bash
# The front's property test at length (docs/how-it-works.md, "The front"): random sequences of
# the differential test's mutations and command lines, each replay compared with the full
# binary. STEPS (default 10000), SEED (default: the time; printed), FS=ext4-1s for a
# loop-mounted ext4 with whole-second timestamps (root). `go test` runs 300 steps.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-10000}
SEED=${SEED:-$(date +%s%N)}
LABBUILD_FRONT_STEPS=$STEPS LABBUILD_FRONT_SEED=$SEED LABBUILD_FRONT_FS=${FS:-} \
	go test -count=1 -timeout 120m -run '^TestFrontProperty$' -v ./cmd/labbuild-full | grep -E 'seed|PASS|FAIL|ok|front_diff'
