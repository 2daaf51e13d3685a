#!/usr/bin/env bash
# The whole suite, as `make test` and CI run it:
#   1. the embedded edition: every crate's tests (the router suites' worlds in process
#      over an embedded store), black-box tests against `recap serve`, the real MCP
#      clients (official Python SDK 2.x and 1.x, official TypeScript SDK 1.x and
#      2.x, the MCP Inspector's CLI, headless Chromium), webhook deliveries verified by
#      the official Python Standard Webhooks library, Schemathesis fuzzing REST v1 from
#      schemas/openapi.json, and telemetry into a real
#      OpenTelemetry Collector (built once by scripts/otel-collector.sh);
#   2. the real engines (`make up`): the driver semantics suite on Cassandra, the Kafka
#      lag test, then the same suites on the other editions, chosen by the test kit's
#      RECAP_TEST_WORLD (testkit/src/world): the REST and MCP router suites over a
#      Cassandra keyspace per world (`cassandra`), the router suites and the REST and
#      MCP black-box suites and the webhooks' black-box suite with each world a cluster
#      of its own (`cluster`: one projector, two query-api and one mcp process fed
#      through Kafka, and a `recap webhooks` process where deliveries are), then the fault
#      suite (with a two-minute soak: mixed reads, events throughout, a projector and
#      a query-api restart) and the webhooks' suite under load and faults (one test at a
#      time: they stop, kill and pause shared engines), and the distributed roles'
#      telemetry.
# Prints one closing summary line over every test binary.
set -uo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
mkdir -p "$target"
# The run's own log, which the closing summary reads: the target directory is shared
# by every clone (the Makefile's default), so a log there could take lines from a run
# of another clone. A copy is left at $target/test.log.
log=$(mktemp "${TMPDIR:-/tmp}/recap-test.XXXXXX")
trap 'cp "$log" "$target/test.log" 2>/dev/null; rm -f "$log"' EXIT
echo "the run's log: $log (copied to $target/test.log at the end)"
status=0
run() {
  echo "== $*" | tee -a "$log"
  "$@" 2>&1 | tee -a "$log"
  local code=${PIPESTATUS[0]}
  [ "$code" -eq 0 ] || status=$code
}

scripts/setup-python.sh >/dev/null || status=1
scripts/setup-python.sh --sdk1 >/dev/null || status=1
scripts/setup-node.sh >/dev/null || status=1
scripts/setup-browser.sh >/dev/null || status=1
scripts/setup-schemathesis.sh >/dev/null || status=1
# tests/telemetry.rs finds the collector here; empty when it did not build, so that
# those tests fail saying so instead of building it again each.
if otelcol=$(scripts/otel-collector.sh); then
  export RECAP_OTELCOL=$otelcol
else
  echo "the OpenTelemetry Collector did not build: the telemetry tests will fail" | tee -a "$log"
  export RECAP_OTELCOL=
  status=1
fi
# Every pass selects the whole workspace (`--workspace`, then `--test` to pick its
# suites): cargo unifies the dependencies' features over the packages selected, so a
# pass that selected one package would build a dozen dependencies and every workspace
# crate again with other features.
run cargo test --workspace --no-fail-fast
# Ignored above for needing Python, Node 22 and its MCP clients, Chromium and
# Schemathesis, which the setup scripts installed.
run cargo test --workspace --test mcp_real_clients --test webhooks_delivery --test schemathesis -- --ignored

# The engines this run starts, it stops at the end; engines already running (a
# developer's `make up`) are used and left running.
started_here=()
for engine in kafka cassandra redis; do
  [ "$(scripts/engines/$engine.sh status 2>/dev/null)" = "$engine: down" ] && started_here+=("$engine")
done
if scripts/engines/up.sh; then
  set -a; source "${RECAP_ENGINES_HOME:-$HOME/.cache/recap/engines}/env"; set +a
  run cargo test --workspace --test driver_semantics -- --ignored
  # Unit tests of the drivers that need an engine (the Scylla session's metadata).
  run cargo test --workspace --lib -- --ignored
  run cargo test --workspace --test kafka_lag --test kafka_messages --test kafka_client -- --ignored
  run env RECAP_TEST_WORLD=cassandra cargo test --workspace --no-fail-fast --test rest
  run env RECAP_TEST_WORLD=cassandra cargo test --workspace --no-fail-fast --test oauth --test tools --test transport --test modern --test cimd --test observability --test generated
  run env RECAP_TEST_WORLD=cassandra cargo test --workspace --no-fail-fast --test delivery --test queue
  run env RECAP_TEST_WORLD=cassandra cargo test --workspace --test kafka -- --ignored
  # The cluster worlds run the recap binary beside the test executables, which cargo
  # builds for the root package's own tests (with the features of the passes above; a
  # `cargo build --bin recap` would build it again with others).
  run cargo test --workspace --no-run
  run env RECAP_TEST_WORLD=cluster cargo test --workspace --no-fail-fast --test rest --test oauth --test tools --test transport --test modern --test cimd --test observability --test generated -- --test-threads=2
  run env RECAP_TEST_WORLD=cluster cargo test --workspace --no-fail-fast --test rest_conformance --test mcp_real_clients --test webhooks_black_box -- --include-ignored --test-threads=2
  run cargo test --workspace --no-fail-fast --test distributed --test webhooks_distributed -- --ignored --test-threads=1
  run cargo test --workspace --test telemetry -- --ignored
else
  echo "the engines did not start: the distributed edition was not tested" | tee -a "$log"
  status=1
fi

for engine in "${started_here[@]}"; do
  scripts/engines/$engine.sh stop >/dev/null 2>&1 || echo "could not stop $engine (scripts/engines/$engine.sh stop)" | tee -a "$log"
done

scripts/test-summary.sh "$log"
exit $status
