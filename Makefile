# ownerjournal — see README.md. The two set-up commands are `make demo` and
# `make test`; both install what they need (tmux, npm packages) or fail with a
# message that says what is missing.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
BIN := $(CURDIR)/bin

.PHONY: all build test vet fuzz prereqs tmux node unshare demo demo-tools reliability bench npm npm-lock node-projects
all: build

# CGO_ENABLED=0: a static binary starts about a millisecond faster (the net
# package would otherwise pull in cgo), which every `ownerjournal status` or
# `publish` from a test runner pays.
build:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./cmd/...

vet:
	test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt needed" >&2; exit 1; }
	$(GO) vet ./...
	GOOS=darwin $(GO) vet ./...

# tmux is a real prerequisite of the tests and the demo: install it when it is
# missing, fail loudly when that is impossible.
tmux:
	@command -v tmux >/dev/null 2>&1 || { \
	  echo "tmux not found: installing it with apt-get" >&2; \
	  { command -v apt-get >/dev/null 2>&1 && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null; } \
	  || { echo "error: tmux is required and could not be installed; install tmux and retry" >&2; exit 1; }; }

# Node.js 20+ with npm runs the Playwright project (e2e/ installs its npm
# packages from the lock file with npm ci).
node:
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 && command -v npx >/dev/null 2>&1 || { \
	  echo "node/npm not found: installing nodejs and npm with apt-get" >&2; \
	  { command -v apt-get >/dev/null 2>&1 && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; } \
	  || { echo "error: Node.js 20+ with npm is required by e2e/ (Playwright) and could not be installed" >&2; exit 1; }; }
	@node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' || { echo "error: Node.js 20 or later is required (found $$(node --version))" >&2; exit 1; }
	cd testdata/playwright && npm ci --no-audit --no-fund --prefer-offline >/dev/null

# unshare(1) (util-linux) starts the PID namespace tests' children in a
# namespace of their own.
unshare:
	@command -v unshare >/dev/null 2>&1 || { \
	  echo "unshare not found: installing util-linux with apt-get" >&2; \
	  { command -v apt-get >/dev/null 2>&1 && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq util-linux >/dev/null; } \
	  || { echo "error: unshare (util-linux) is required by the PID namespace tests and could not be installed" >&2; exit 1; }; }

# jq and curl are what the demo script drives the e2e server with: install
# them like tmux when missing, or fail saying which one and why.
demo-tools:
	@for t in jq curl; do command -v $$t >/dev/null 2>&1 && continue; \
	  echo "$$t not found: installing it with apt-get (make demo reads the server's JSON with jq and calls it with curl)" >&2; \
	  { command -v apt-get >/dev/null 2>&1 && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$t >/dev/null; } \
	  || { echo "error: $$t is required by make demo and could not be installed; install $$t and retry" >&2; exit 1; }; done

# The npm packages (see js/pack-npm.js): the helper with its `bin`, and one
# package per platform holding the binary, cross-compiled with
# CGO_ENABLED=0, as tarballs in dist/npm/. The version is
# js/ownerjournal/package.json's.
npm: node
	GO=$(GO) node js/pack-npm.js dist/npm

# The Jest and Vitest projects install the packed tarballs of `make npm`
# from their lock files (no Go toolchain needed to use them).
NODE_PROJECTS := testdata/jest testdata/vitest
node-projects: npm
	for d in $(NODE_PROJECTS); do (cd $$d && npm ci --no-audit --no-fund --prefer-offline >/dev/null); done

# After changing a Node project's package.json: new lock files, without
# the integrity of the local tarballs (see js/lock-local.js).
npm-lock: npm
	for d in $(NODE_PROJECTS); do (cd $$d && npm install --no-audit --no-fund >/dev/null) && node js/lock-local.js $$d/package-lock.json; done

prereqs: tmux node unshare node-projects

# The crash-and-recover story on the default root.
demo: tmux demo-tools build
	BIN=$(BIN) bash testdata/demo.sh

test: prereqs vet
	$(GO) test -race -count=1 ./...

# Every fuzz target of the module, FUZZTIME each.
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# The reliability and security suite with its figures (about 10-15 minutes):
# crash matrix x 50, 1,000 PID-reuse records, hostile inputs, 60 s of fuzzing
# per parser, a 60 s soak and 100 signal runs. Ends with the summary line.
reliability: prereqs
	$(GO) test -c -o $(BIN)/reliability.test ./reliability
	$(BIN)/reliability.test -test.run '^TestReliability$$' -test.timeout 30m -full

# Benchmarks side by side with the physical floors and the peers (npm
# tree-kill, a sequential 25 ms-polling reaper). Raw `go test -bench` output
# goes to bench/gobench.out (benchstat-friendly), the figures to
# bench/driver.out, one `bench: NAME = VALUE` line each.
bench: build node node-projects
	@command -v strace >/dev/null 2>&1 || { \
	  { command -v apt-get >/dev/null 2>&1 && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace >/dev/null; } \
	  || { echo "error: strace is required by make bench (fsync count) and could not be installed" >&2; exit 1; }; }
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./bench/cmd/benchdriver
	cd bench/node && npm ci --no-audit --no-fund >/dev/null
	$(GO) test -run '^$$' -bench '^Benchmark(OwnerCheck|OwnerOpen|GroupAlive|Admit|Encode|Decode|Publish|PublishFloor)$$' -benchmem -count 6 -benchtime 0.2s ./bench | tee bench/gobench.out
	$(GO) test -run '^$$' -bench '^Benchmark(Terminate|ExitConfirm|Scan|Classify|ScanFloor|RecoverStale|RecoverStaleFloor)$$' -benchmem -count 6 -benchtime 10x ./bench | tee -a bench/gobench.out
	$(BIN)/benchdriver -ownerjournal $(BIN)/ownerjournal -node bench/node | tee bench/driver.out
