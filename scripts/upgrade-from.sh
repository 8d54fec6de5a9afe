#!/usr/bin/env bash
# upgrade-from.sh [BASE]: set equality on upgrade (issue 24). Builds the sample lab (make run's)
# with the labbuild of commit BASE (default 2c1e7a3, main before issue 24), then with this tree's
# labbuild on the same output directory, and shows that
#   - every key and certificate BASE made is byte-identical afterwards (sticky keys, kept CAs);
#   - the targets that appear are exactly the ones this change adds (set equality);
#   - a third build has nothing to do.
# Exit 0 when all hold. Needs git and go; writes only under a temporary directory.
set -euo pipefail

base=${1:-2c1e7a3}
repo=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

want_new=(
  manifests/cluster/install-manifests
  manifests/cluster/kube-apiserver-client-signers
  manifests/cluster/kube-apiserver-rbac
  manifests/cluster/kubelet-signer
  manifests/cluster/service-account
  pki/bundle/kube-apiserver-client-ca
  pki/bundle/kubelet-client-ca
  pki/ca/kube-apiserver-to-kubelet-signer
  pki/ca/kubelet-signer
  pki/key/kube-apiserver-to-kubelet-signer
  pki/key/kubelet-signer
)

echo "building labbuild at $base and at the work tree"
mkdir -p "$tmp/old-src"
git -C "$repo" archive "$base" | tar -x -C "$tmp/old-src"
(cd "$tmp/old-src" && CGO_ENABLED=0 go build -o "$tmp/labbuild-old" ./cmd/labbuild-full && go run ./cmd/labbuild-sample -out "$tmp/sample" >/dev/null)
(cd "$repo" && CGO_ENABLED=0 go build -o "$tmp/labbuild-new" ./cmd/labbuild-full)

lab="$tmp/sample/lab.yaml"
out="$tmp/out"
targets() { # the targets that have outputs: <family>/<kind>/<id> directories holding files
  (cd "$out" && find pki manifests/cluster -mindepth 2 -type f -printf '%h\n' 2>/dev/null | sort -u)
}

"$tmp/labbuild-old" -f "$lab" -o "$out" -q
targets > "$tmp/targets-old"
(cd "$out" && find pki -type f \( -name tls.key -o -name tls.crt -o -name sa.pub \) -print0 | sort -z | xargs -0 sha256sum) > "$tmp/keys-old"
echo "base $base: $(wc -l < "$tmp/targets-old") pki and cluster-manifest targets, $(wc -l < "$tmp/keys-old") key and certificate files"

# What the new labbuild will run (its plan's "run" lines; the rest it restores from the content
# store byte for byte or keeps), then the build.
"$tmp/labbuild-new" -f "$lab" -o "$out" -n > "$tmp/plan.txt" 2>&1 || true
awk '$1 == "run" {print $2}' "$tmp/plan.txt" | sort > "$tmp/rebuilt"
"$tmp/labbuild-new" -f "$lab" -o "$out" > "$tmp/new.log" 2>&1
targets > "$tmp/targets-new"
echo "this tree: $(tail -1 "$tmp/new.log")"
echo "  ran: $(tr '\n' ' ' < "$tmp/rebuilt")"

fail=0
if (cd "$out" && sha256sum --quiet -c "$tmp/keys-old"); then
  echo "ok: all $(wc -l < "$tmp/keys-old") keys and certificates of $base are byte-identical"
else
  echo "FAIL: a key or certificate of $base changed"; fail=1
fi
comm -13 "$tmp/targets-old" "$tmp/targets-new" > "$tmp/added"
comm -23 "$tmp/targets-old" "$tmp/targets-new" > "$tmp/removed"
printf '%s\n' "${want_new[@]}" | sort > "$tmp/want"
if cmp -s "$tmp/added" "$tmp/want" && [ ! -s "$tmp/removed" ]; then
  echo "ok: the new targets are exactly: $(tr '\n' ' ' < "$tmp/added")"
else
  echo "FAIL: added targets differ from the expected set"; diff "$tmp/want" "$tmp/added" || true
  [ -s "$tmp/removed" ] && { echo "removed:"; cat "$tmp/removed"; }
  fail=1
fi
# Besides the new targets, exactly what embeds them or whose recipe changed: the two bootstrap
# static pods (kubelet signer flags), the bootstrap manifests collector, the MCO render (its
# --kube-ca is pki/bundle/kubelet-client-ca) and every node's Ignition.
printf '%s\n' "${want_new[@]}" manifests/bootstrap manifests/static-pods/kube-apiserver \
  manifests/static-pods/kube-controller-manager mco/inputs mco/operator-bootstrap mco/controller-bootstrap \
  mco/base/master mco/base/worker ignition/bootstrap ignition/master-0 ignition/master-1 ignition/master-2 \
  ignition/worker-0 ignition/worker-1 | sort > "$tmp/want-rebuilt"
if cmp -s "$tmp/rebuilt" "$tmp/want-rebuilt"; then
  echo "ok: ran exactly the new targets, the two bootstrap static pods, manifests/bootstrap, the MCO render and the Ignition configs ($(wc -l < "$tmp/rebuilt") targets)"
else
  echo "FAIL: rebuilt set differs"; diff "$tmp/want-rebuilt" "$tmp/rebuilt" || true; fail=1
fi
third=$("$tmp/labbuild-new" -f "$lab" -o "$out" 2>&1 | tail -1)
case $third in
  *"no work to do"*) echo "ok: third build: $third" ;;
  *) echo "FAIL: third build: $third"; fail=1 ;;
esac
exit $fail
