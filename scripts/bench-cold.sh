#!/usr/bin/env bash
# bench-cold: a cold build of the sample lab (make sample) by this labbuild against a reference
# commit's (default 5aace9f, the issue-18 baseline), timed alternately in one run: wall, user+sys
# CPU and peak RSS of each, medians of RUNS (default 7) pairs, and the ratios. Every run starts
# from an empty output directory; both use the same sample lab.
#   LABBUILD=./labbuild REF=5aace9f RUNS=7 bash scripts/bench-cold.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ref=${REF:-5aace9f}
runs=${RUNS:-7}
work=${WORK:-$(mktemp -d)}
[ -n "${WORK:-}" ] || trap 'rm -rf "$work"' EXIT
labbuild=${LABBUILD:-$root/labbuild}
[ -x "$labbuild" ] || (cd "$root" && CGO_ENABLED=0 go build -o "$labbuild" ./cmd/labbuild)
if [ ! -x "$work/ref/labbuild" ]; then
  mkdir -p "$work/ref/src"
  git -C "$root" archive "$ref" | tar -x -C "$work/ref/src"
  (cd "$work/ref/src" && CGO_ENABLED=0 go build -o "$work/ref/labbuild" ./cmd/labbuild)
fi
[ -f "$work/sample/lab.yaml" ] || (cd "$root" && go run ./cmd/labbuild-sample -out "$work/sample")
one() { # name binary: one cold build, appends "name wall user sys maxrss_kb" to times
  rm -rf "$work/out-$1"
  /usr/bin/time -f "$1 %e %U %S %M" -a -o "$work/times" "$2" -f "$work/sample/lab.yaml" -o "$work/out-$1" -q >/dev/null 2>"$work/err-$1" ||
    { echo "bench-cold: $1 build failed:" >&2; cat "$work/err-$1" >&2; exit 1; }
}
: >"$work/times"
one new "$labbuild"; one ref "$work/ref/labbuild" # warm the page cache; not counted
: >"$work/times"
for ((i = 0; i < runs; i++)); do one new "$labbuild"; one ref "$work/ref/labbuild"; done
python3 - "$work/times" "$ref" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
m = {}
for name in ("new", "ref"):
    r = [x for x in rows if x[0] == name]
    m[name] = dict(wall=statistics.median(float(x[1]) for x in r),
                   cpu=statistics.median(float(x[2]) + float(x[3]) for x in r),
                   rss=statistics.median(int(x[4]) for x in r) / 1024)
n, r = m["new"], m["ref"]
print(f"cold build, sample lab, median of {len([x for x in rows if x[0]=='new'])} alternating pairs:")
print(f"  labbuild now      wall {n['wall']:.2f} s  cpu {n['cpu']:.2f} s  peak RSS {n['rss']:.0f} MiB")
print(f"  labbuild {sys.argv[2]:<8} wall {r['wall']:.2f} s  cpu {r['cpu']:.2f} s  peak RSS {r['rss']:.0f} MiB")
print(f"  ratio now/ref     wall {n['wall']/r['wall']:.2f}x  cpu {n['cpu']/r['cpu']:.2f}x  (goal: wall <= 0.4x, RSS <= 150 MiB)")
PY
