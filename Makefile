# EventForge — see README.md. `make up` / `make down` manage the local
# services; `make test` runs every test against them.
SHELL := /bin/bash
GO ?= go
BIN := bin/eventforge
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# The integration tests share one PostgreSQL cluster and one broker; two
# packages at a time keep a 2-core machine responsive.
TEST_FLAGS ?= -race -count=1 -p 2 -timeout 15m

.PHONY: all build up down test vet unit fuzz demo clean chaos

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/eventforge

up:
	@deploy/local/up.sh

down:
	@deploy/local/down.sh

vet:
	$(GO) vet ./...

# Unit tests only: no local services needed.
unit:
	$(GO) test -short $(TEST_FLAGS) ./...

test: vet up
	$(GO) test $(TEST_FLAGS) ./...

demo: build up
	@deploy/local/demo.sh

clean: down
	rm -rf bin .eventforge

# Every fuzz target for FUZZTIME each (the seeds also run in make test).
FUZZTIME ?= 20s
fuzz:
	@set -e; for t in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for f in $$(grep -h '^func Fuzz' $$t/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
			echo "fuzz $$t $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$t; \
		done; \
	done

# Chaos run (issue 5) on PRIVATE services under .eventforge/chaos: load with
# labelled commit outcomes, SIGKILLs of relays and workers, broker and
# PostgreSQL restarts, then the lost/phantom/order/double-applied check.
# Not part of make test.
DURATION ?= 120s
chaos: build
	$(GO) run ./cmd/eventforge-chaos --bin $(BIN) --duration $(DURATION)
