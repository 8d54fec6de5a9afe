#!/usr/bin/env bash
# bench-startup: `labbuild version` against a hello-world Go binary built by the same toolchain,
# side by side in one hyperfine run (wall medians, and CPU time user+sys, which a loaded machine
# distorts less), and the package initializers labbuild runs before main
# (GODEBUG=inittrace=1): their count, total time and the five slowest. $LABBUILD is what users
# run, the front (make build), which answers version itself; the full binary beside it
# (labbuild-full, cmd/labbuild-full) is timed too, for the record.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
labbuild=${LABBUILD:-$root/labbuild}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/hello"
printf 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n' >"$work/hello/main.go"
printf 'module hello\n\ngo 1.22\n' >"$work/hello/go.mod"
(cd "$work/hello" && CGO_ENABLED=0 go build -o "$work/hello-bin" .)
full=${LABBUILD_FULL:-$labbuild-full}
hyperfine -N -w 5 -r "${RUNS:-50}" --export-json "$work/h.json" -n labbuild "$labbuild version" -n hello "$work/hello-bin" \
  -n full "$full version" >&2
GODEBUG=inittrace=1 "$labbuild" version 2>"$work/trace" >/dev/null
python3 - "$work/h.json" "$work/trace" <<'PY' | tee -a "${BENCH_OUT:-/dev/null}"
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
l, h, fb = r["labbuild"], r["hello"], r["full"]
inits = []
for line in open(sys.argv[2]):
    f = line.split()
    if f and f[0] == "init":  # init PKG @T ms, D ms clock, B bytes, A allocs
        inits.append((float(f[4]), f[1]))
inits.sort(reverse=True)
top = ", ".join(f"{p} {t:.1f}" for t, p in inits[:5])
cpu = lambda x: (x["user"] + x["system"]) * 1e3
print(f"start-up: labbuild version {l['median']*1e3:.1f} ms, hello-world Go {h['median']*1e3:.1f} ms, ratio {l['median']/h['median']:.2f}x (goal <= 2x); "
      f"CPU {cpu(l):.1f} ms vs {cpu(h):.1f} ms, {cpu(l)/cpu(h):.2f}x; "
      f"{len(inits)} package inits, {sum(t for t, _ in inits):.1f} ms; slowest (ms): {top}; "
      f"the full binary (labbuild-full version) {fb['median']*1e3:.1f} ms, {fb['median']/h['median']:.2f}x")
PY
