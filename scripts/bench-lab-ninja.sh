#!/usr/bin/env bash
# bench-lab-ninja: the null build of a real lab (default: the sample lab, make sample; the
# default lab's graph on an offline payload) against ninja's on a build.ninja of the same shape,
# written from `labbuild graph --format json` (the default goal): one build edge per
# target, reading one source file (its inputs' stand-in) and its upstream targets' outputs.
# Side by side in one hyperfine run; prints wall, CPU and the ratios. labbuild is the front
# (make build: labbuild over labbuild-full), run as a user runs it: the null builds before the
# timed runs leave the stamp it replays (checked).
#   LABBUILD=./labbuild LAB=out/sample/lab.yaml bash scripts/bench-lab-ninja.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
labbuild=${LABBUILD:-$root/labbuild}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lab=${LAB:-}
if [ -z "$lab" ]; then
  (cd "$root" && go run ./cmd/labbuild-sample -out "$work/sample") >/dev/null
  lab=$work/sample/lab.yaml
fi
out=$work/out
"$labbuild" -f "$lab" -o "$out" -q >/dev/null
"$labbuild" -f "$lab" -o "$out" -q | grep -q "no work to do" || { echo "bench-lab-ninja: the second build did work" >&2; exit 1; }
for _ in 1 2 3; do # the front must replay: past cache.RacyWindow (2 s) no file is racy
  sleep 2.1
  why=$(LABBUILD_FRONT=explain "$labbuild" -f "$lab" -o "$out" -q 2>&1 >/dev/null | grep "front:" || true)
  [ -z "$why" ] && break
done
[ -z "$why" ] || { echo "bench-lab-ninja: the front does not replay the null build: $why" >&2; exit 1; }
"$labbuild" -f "$lab" -o "$out" graph --format json >"$work/graph.json"
mkdir -p "$work/nj/src"
python3 - "$work/graph.json" "$work/nj" <<'PY'
import json, os, sys
g, d = json.load(open(sys.argv[1])), sys.argv[2]
o = lambda n: "out/" + n + "/out.txt"
with open(os.path.join(d, "build.ninja"), "w") as f:
    f.write("rule syn\n  command = sha256sum $in > $out\n\n")
    for n in g:
        src = "src/" + n["name"].replace("/", "_") + ".txt"
        open(os.path.join(d, src), "w").write(n["name"] + "\n")
        f.write(f"build {o(n['name'])}: syn {src} {' '.join(o(x) for x in n['deps'])}\n")
print(f"{len(g)} targets", file=sys.stderr)
PY
ninja -C "$work/nj" >/dev/null
ninja -C "$work/nj" | grep -q "no work to do"
hyperfine -N -w 3 -r "${RUNS:-30}" --export-json "$work/h.json" \
  -n labbuild "$labbuild -f $lab -o $out -q" -n ninja "ninja -C $work/nj" >&2
n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$work/graph.json")
python3 - "$work/h.json" "$n" <<'PY' | tee -a "${BENCH_OUT:-/dev/null}"
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
l, n = r["labbuild"], r["ninja"]
cpu = lambda x: x["user"] + x["system"]
print(f"null build, sample lab ({sys.argv[2]} targets) vs same-shape ninja: labbuild {l['median']*1e3:.1f} ms ({cpu(l)*1e3:.1f} ms CPU), "
      f"ninja {n['median']*1e3:.1f} ms ({cpu(n)*1e3:.1f} ms CPU); ratio wall {l['median']/n['median']:.2f}x cpu {cpu(l)/cpu(n):.2f}x (goal <= 1.5x)")
PY
