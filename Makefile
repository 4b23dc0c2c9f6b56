# Idem — see README.md. `make test` is what CI runs (.ci/run).
SHELL       := bash
.SHELLFLAGS := -eu -o pipefail -c
GO       ?= go
SEEDS    ?= 0
DURATION ?= 60s
# VERSION names the release binary's commit (idemd -version, the start-up log).
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo devel)
# The workspace (go.work): the library at the root, and cmd/bench, harness,
# contract and etcdtest (an embedded etcd cluster: the server is a test
# dependency), each a module of its own so that the root go.mod carries only
# what a program linking engine or receipt needs. From the root, ./... stops
# at a nested go.mod, so the targets name every module's tree.
MODULES  := . cmd/bench harness contract etcdtest sdk/go sdk/go/sdktest
PKGS     := $(subst ././,./,$(foreach m,$(MODULES),./$(m)/...))
# The layers whose whole test suites run a second time on the reference
# store (store/memstore, IDEM_TEST_STORE=memstore): tests that need what
# only engine.DB has (a crash that keeps what was fsynced, chaining) skip.
REFERENCE_PKGS := ./table ./twopc ./api
# contract checks what the other tests record: it runs after them.
RECORDING_PKGS := $(filter-out ./contract/...,$(PKGS))

.PHONY: build test lint bench fault run cluster generate generated-check

# The release binaries bin/idemd and bin/idemctl: failpoints compiled out (GO_FAILPOINTS does
# nothing, pingcap/failpoint is not linked) and planted bugs absent. Also
# type-checks every module both ways.
build:
	$(GO) build $(PKGS)
	$(GO) build -tags nofailpoint $(PKGS)
	$(GO) build -tags nofailpoint -ldflags "-X main.stampedVersion=$(VERSION)" -o bin/idemd ./cmd/idemd
	$(GO) build -tags nofailpoint -o bin/idemctl ./cmd/idemctl

# vet, gofmt, every module's go.mod tidy (go mod tidy ignores go.work), none
# of the bench's, the harness's, the contract's (kin-openapi) or etcdtest's
# (the etcd server) dependencies
# in the library's module graph, and no replace there (a replace applies only
# in the main module: a host importing Idem would build without it).
lint:
	$(GO) vet $(PKGS)
	$(GO) vet -tags idem_selftest $(PKGS)
	@out=$$(gofmt -l . ); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do (cd $$m && $(GO) mod tidy -diff) || { echo "$$m/go.mod is not tidy: (cd $$m && go mod tidy)"; exit 1; }; done
	@if GOWORK=off $(GO) list -m all | grep -E '^(github.com/jackc/pgx|gonum.org/v1/plot|github.com/HdrHistogram|github.com/anishathalye/porcupine|github.com/getkin/kin-openapi|github.com/santhosh-tekuri/jsonschema|github.com/gorilla/mux|go.yaml.in/yaml/v4|go.etcd.io/etcd/server/v3|go.etcd.io/etcd/pkg/v3|github.com/oapi-codegen) '; then \
		echo "the root go.mod requires a dependency of cmd/bench, harness or contract: it would enter every host's module graph"; exit 1; fi
	@if grep -nE '^[[:space:]]*replace([[:space:]]|\()' go.mod; then echo "the root go.mod has a replace: hosts do not get it"; exit 1; fi
	@if grep -nE '^[[:space:]]*(replace|tool)([[:space:]]|\()' sdk/go/go.mod; then echo "sdk/go/go.mod has a replace or a tool: its users would not get the one and would inherit the other"; exit 1; fi
	@if (cd sdk/go && GOWORK=off $(GO) list -deps -f '{{if .Module}}{{.Module.Path}}{{end}}' ./... | sort -u | grep -vxE 'github.com/idemdb/idem/sdk/go|github.com/oapi-codegen/runtime|github.com/google/uuid|github.com/apapsch/go-jsonmerge/v2'); then \
		echo "the Go SDK compiles a module beyond its runtime's (above): its users would get it"; exit 1; fi

