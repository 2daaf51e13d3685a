SHELL := /bin/bash
# recap — see README.md. Builds share one target dir outside the clone so that later
# runs (and CI on the same machine) reuse what was built.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/recap/target
CARGO ?= cargo
RECAP_DEBUG := $(CARGO_TARGET_DIR)/debug/recap
RECAP_RELEASE := $(CARGO_TARGET_DIR)/release/recap

.PHONY: run build test test-clients lint bench schemas docs toolchain up down down-purge k8s-validate otelcol

## run: build recap and start the embedded edition with a demo world
run: toolchain
	$(CARGO) build --release --bin recap
	$(RECAP_RELEASE) serve --demo

## build: a debug build of every crate of the workspace, the recap binary included
build: toolchain
	$(CARGO) build --workspace

## test: the whole suite: the embedded edition (unit, property and black-box tests
## against the real binary, real MCP clients), then the distributed edition on the real
## engines (started by `make up`): driver semantics, the same black-box suites, faults
test: toolchain
	scripts/test.sh

## test-clients: only the real MCP clients (Python SDK, TypeScript SDKs, MCP Inspector CLI, headless Chromium) against the binary
test-clients: toolchain
	scripts/setup-python.sh >/dev/null
	scripts/setup-python.sh --sdk1 >/dev/null
	scripts/setup-node.sh >/dev/null
	scripts/setup-browser.sh >/dev/null
	$(CARGO) test --workspace --test mcp_real_clients -- --ignored --nocapture

## lint: formatting and clippy, warnings denied
lint: toolchain
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## otelcol: build (once) the OpenTelemetry Collector the telemetry tests export to, cached
## under ~/.cache/recap/otelcol (also in `make test`)
otelcol:
	scripts/otel-collector.sh

## k8s-validate: the Helm chart, dashboard and alert rules, offline: helm lint, kubeconform
## -strict, kube-score, metric names (pinned tools cached under ~/.cache/recap; also in `make test`)
k8s-validate:
	scripts/k8s-validate.sh

## bench: performance figures measured side by side in one run (release build), also
## saved to docs/bench-results/<UTC date and time>.md
bench: toolchain
	$(CARGO) build --release --workspace --benches --bins
	scripts/bench.sh

## schemas: regenerate the JSON Schemas of the events and the CQL DDL from the code
schemas:
	RECAP_WRITE_SCHEMAS=1 $(CARGO) test -p recap-schemas --test contract json_schema_files
	RECAP_WRITE_SCHEMAS=1 $(CARGO) test -p recap-readmodel --test cql_schema

## docs: regenerate docs/configuration.md from the command line's definitions (a test
## checks it is current)
docs:
	RECAP_WRITE_DOCS=1 $(CARGO) test -p recap --test docs configuration

## toolchain: the Rust components the targets use
toolchain:
	@scripts/toolchain.sh

## up: install (once) and start the real engines on loopback: Kafka, Cassandra, Redis
up:
	scripts/engines/up.sh

## down: stop the engines (down-purge also removes their data)
down:
	scripts/engines/down.sh

down-purge:
	scripts/engines/down.sh --purge
