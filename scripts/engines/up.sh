#!/usr/bin/env bash
# Installs (once) and starts Kafka, Cassandra and Redis on loopback, each waiting on a
# real readiness probe, then writes their addresses to $ENGINES_HOME/env.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/common.sh"
started=$(date +%s)
pids=()
for engine in redis kafka cassandra; do
  bash "$here/$engine.sh" start > "$RUN_DIR/$engine.up.log" 2>&1 &
  pids+=($!)
done
status=0
for index in "${!pids[@]}"; do
  engine=$(echo redis kafka cassandra | cut -d' ' -f$((index + 1)))
  if ! wait "${pids[$index]}"; then
    log "$engine failed to start:"; cat "$RUN_DIR/$engine.up.log" >&2; status=1
  fi
done
[ $status -eq 0 ] || exit $status
cat > "$ENGINES_HOME/env" <<ENV
RECAP_KAFKA_BROKERS=127.0.0.1:9092
RECAP_SCYLLA_NODES=127.0.0.1:9042
RECAP_REDIS_URL=redis://127.0.0.1:6379
ENV
log "engines ready in $(( $(date +%s) - started )) s; settings in $ENGINES_HOME/env:"
cat "$ENGINES_HOME/env"
