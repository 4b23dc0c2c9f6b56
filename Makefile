# Idem — see README.md. `make test` is what CI runs (.ci/run).
SHELL       := bash
.SHELLFLAGS := -eu -o pipefail -c
GO       ?= go
SEEDS    ?= 0
DURATION ?= 60s
# VERSION names the release binary's commit (idemd -version, the start-up log).
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo devel)

.PHONY: build test lint bench fault run

# The release binary bin/idemd: failpoints compiled out (GO_FAILPOINTS does
# nothing, pingcap/failpoint is not linked) and planted bugs absent. Also
# type-checks the whole module both ways.
build:
	$(GO) build ./...
	$(GO) build -tags nofailpoint ./...
	$(GO) build -tags nofailpoint -ldflags "-X main.stampedVersion=$(VERSION)" -o bin/idemd ./cmd/idemd

lint:
	$(GO) vet ./...
	$(GO) vet -tags idem_selftest ./...
	@out=$$(gofmt -l . ); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# vet + gofmt + the race-enabled test suite (short randomized runs), then the
# harness's planted-bug self-test, which exists only under -tags idem_selftest.
test: lint
	$(GO) build -tags nofailpoint ./...
	$(GO) test -race -count=1 -timeout 25m ./...
	$(GO) test -race -count=1 -timeout 10m -tags idem_selftest -run 'TestSelfTest' ./fault ./harness

# The release server (as `make build`) on an embedded data dir (./data),
# 127.0.0.1:8420.
run:
	$(GO) run -tags nofailpoint -ldflags "-X main.stampedVersion=$(VERSION)" ./cmd/idemd

bench:
	$(GO) run ./cmd/bench

# Randomized fault schedules: until SEEDS seeds or DURATION, whichever first
# (0 = no bound of that kind); ends with `fault: seeds=N ops=M failures=F`.
fault:
	$(GO) test -count=1 -timeout 0 ./harness -run 'TestFault$$' -fault.seeds=$(SEEDS) -fault.duration=$(DURATION) -v 2>&1 | grep -v '^time='
