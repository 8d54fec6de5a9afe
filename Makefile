# labbuild — see README.md. `make run` builds and runs the main job on the embedded default;
# `make check` installs what the tests need and runs them all (this is what CI runs).

GO       ?= go
# KUBE_VERSION is the Kubernetes of 4.18 (internal/rig/testenv Toolchains): the kube-apiserver the
# product tests start (testenv.Require through $LABBUILD_TOOLS); the rehearsal picks each
# release's own. `make install` builds every toolchain (.ci/build-kube.sh).
KUBE_VERSION ?= v1.31.13
export LABBUILD_TOOLS ?= $(HOME)/.cache/labbuild/tools/$(KUBE_VERSION)
BIN      := ./labbuild
# labbuild is the small front (cmd/labbuild: version, and a null build replayed from its
# stamp); it execs labbuild-full (cmd/labbuild-full) for everything else. Both static.
FULL     := ./labbuild-full

.PHONY: all build run sample test check install bench bench-go bench-build bench-ninja vet fmt clean docs fuzz rehearsal

all: build

# What `labbuild version` names (front.VersionString): the version (git describe: a tag, or
# devel) and the commit, "-modified" appended when the tree has changes. Go stamps the same in a
# checkout (vcs.revision); these are the fallback where it cannot (a git worktree,
# -buildvcs=false), so both binaries name the commit they were built from.
VERSION  ?= $(shell git describe --tags --dirty 2>/dev/null || echo devel)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD -- 2>/dev/null || echo -modified)
LDFLAGS  := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

build:
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(FULL) ./cmd/labbuild-full
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/labbuild

# The main job on the embedded default lab: every file artifact through Ignition, with the
# release payload taken from the sample OCI layout (see README: which parts are real).
run: build sample
	$(BIN) -f out/sample/lab.yaml

sample:
	$(GO) run ./cmd/labbuild-sample -out out/sample

# docs/graph.png and docs/families.png, embedded in the README: the sample lab built into
# out/docs, drawn by labbuild graph and Graphviz at 1600 px wide.
docs: build sample
	$(BIN) -f out/sample/lab.yaml -o out/docs -q
	$(BIN) -f out/sample/lab.yaml -o out/docs graph | dot -Tpng -Gdpi=96 -Gsize='16.67,100!' -o docs/graph.png
	$(BIN) -f out/sample/lab.yaml -o out/docs graph --all --by family | dot -Tpng -Gdpi=96 -Gsize='16.67,100!' -o docs/families.png

install:
	bash .ci/install.sh

test:
	$(GO) test -timeout 60m ./...

# install + test: the README's test command, and all that .ci/run does.
check: install vet test

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

# The rehearsal lab (docs/rehearsal.md): labbuild's node Ignition run without a guest OS, in
# network namespaces on 198.18.0.0/24 — the bootstrap's static pods with real etcd and
# kube-apiserver, a real kubelet joining, and TestRehearsalFlow: `labbuild cluster` from an
# empty directory to cluster/done, killed and rerun, destroyed twice. Needs root and what
# `make install` installs. REHEARSAL_RUN=TestRehearsalFlow runs only the flow.
REHEARSAL_RUN ?= .
rehearsal: build
	LABBUILD_REHEARSAL=1 LABBUILD_BIN=$(CURDIR)/labbuild $(GO) test -count=1 -v -timeout 75m -run '$(REHEARSAL_RUN)' ./internal/rig/rehearsal

# Fuzz the lab-config parser and validator (lab.FuzzConfig) for FUZZTIME; the seeds are the
# bad-config corpus in testdata/badconfig. A crash is saved under lab/testdata/fuzz.
FUZZTIME ?= 10m
fuzz:
	$(GO) test ./lab -run '^$$' -fuzz '^FuzzConfig$$' -fuzztime $(FUZZTIME)

# Every comparison against a reference (ninja, a hello-world binary, commit 5aace9f), as a table.
bench:
	bash scripts/bench.sh

# The Go benchmarks (engine null and incremental builds, PKI).
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m ./...

# The benchmark build: labbuild-bench (the front) over labbuild-bench-full, the full binary
# with the synthetic graph's flags (-tags bench; see docs/engine.md).
bench-build:
	CGO_ENABLED=0 $(GO) build -tags bench -ldflags '$(LDFLAGS)' -o ./labbuild-bench-full ./cmd/labbuild-full
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o ./labbuild-bench ./cmd/labbuild

bench-ninja: bench-build
	LABBUILD=$(CURDIR)/labbuild-bench bash scripts/bench-ninja.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN) $(FULL) ./labbuild-bench ./labbuild-bench-full out