# Every suite, each run whatever the others did (.ci/suites), so that one
# run reports every failing suite, then "test: N passed, M failed":
# lint (vet + gofmt + tidy), generated-check (the SDKs' generated files
# are fresh), the release build, the race-enabled test suite (short
# randomized runs), which records every HTTP exchange into a fresh
# directory (IDEM_CONTRACT_DIR, see internal/apitest), then the contract
# module's check of each record against api/openapi.yaml (it fails on a
# mismatch and on zero records), the planted-bug self-test (the harness's,
# api's forwarding rows and etcdtest's rows on etcd), which exists only
# under -tags idem_selftest, the table, 2PC and API
# suites again on the reference store, then the Python and TypeScript
# SDKs' tests (they build and start idemd), then the SDKs installed from
# scratch directories and the README run in order against one idemd
# (.ci/sdk-install), and the harness's fixed seeds without -race (under
# -race its TestFault runs half of them).
test: sdk/ts/node_modules
	@GO='$(GO)' PKGS='$(PKGS)' RECORDING_PKGS='$(RECORDING_PKGS)' REFERENCE_PKGS='$(REFERENCE_PKGS)' bash .ci/suites

# The release server (as `make build`) on an embedded data dir (./data),
# 127.0.0.1:8420.
run:
	$(GO) run -tags nofailpoint -ldflags "-X main.stampedVersion=$(VERSION)" ./cmd/idemd

# The SDKs' generated layers, from api/openapi.yaml (generated-check, run by
# make test, fails when one is stale). Go: oapi-codegen, pinned by the tool directive in
# sdk/go/sdktest/go.mod (not the SDK's: its users would inherit it); TypeScript: openapi-typescript, pinned in sdk/ts's
# package-lock.json. (Python has no generator here: its test holds its
# codes to the spec.)
OAPI_FLAGS := -package idemapi -generate types,client
generate: sdk/ts/node_modules
	cd sdk/go/sdktest && $(GO) tool oapi-codegen $(OAPI_FLAGS) -o ../idemapi/idemapi.gen.go ../../../api/openapi.yaml
	cd sdk/ts && npx openapi-typescript ../../api/openapi.yaml -o src/schema.ts && npm run --silent build

# What make test runs first: each generated file regenerated into a
# temporary directory and compared with the committed one, byte for byte;
# so is the TypeScript SDK's committed build (sdk/ts/dist/src, what
# `npm install --install-links sdk/ts` installs without building).
generated-check: sdk/ts/node_modules
	@d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
		(cd sdk/go/sdktest && $(GO) tool oapi-codegen $(OAPI_FLAGS) -o $$d/idemapi.gen.go ../../../api/openapi.yaml) && \
		(cd sdk/ts && npx openapi-typescript ../../api/openapi.yaml -o $$d/schema.ts >/dev/null) && \
		for f in sdk/go/idemapi/idemapi.gen.go sdk/ts/src/schema.ts; do \
			cmp -s $$d/$$(basename $$f) $$f || { echo "$$f is stale against api/openapi.yaml: make generate"; exit 1; }; \
		done && \
		(cd sdk/ts && npx tsc -p tsconfig.build.json --outDir $$d/ts) && \
		{ diff -r $$d/ts/src sdk/ts/dist/src >/dev/null || { echo "sdk/ts/dist/src is stale against sdk/ts/src: make generate"; exit 1; }; }
	@echo "generated files are fresh: sdk/go/idemapi/idemapi.gen.go, sdk/ts/src/schema.ts, sdk/ts/dist/src"

# npm ci when sdk/ts has no node_modules yet (a fresh clone without .ci/run).
sdk/ts/node_modules:
	cd sdk/ts && npm ci --no-audit --no-fund

# A cluster to try on this machine (docs/cluster.md): an embedded 3-member
# etcd and three idemd nodes on 127.0.0.1:8421-8423, until Ctrl-C. The
# nodes are the test build (failpoints compiled in, armed only by
# FAILPOINTS='node-1=receipt/decide-before=1*sleep(30000)', say). TLS=1:
# the nodes serve HTTPS and forward over it, with a CA and a certificate
# generated in cluster/tls; MTLS=1: client certificates required as well
# (one for curl in cluster/tls). SHARDS=2: two etcd clusters, each a store
# shard, and the nodes on the shard map written to cluster/shards.json.
# The tool prints the curl line to use.
FAILPOINTS ?=
TLS        ?=
MTLS       ?=
SHARDS     ?= 1
cluster:
	$(GO) build -o bin/idemd-dev ./cmd/idemd
	$(GO) build -o bin/idem-cluster ./etcdtest/cmd/idem-cluster
	bin/idem-cluster -idemd bin/idemd-dev -shards $(SHARDS) -failpoints '$(FAILPOINTS)' $(if $(filter 1,$(TLS)),-tls) $(if $(filter 1,$(MTLS)),-mtls)

