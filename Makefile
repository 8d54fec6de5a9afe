# labbuild — see README.md. `make run` builds and runs the main job on the embedded default;
# `make check` installs what the tests need and runs them all (this is what CI runs).

GO       ?= go
KUBE_VERSION ?= v1.30.14
export LABBUILD_TOOLS ?= $(HOME)/.cache/labbuild/tools/$(KUBE_VERSION)
BIN      := ./labbuild

.PHONY: all build run sample test check install bench bench-ninja vet fmt clean rehearsal

all: build

build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/labbuild

# The main job on the embedded default lab: every file artifact through Ignition, with the
# release payload taken from the sample OCI layout (see README: which parts are real).
run: build sample
	$(BIN) -f out/sample/lab.yaml

sample:
	$(GO) run ./cmd/labbuild-sample -out out/sample

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
# kube-apiserver, a real kubelet joining. Needs root and what `make install` installs.
rehearsal: build
	LABBUILD_BIN=$(CURDIR)/labbuild $(GO) test -count=1 -v -timeout 40m ./internal/rehearsal

bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m ./...

bench-ninja: build
	LABBUILD=$(CURDIR)/labbuild bash scripts/bench-ninja.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN) out
