#!/usr/bin/env bash
# Issue 24's evidence beyond the stand-ins: build the real release-4.18
# cluster-kube-apiserver-operator and cluster-kube-controller-manager-operator from their
# sources and run them as processes against a real kube-apiserver v1.31.13 (with Debian's etcd)
# holding labbuild's handover, then report their status conditions (targets/realops_test.go
# TestRealOperators does the lab build, the apply and the watching). Not run by CI: CI cannot
# fetch the operators' sources. docs/past-the-pivot.md "Checked against the real 4.18
# operators" has what it found.
#
#   scripts/real-operators.sh                 # whole handover, then issue 24's items withheld one at a time
#   scripts/real-operators.sh '' sa-token-signing-certs csr-signer-signer,csr-controller-ca
#                                             # each argument one run: handover files (substrings of
#                                             # manifests/bootstrap manifests/*.yaml names, comma-separated)
#                                             # withheld; '' is the whole handover
#
# Environment:
#   REALOPS          work directory (default /tmp/realops): source trees, bin/, reports/
#   KAS_GIT, KCM_GIT bare git directories of openshift/cluster-kube-apiserver-operator and
#                    openshift/cluster-kube-controller-manager-operator (e.g. what the fetch tool
#                    returns); their release-4.18 tree is unpacked into $REALOPS/<repo> when that
#                    directory is missing, and its commit written to $REALOPS/<repo>.commit
#   BRANCH           default release-4.18
#   SECONDS_PER_RUN  how long the operators run each time (default 180)
#   LABBUILD_TOOLS   the kube-apiserver v1.31.13 (default ~/.cache/labbuild/tools/v1.31.13)
set -euo pipefail

REALOPS=${REALOPS:-/tmp/realops}
BRANCH=${BRANCH:-release-4.18}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-180}
export LABBUILD_TOOLS=${LABBUILD_TOOLS:-$HOME/.cache/labbuild/tools/v1.31.13}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$REALOPS/bin" "$REALOPS/reports"

# Sources: the operators vendor their dependencies, so they build offline.
unpack() { # repo gitdir
	local repo=$1 git=$2
	[ -d "$REALOPS/$repo" ] && return
	[ -n "$git" ] || { echo "real-operators: no $REALOPS/$repo; set its bare git directory (KAS_GIT/KCM_GIT)" >&2; exit 2; }
	mkdir -p "$REALOPS/$repo"
	git --git-dir="$git" archive "$BRANCH" | tar -x -C "$REALOPS/$repo"
	git --git-dir="$git" rev-parse "$BRANCH" >"$REALOPS/$repo.commit"
}
unpack cluster-kube-apiserver-operator "${KAS_GIT:-}"
unpack cluster-kube-controller-manager-operator "${KCM_GIT:-}"

# Build with the local Go (go.mod says go 1.22; a newer toolchain builds it) from vendor/.
for repo in cluster-kube-apiserver-operator cluster-kube-controller-manager-operator; do
	bin=$REALOPS/bin/$repo
	[ -x "$bin" ] && continue
	echo "real-operators: building $repo ($(cat "$REALOPS/$repo.commit" 2>/dev/null || echo 'commit unknown'))"
	(cd "$REALOPS/$repo" && GOTOOLCHAIN=local GOFLAGS=-mod=vendor CGO_ENABLED=0 nice -n 10 go build -o "$bin" "./cmd/$repo")
done

# The runs: with no arguments, the whole handover and then each object of issue 24's items
# 1-4 (and the install-manifests ConfigMap of item 5) withheld alone.
runs=("$@")
if [ ${#runs[@]} -eq 0 ]; then
	runs=("" sa-token-signing-certs initial-service-account-private-key next-bound-service-account-signing-key
		csr-signer-signer csr-controller-ca -kube-apiserver.yaml openshift-install-manifests)
fi
cd "$root"
status=0
for w in "${runs[@]}"; do
	label=${w:-whole-handover}
	label=${label//[^A-Za-z0-9_.-]/_}
	report=$REALOPS/reports/$label.txt
	echo "real-operators: run '$label' (${SECONDS_PER_RUN}s) -> $report"
	LABBUILD_REAL_OPERATORS=$REALOPS LABBUILD_REAL_OPERATORS_WITHHOLD=$w \
		LABBUILD_REAL_OPERATORS_SECONDS=$SECONDS_PER_RUN LABBUILD_REAL_OPERATORS_REPORT=$report \
		nice -n 10 go test ./targets -run '^TestRealOperators$' -count=1 -timeout 30m >"$REALOPS/reports/$label.test.log" 2>&1 || {
		status=1
		echo "real-operators: run '$label' failed; see $REALOPS/reports/$label.test.log" >&2
	}
	[ -f "$report" ] && sed -n '/^events/,/^final state/p' "$report"
done
exit $status
