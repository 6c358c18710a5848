# Build, run and test the gateway.
#
#   make build           bin/gateway
#   make run             the gateway on the embedded store (./data) with demo series
#   make test            vet, unit tests, then integration tests against Cassandra
#   make bench           benchmarks: embedded-store and encoding ones, then the ones
#                        against Cassandra (docs/benchmarks.md; BENCH_ARGS passes
#                        flags such as -bench.rounds=9 to the latter)
#   make cassandra-up    start the local single-node Cassandra (scripts/cassandra.sh)
#   make cassandra-down  stop it
#
# make test and make bench start a local node for what runs against Cassandra
# unless one is already running (then it is reused and left running) or
# CASSANDRA_HOSTS is set (then that cluster is used and nothing is started or
# stopped). A node they started is stopped again, also when tests fail
# (scripts/cassandra.sh run).

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c

GO ?= go
CASSANDRA_NATIVE_PORT ?= 9042
export CASSANDRA_NATIVE_PORT
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

BENCH_ARGS ?=

.PHONY: build run test vet unit-test integration-test bench cassandra-up cassandra-down

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/gateway ./cmd/gateway

run:
	$(GO) run -ldflags "-X main.version=$(VERSION)" ./cmd/gateway serve --demo --data-dir data

test: vet unit-test integration-test

vet:
	$(GO) vet ./...
	$(GO) vet -tags integration ./integration/...

unit-test:
	$(GO) test ./...

integration-test:
	scripts/cassandra.sh run $(GO) test -tags integration -count=1 ./integration/...

# Benchmarks never run in make test. The ones against Cassandra run once
# (-benchtime 1x): each runs its own interleaved rounds and reports medians.
bench:
	$(GO) test -run '^$$' -bench 'EncodePoints|ReadMemory|DecodeJSON|Merge|Write|ReadPartition' -benchmem \
	  ./httpapi/ ./ingest/ ./merge/ ./tiers/embedded/
	scripts/cassandra.sh run $(GO) test -tags integration -run '^$$' -bench . -benchtime 1x -timeout 60m \
	  ./integration/ $(if $(BENCH_ARGS),-args $(BENCH_ARGS))

cassandra-up:
	scripts/cassandra.sh start

cassandra-down:
	scripts/cassandra.sh stop
