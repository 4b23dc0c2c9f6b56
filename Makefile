# Idem — see README.md. `make test` is what CI runs (.ci/run).
GO       ?= go
SEEDS    ?= 20
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

fault:
	$(GO) test -count=1 -timeout 0 ./harness -run TestFault -fault.seeds=$(SEEDS) -fault.duration=$(DURATION) -v