bench:
	$(GO) run ./cmd/bench

# Randomized fault schedules: until SEEDS seeds or DURATION, whichever first
# (0 = no bound of that kind); ends with `fault: seeds=N ops=M failures=F`.
# Then the etcd variant (etcdtest's TestChaos_EtcdCluster: Idem nodes on
# an embedded 3-member etcd under member, link and node faults, porcupine-
# checked) for ETCD_SEEDS seeds of about 8 s each, and the process-level
# one (TestProcessChaos_Cluster: idemd processes SIGKILLed, the etcd leader
# stopped, a node cut off from etcd; TestProcessChaos_TwoShards: the same on
# two store shards) for PROC_SEEDS seeds of about 8 s each;
# make test runs 2 and 1.
ETCD_SEEDS ?= 8
PROC_SEEDS ?= 4
fault:
	$(GO) test -count=1 -timeout 0 ./harness -run 'TestFault$$' -fault.seeds=$(SEEDS) -fault.duration=$(DURATION) -v 2>&1 | grep -v '^time='
	$(GO) test -count=1 -timeout 0 ./etcdtest -run 'TestChaos_EtcdCluster$$' -chaos.seeds=$(ETCD_SEEDS) -v 2>&1 | grep -E '^(---|    chaos_test|ok|FAIL)'
	$(GO) test -count=1 -timeout 0 ./etcdtest -run 'TestProcessChaos_(Cluster|TwoShards)$$' -procchaos.seeds=$(PROC_SEEDS) -v 2>&1 | grep -E '^(---|    procchaos_test|ok|FAIL)'

# Mutation testing (docs/mutation.md): gremlins mutates the code of one
# package at a time and runs that package's tests against each mutant; a
# mutant that lives is a change no test notices. Slow (minutes a package on
# two cores): MUTATE_PKGS picks packages, MUTATE_BUDGET bounds each one,
# MUTATE_EFFICACY (a percent) fails a package whose kill rate is below it.
# An entry dir:file.go mutates that one file of the package (the others are
# excluded), still against the whole package's tests: table's run over every
# file did not finish in 18 minutes, and issue 42's mutants are in read.go.
# -count=1: a cached coverage run would set gremlins' per-mutant timeout
# (10x its time) below a build, and every mutant would time out.
MUTATE_PKGS     ?= receipt lease twopc wal store/etcd api:forward.go table:read.go
MUTATE_WORKERS  ?= 2
MUTATE_BUDGET   ?= 30m
MUTATE_EFFICACY ?=
GREMLINS        ?= github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0

mutate:
	@for p in $(MUTATE_PKGS); do \
		dir=$${p%%:*}; only=$${p#$$dir}; only=$${only#:}; exclude=; \
		if [ -n "$$only" ]; then \
			others=$$(cd $$dir && ls *.go | grep -v '_test\.go$$' | grep -vxF "$$only" | sed 's/\./\\./' | paste -sd'|'); \
			exclude="--exclude-files ^($$others)$$"; \
		fi; \
		echo "== mutate ./$$dir $$only (lived and timed-out mutants listed)"; \
		GOFLAGS="$${GOFLAGS:-} -count=1" timeout $(MUTATE_BUDGET) $(GO) run $(GREMLINS) unleash --workers $(MUTATE_WORKERS) --timeout-coefficient 10 \
			-S lt $$exclude $(if $(MUTATE_EFFICACY),--threshold-efficacy $(MUTATE_EFFICACY)) ./$$dir \
			|| { echo "mutate: ./$$p failed (exit $$?; 124 = over MUTATE_BUDGET $(MUTATE_BUDGET))"; exit 1; }; \
	done

.PHONY: mutate
