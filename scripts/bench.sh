#!/usr/bin/env bash
# Runs every benchmark and prints its figures; see README.md, "Performance".
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v wrk >/dev/null 2>&1; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq wrk
fi
echo "== embedded edition: projector, memory, page cost =="
cargo bench --bench embedded
echo
echo "== embedded edition: REST and MCP under load =="
cargo bench --bench http
echo
echo "== distributed edition on the real engines: projector, a backlog drained under reads, freshness, REST vs the raw driver =="
# Idempotent: starts Kafka, Cassandra and Redis on loopback unless they already run.
scripts/engines/up.sh
# RECAP_BENCH_EVENTS: the backlog drained under reads (a million takes tens of minutes
# on the 2-core machine); RECAP_BENCH_RATIO_EVENTS: events a projector-vs-driver round.
RECAP_BENCH_EVENTS=${RECAP_BENCH_EVENTS:-1000000} cargo bench --bench distributed
