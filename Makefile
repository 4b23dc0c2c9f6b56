# Idem — see README.md. `make test` is what CI runs (.ci/run).
SHELL       := bash
.SHELLFLAGS := -eu -o pipefail -c
GO       ?= go
SEEDS    ?= 0
DURATION ?= 60s

.PHONY: build test lint bench fault run

build:
	$(GO) build ./...
	$(GO) build -tags nofailpoint ./...

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l . ); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# vet + gofmt + the race-enabled test suite (short randomized runs).
test: lint
	$(GO) build -tags nofailpoint ./...
	$(GO) test -race -count=1 -timeout 25m ./...

# The server on an embedded data dir (./data), 127.0.0.1:8420.
run:
	$(GO) run ./cmd/idemd

bench:
	$(GO) run ./cmd/bench

# Randomized fault schedules: until SEEDS seeds or DURATION, whichever first
# (0 = no bound of that kind); ends with `fault: seeds=N ops=M failures=F`.
fault:
	$(GO) test -count=1 -timeout 0 ./harness -run 'TestFault$$' -fault.seeds=$(SEEDS) -fault.duration=$(DURATION) -v 2>&1 | grep -v '^time='
