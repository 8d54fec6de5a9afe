#!/usr/bin/env bash
# bench-ninja: labbuild's null build against ninja's on the same synthetic graphs (SIZES, default
# 100 1,000 10,000 100,000 targets), side by side in one hyperfine run: wall, user+sys CPU, and
# peak RSS. Needs Debian's ninja-build and hyperfine (.ci/install.sh) and the benchmark build of
# labbuild (make bench-build): labbuild-bench, the front users run as labbuild, over
# labbuild-bench-full (go build -tags bench), which has the --synthetic flags. labbuild is run
# as a user runs it: the first null build execs the full binary, which leaves the stamp the
# front replays from then on (docs/how-it-works.md, "The front"); the script checks that the
# timed runs are replays.
#
# Up to NINJA_RUN_MAX targets (default 10,000) ninja builds its tree itself. Past that, spawning
# a sha256sum per target takes longer than the benchmark, so the script writes ninja's outputs
# and .ninja_log directly, as ninja would (same contents, the log's MurmurHash64A command hashes
# and nanosecond mtimes); `ninja` then reports no work to do, which the script checks. At the
# smallest size both ways are done and must give byte-identical outputs.
#
# BENCH_DIR=dir keeps each size's tree in dir/<N> instead of a temporary directory, and reuses a
# tree that is already there (labbuild's and ninja's null builds must both report no work): the
# labbuild side of the 100,000-target setup is a cold build of 100,000 targets (about 11 minutes
# on 2 loaded cores), worth doing once.
#
# Output: one line per size, "null build N targets: labbuild W ms (C ms CPU, R MiB), ninja ...,
# ratio wall Xx cpu Yx rss Zx", also appended to $BENCH_OUT when set (make bench's table).
set -euo pipefail
labbuild=${LABBUILD:-$PWD/labbuild-bench}  # the front over labbuild-bench-full (make bench-build)
for tool in ninja hyperfine python3; do
  command -v "$tool" >/dev/null || { echo "bench-ninja: $tool missing: apt-get install ninja-build hyperfine python3" >&2; exit 2; }
done
"$labbuild" --help 2>&1 | grep -q -- --synthetic || "$labbuild" --synthetic 1 --synthetic-ninja /dev/null 2>/dev/null ||
  { echo "bench-ninja: $labbuild has no --synthetic flag: build it with make bench-build (-tags bench)" >&2; exit 2; }
if [ -n "${BENCH_DIR:-}" ]; then
  work=$BENCH_DIR
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
here=$(cd "$(dirname "$0")" && pwd)

# ninja_direct DIR: write build.ninja's outputs and .ninja_log as ninja 1.11 would.
ninja_direct() {
  python3 "$here/ninja-direct.py" "$1"
}

sizes=${SIZES:-100 1000 10000 100000}
smallest=$(echo $sizes | tr ' ' '\n' | sort -n | head -1)
for n in $sizes; do
  d=$work/$n
  if [ -n "${BENCH_DIR:-}" ] && [ -f "$d/.ninja_log" ] && [ -f "$d/out/.labbuild/state" ] &&
    "$labbuild" -C "$d" --synthetic "$n" -q | grep -q "no work to do" && ninja -C "$d" | grep -q "no work to do"; then
    echo "bench-ninja: reusing $d" >&2
  else
    rm -rf "$d"
    mkdir -p "$d/src"
    python3 -c "
import sys
for i in range(int(sys.argv[1])):
    open(f'{sys.argv[2]}/src/{i}.txt', 'w').write(f'source {i}\n')" "$n" "$d"
    "$labbuild" -C "$d" --synthetic "$n" --synthetic-ninja "$d/build.ninja"
    "$labbuild" -C "$d" --synthetic "$n" -q >/dev/null
    if [ "$n" -le "${NINJA_RUN_MAX:-10000}" ]; then
      ninja -C "$d" >/dev/null
      if [ "$n" = "$smallest" ]; then # the direct writer must agree with ninja byte for byte
        mkdir -p "$work/check/src" && cp "$d/build.ninja" "$work/check/" && cp "$d"/src/* "$work/check/src/"
        ninja_direct "$work/check"
        diff -r "$d/out-ninja" "$work/check/out-ninja" >/dev/null || { echo "bench-ninja: direct ninja outputs differ from ninja's" >&2; exit 1; }
        ninja -C "$work/check" | grep -q "no work to do" || { echo "bench-ninja: ninja does not accept the direct .ninja_log" >&2; exit 1; }
        rm -rf "$work/check"
      fi
    else
      ninja_direct "$d"
    fi
    # Disk: a source, an output, a store copy and ninja's output per target (4 KiB blocks each),
    # plus state and logs: 64 KiB a target is a generous bound that still catches runaway growth.
    limit=$((64 + n * 64 / 1024))
    used=$(du -sm "$d" | cut -f1)
    [ "$used" -lt "$limit" ] || { echo "bench-ninja: $d grew to $used MB, past $limit MB" >&2; exit 1; }
  fi
  "$labbuild" -C "$d" --synthetic "$n" -q | grep -q "no work to do" || { echo "bench-ninja: labbuild null build did work" >&2; exit 1; }
  ninja -C "$d" | grep -q "no work to do" || { echo "bench-ninja: ninja null build did work" >&2; exit 1; }
  # The stamp: a null build by the full binary, then the front must replay it. A file changed
  # within cache.RacyWindow (2 s) of a run is racy: its bytes are hashed until the front settles
  # the stamp, so wait past the window, as a user between commands.
  for _ in 1 2 3; do
    sleep 2.1
    why=$(LABBUILD_FRONT=explain "$labbuild" -C "$d" --synthetic "$n" -q 2>&1 >/dev/null | grep "front:" || true)
    [ -z "$why" ] && break
  done
  [ -z "$why" ] || { echo "bench-ninja: the front does not replay the null build: $why" >&2; exit 1; }
  runs=${RUNS:-$((n >= 100000 ? 10 : 30))}
  hyperfine -N -w 3 -r "$runs" --export-json "$d/h.json" \
    -n "labbuild" "$labbuild -C $d --synthetic $n -q" \
    -n "ninja" "ninja -C $d" >&2
  rss_l=$( { /usr/bin/time -f %M "$labbuild" -C "$d" --synthetic "$n" -q >/dev/null; } 2>&1 | tail -1)
  rss_n=$( { /usr/bin/time -f %M ninja -C "$d" >/dev/null; } 2>&1 | tail -1)
  python3 - "$d/h.json" "$n" "$rss_l" "$rss_n" <<'PY' | tee -a "${BENCH_OUT:-/dev/null}"
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
l, n = r["labbuild"], r["ninja"]
cpu = lambda x: x["user"] + x["system"]
rl, rn = int(sys.argv[3]) / 1024, int(sys.argv[4]) / 1024
print(f"null build {int(sys.argv[2]):>6} targets: labbuild {l['median']*1e3:7.1f} ms ({cpu(l)*1e3:6.1f} ms CPU, {rl:5.1f} MiB), "
      f"ninja {n['median']*1e3:7.1f} ms ({cpu(n)*1e3:6.1f} ms CPU, {rn:5.1f} MiB); "
      f"ratio wall {l['median']/n['median']:.2f}x cpu {cpu(l)/cpu(n):.2f}x rss {rl/rn:.2f}x")
PY
  [ -n "${BENCH_DIR:-}" ] || rm -rf "$d"
done
