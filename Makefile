# Build, run and test the gateway.
#
#   make build           bin/gateway
#   make run             the gateway on the embedded store (./data) with demo series
#   make test            vet, unit tests, then integration tests against Cassandra
#   make cassandra-up    start the local single-node Cassandra (scripts/cassandra.sh)
#   make cassandra-down  stop it
#
# make test starts a local node for the integration tests unless one is already
# running (then it is reused and left running) or CASSANDRA_HOSTS is set (then
# that cluster is used and nothing is started or stopped). A node started by
# make test is stopped again, also when tests fail.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c

GO ?= go
CASSANDRA_NATIVE_PORT ?= 9042
export CASSANDRA_NATIVE_PORT
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: build run test vet unit-test integration-test cassandra-up cassandra-down

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
	@command -v node >/dev/null || scripts/install-node.sh
	node --test web/

integration-test:
	@if [ -n "$${CASSANDRA_HOSTS:-}" ]; then \
	  echo "integration tests against CASSANDRA_HOSTS=$$CASSANDRA_HOSTS"; \
	  $(GO) test -tags integration -count=1 ./integration/...; \
	  exit; \
	fi; \
	rc=0; scripts/cassandra.sh status >/dev/null 2>&1 || rc=$$?; \
	case $$rc in \
	  0) echo "using the running local Cassandra" ;; \
	  3) trap 'scripts/cassandra.sh stop' EXIT; trap 'exit 130' INT TERM; \
	     scripts/cassandra.sh start ;; \
	  *) scripts/cassandra.sh status; exit 1 ;; \
	esac; \
	port="$$(cat "$${CASSANDRA_HOME_CACHE:-.cassandra}/cassandra.port" 2>/dev/null || echo $(CASSANDRA_NATIVE_PORT))"; \
	CASSANDRA_HOSTS="127.0.0.1:$$port" $(GO) test -tags integration -count=1 ./integration/...

cassandra-up:
	scripts/cassandra.sh start

cassandra-down:
	scripts/cassandra.sh stop
