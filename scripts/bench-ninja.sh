#!/usr/bin/env bash
# bench-ninja: time labbuild's null build against ninja's on the same synthetic graphs
# (1,000 and 10,000 targets), with hyperfine. Needs Debian's ninja-build and hyperfine.
set -euo pipefail
labbuild=${LABBUILD:-$PWD/labbuild-bench}  # go build -tags bench (make bench-build)
for tool in ninja hyperfine; do
  command -v "$tool" >/dev/null || { echo "bench-ninja: $tool missing: apt-get install ninja-build hyperfine" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for n in ${SIZES:-1000 10000}; do
  d=$work/$n
  mkdir -p "$d/src"
  for ((i = 0; i < n; i++)); do echo "source $i" >"$d/src/$i.txt"; done
  "$labbuild" -C "$d" --synthetic "$n" --synthetic-ninja "$d/build.ninja"
  "$labbuild" -C "$d" --synthetic "$n" -q >/dev/null
  ninja -C "$d" >/dev/null
  test "$(du -sm "$d" | cut -f1)" -lt 500 || { echo "bench-ninja: $d grew past 500 MB" >&2; exit 1; }
  "$labbuild" -C "$d" --synthetic "$n" -q | grep -q "no work to do"
  ninja -C "$d" | grep -q "no work to do"
  hyperfine -N -w 5 -r "${RUNS:-30}" --export-json "$d/h.json" \
    -n "labbuild $n" "$labbuild -C $d --synthetic $n -q" \
    -n "ninja $n" "ninja -C $d" >&2
  python3 - "$d/h.json" "$n" <<'PY'
import json, sys
r = {x["command"].split()[0]: x["mean"] for x in json.load(open(sys.argv[1]))["results"]}
print(f"null build, {sys.argv[2]} targets: labbuild {r['labbuild']*1e3:.1f} ms, ninja {r['ninja']*1e3:.1f} ms, ratio {r['labbuild']/r['ninja']:.2f}x (goal <= 1.0x)")
PY
done
