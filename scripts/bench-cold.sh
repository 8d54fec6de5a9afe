#!/usr/bin/env bash
# bench-cold: a cold build of the sample lab (make sample) by this labbuild against a reference
# commit's (default 5aace9f, the issue-18 baseline), timed alternately in one run: wall, user+sys
# CPU and peak RSS of each, medians of RUNS (default 7) pairs, and the ratios. Every run starts
# from an empty output directory; both use the same sample lab.
# Then one more cold build of this labbuild, not timed, is profiled (LABBUILD_TIMES and
# LABBUILD_CPUPROFILE, cmd/labbuild-full/profile.go) for the breakdown by family: targets, CPU in
# labbuild's own process (pprof labels; the MCO stand-in's child processes are not in it) and
# busy time (the sum of each target's start-to-end wall time); the CPU of child processes (the MCO
# stand-in's bootstrap programs) is the "(programs)" row (LABBUILD_TIMES, getrusage RUSAGE_CHILDREN).
#   LABBUILD=./labbuild REF=5aace9f RUNS=7 bash scripts/bench-cold.sh   (RUNS=0: the breakdown only)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ref=${REF:-5aace9f}
runs=${RUNS:-7}
work=${WORK:-$(mktemp -d)}
[ -n "${WORK:-}" ] || trap 'rm -rf "$work"' EXIT
labbuild=${LABBUILD:-$root/labbuild}
[ -x "$labbuild" ] || (cd "$root" && CGO_ENABLED=0 go build -o "$labbuild" ./cmd/labbuild-full)
if [ ! -x "$work/ref/labbuild" ]; then
  mkdir -p "$work/ref/src"
  git -C "$root" archive "$ref" | tar -x -C "$work/ref/src"
  # The whole CLI was cmd/labbuild before the binaries were named as their folders (issue 34).
  full=./cmd/labbuild-full
  [ -d "$work/ref/src/cmd/labbuild-full" ] || full=./cmd/labbuild
  (cd "$work/ref/src" && CGO_ENABLED=0 go build -o "$work/ref/labbuild" "$full")
fi
# The 4.18 sample: the reference commit builds only 4.18.
[ -f "$work/sample/lab.yaml" ] || (cd "$root" && go run ./cmd/labbuild-sample -release 4.18 -out "$work/sample")
one() { # name binary: one cold build, appends "name wall user sys maxrss_kb" to times
  rm -rf "$work/out-$1"
  /usr/bin/time -f "$1 %e %U %S %M" -a -o "$work/times" "$2" -f "$work/sample/lab.yaml" -o "$work/out-$1" -q >/dev/null 2>"$work/err-$1" ||
    { echo "bench-cold: $1 build failed:" >&2; cat "$work/err-$1" >&2; exit 1; }
}
if ((runs > 0)); then
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
print(f"  ratio now/ref     wall {n['wall']/r['wall']:.2f}x  cpu {n['cpu']/r['cpu']:.2f}x  RSS {n['rss']/r['rss']:.2f}x  (goal: wall <= 0.4x, RSS <= 150 MiB)")
PY
fi
# The breakdown by family, from one profiled cold build of this labbuild.
rm -rf "$work/out-prof"
LABBUILD_TIMES="$work/times.tsv" LABBUILD_CPUPROFILE="$work/cpu.pprof" \
  /usr/bin/time -f "%e %U %S" -o "$work/time-prof" "$labbuild" -f "$work/sample/lab.yaml" -o "$work/out-prof" -q >/dev/null
(cd "$root" && go tool pprof -tags "$labbuild" "$work/cpu.pprof" 2>/dev/null) >"$work/tags" || :
python3 - "$work/times.tsv" "$work/tags" "$work/time-prof" <<'PY'
import collections, re, sys
busy, n, kids = collections.defaultdict(float), collections.Counter(), 0.0
for l in open(sys.argv[1]):
    m = re.match(r"# child processes: ([0-9]+) ms CPU", l)
    if m:
        kids = int(m.group(1)) / 1000
        continue
    name, start, end, _ = l.rstrip("\n").split("\t")
    fam = name.split("/")[0]
    busy[fam] += (int(end) - int(start)) / 1000
    n[fam] += 1
def secs(v):
    m = re.fullmatch(r"([0-9.]+)(ms|s)", v)
    return float(m.group(1)) / (1000 if m.group(2) == "ms" else 1) if m else 0.0
cpu, tagged, total, section = {}, 0.0, 0.0, None
for l in open(sys.argv[2]):
    h = re.match(r"\s*(\w+): Total ([0-9.]+m?s) of ([0-9.]+m?s)", l)
    if h:
        section = h.group(1)
        if section == "family":
            tagged, total = secs(h.group(2)), secs(h.group(3))
    elif section == "family":
        m = re.match(r"\s*([0-9.]+m?s) \(.*\): (\S+)", l)
        if m:
            cpu[m.group(2)] = secs(m.group(1))
wall, user, sys_ = map(float, open(sys.argv[3]).read().split())
print(f"cold build by family (one profiled run: wall {wall:.2f} s, cpu {user + sys_:.2f} s = {total:.2f} s in labbuild's profile + {kids:.2f} s in child processes + {user + sys_ - total - kids:.2f} s before the profile starts)")
print(f"  {'family':<12} {'targets':>7} {'cpu s':>7} {'busy s':>7}")
for fam in sorted(n, key=lambda f: (-cpu.get(f, 0), -busy[f])):
    print(f"  {fam:<12} {n[fam]:>7} {cpu.get(fam, 0):>7.2f} {busy[fam]:>7.2f}")
print(f"  {'(programs)':<12} {'':>7} {kids:>7.2f} {'':>7}   child processes: the MCO bootstrap programs (mco/*-bootstrap; their wall is in mco's busy)")
if total:
    print(f"  {'(no target)':<12} {'':>7} {total - tagged:>7.2f} {'':>7}   engine, GC, start-up after main's profile starts")
    print(f"  {'(start-up)':<12} {'':>7} {user + sys_ - total - kids:>7.2f} {'':>7}   before the profile starts (runtime, package initializers) and sampling error")
PY
