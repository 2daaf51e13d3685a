#!/usr/bin/env bash
# Runs every benchmark and prints its figures (docs/performance.md says what each
# measures). What the benchmarks print is also saved, with the commit and the machine, to
# docs/bench-results/<UTC date and time>.md: the record to commit with the change it
# measured.
# usage: scripts/bench.sh [SECTION...]   every section when none is named, else only those
# named (embedded http peers webhooks distributed soak), recorded the same way in
# docs/bench-results/<UTC date and time>-<sections>.md.
set -euo pipefail
cd "$(dirname "$0")/.."
sections=("$@")
for section in "${sections[@]}"; do
  case "$section" in
    embedded | http | peers | webhooks | distributed | soak) ;;
    *) echo "usage: $0 [embedded|http|peers|webhooks|distributed|soak ...]" >&2; exit 2 ;;
  esac
done
wants() {
  [ ${#sections[@]} -eq 0 ] && return 0
  local section
  for section in "${sections[@]}"; do [ "$section" = "$1" ] && return 0; done
  return 1
}
if ! command -v wrk >/dev/null 2>&1; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq wrk
fi

embedded() {
  echo "== embedded edition: projector, memory, page cost =="
  cargo bench --bench embedded
}

http() {
  echo "== embedded edition: REST and MCP under load =="
  cargo bench --bench http
}

# The engines (idempotent: Kafka, Cassandra and Redis on loopback unless they already run)
# serve the distributed edition in the comparison and the distributed benchmarks; without
# them the comparison leaves the distributed edition out and says so.
peers() {
  echo "== both editions side by side with read APIs over PostgreSQL: axum + tokio-postgres, FastAPI + asyncpg =="
  scripts/engines/up.sh || echo "(the engines did not start: the comparison leaves the distributed edition out)"
  # Installs (once) PostgreSQL, the peers' Python environment and builds the axum
  # peer; see scripts/peers/setup.sh.
  scripts/peers/bench.sh
}

webhooks() {
  echo "== embedded edition: webhooks delivery against the projector, event to delivery latency, a backlog, feed page cost =="
  # RECAP_BENCH_WEBHOOK_EVENTS: meetings a throughput round; RECAP_BENCH_WEBHOOK_BACKLOG:
  # the backlog (150,000); RECAP_BENCH_FEED_MESSAGES: the large feed (a million by default).
  cargo bench --bench webhooks
}

distributed() {
  echo "== distributed edition on the real engines: projector, a backlog drained under reads, freshness, REST vs the raw driver =="
  scripts/engines/up.sh
  # RECAP_BENCH_EVENTS: the backlog drained under reads (a million takes tens of minutes
  # on the 2-core machine); RECAP_BENCH_RATIO_EVENTS: events a projector-vs-driver round.
  RECAP_BENCH_EVENTS=${RECAP_BENCH_EVENTS:-1000000} cargo bench --bench distributed
}

soak() {
  echo "== distributed edition soak: mixed REST and MCP reads at half the maximum, events throughout, a projector and a query-api restart =="
  scripts/engines/up.sh
  # RECAP_BENCH_SOAK_MINUTES: its length (15 by default); RECAP_BENCH_SOAK_EVENTS_PER_SECOND
  # (50) and RECAP_BENCH_SOAK_WORKERS (32, the threads sending reads).
  cargo bench --bench distributed soak
}

# Each section wanted, in order, in a shell of its own that stops at its first failure;
# a section that fails is named and the next ones still run; the run fails if any did.
benchmarks() {
  local failed=() section status
  for section in embedded http peers webhooks distributed soak; do
    wants "$section" || continue
    set +e
    (set -e; "$section")
    status=$?
    set -e
    echo
    if [ "$status" -ne 0 ]; then
      echo "!! section $section failed (status $status); the sections after it still run"
      echo
      failed+=("$section")
    fi
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "failed sections: ${failed[*]}"
    return 1
  fi
}

results=docs/bench-results
mkdir -p "$results"
started=$(date -u +%Y-%m-%dT%H%M%SZ)
suffix=""
[ ${#sections[@]} -eq 0 ] || suffix="-$(IFS=-; echo "${sections[*]}")"
record="$results/$started$suffix.md"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo "unknown")
git diff --quiet HEAD 2>/dev/null || commit="$commit with uncommitted changes"
memory=$(awk '/^MemTotal:/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
{
  echo "# make bench${sections[*]:+ (${sections[*]})}, $started"
  echo
  echo "Commit $commit; $(nproc) cores, $memory of memory, $(uname -sr)."
  echo "RECAP_BENCH_EVENTS=${RECAP_BENCH_EVENTS:-1000000}${RECAP_BENCH_RATIO_EVENTS:+ RECAP_BENCH_RATIO_EVENTS=$RECAP_BENCH_RATIO_EVENTS}${RECAP_BENCH_WEBHOOK_EVENTS:+ RECAP_BENCH_WEBHOOK_EVENTS=$RECAP_BENCH_WEBHOOK_EVENTS}${RECAP_BENCH_LATENCY_SECONDS:+ RECAP_BENCH_LATENCY_SECONDS=$RECAP_BENCH_LATENCY_SECONDS}${RECAP_BENCH_FEED_MESSAGES:+ RECAP_BENCH_FEED_MESSAGES=$RECAP_BENCH_FEED_MESSAGES}${RECAP_BENCH_SOAK_MINUTES:+ RECAP_BENCH_SOAK_MINUTES=$RECAP_BENCH_SOAK_MINUTES}."
  echo
  echo '```'
} >"$record"

# The figures go to the terminal and to the record; cargo's own output (standard error)
# to the terminal only.
set +e
benchmarks | tee -a "$record"
status=${PIPESTATUS[0]}
set -e
echo '```' >>"$record"
if [ "$status" -ne 0 ]; then
  echo >>"$record"
  echo "The run stopped with status $status." >>"$record"
fi
echo "saved to $record" >&2
exit "$status"
