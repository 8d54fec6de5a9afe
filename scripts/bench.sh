#!/usr/bin/env bash
# bench: every labbuild benchmark that compares against a reference in one run (make bench):
# start-up, the synthetic null build against ninja at each size, the sample lab's null build
# against a same-shape ninja file, and the sample lab's cold build against commit $REF. Prints
# the lines as a table with the date and the machine, for docs/performance.md and the README.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export BENCH_OUT
BENCH_OUT=$(mktemp)
trap 'rm -f "$BENCH_OUT"' EXIT
cd "$root"
make build bench-build # labbuild (the front) + labbuild-full; labbuild-bench + labbuild-bench-full
LABBUILD=$root/labbuild bash scripts/bench-startup.sh
LABBUILD=$root/labbuild-bench bash scripts/bench-ninja.sh
LABBUILD=$root/labbuild bash scripts/bench-lab-ninja.sh
LABBUILD=$root/labbuild bash scripts/bench-cold.sh | tee -a "$BENCH_OUT"
bash scripts/bench-mirror.sh # appends its own line
echo
echo "## labbuild benchmarks, $(date -u +%Y-%m-%d), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
sed 's/^/- /' "$BENCH_OUT"
