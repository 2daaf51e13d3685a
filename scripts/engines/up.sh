#!/usr/bin/env bash
# Installs (the first time) and starts the real engines on loopback: Kafka, Cassandra
# (standing in for ScyllaDB) and Redis, in parallel, each one ready only once its probe
# answers (a metadata request, a CQL query, PING). Safe to run again: running, ready
# engines are left alone. Then deletes the topics and keyspaces of test and benchmark
# runs that are gone. Writes their addresses to $RECAP_ENGINES_HOME/env (default
# ~/.cache/recap/engines/env), KEY=value lines that a shell can source.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ENGINE=engines
# shellcheck source=common.sh
source "$here/common.sh"

started=$(now_ms)
log "bringing up kafka, cassandra and redis (home $ENGINES_HOME)"
# The three start at once; the two Maven installs take turns (common.sh locks them).
declare -A jobs
for engine in redis kafka cassandra; do
  bash "$here/$engine.sh" start &
  jobs[$engine]=$!
done
failed=()
for engine in redis kafka cassandra; do
  wait "${jobs[$engine]}" || failed+=("$engine")
done
if [ ${#failed[@]} -gt 0 ]; then
  log "FAILED: ${failed[*]} (see the lines above; logs under $RUN_DIR)"
  exit 1
fi

# What killed test and benchmark runs left behind goes: their topics and keyspaces pile
# up otherwise, until the broker runs out of heap at start-up.
for engine in kafka cassandra; do
  bash "$here/$engine.sh" sweep || log "warning: could not sweep $engine (see above); a run that was killed may have left topics or keyspaces behind"
done

settings="RECAP_KAFKA_BROKERS=$BIND:$KAFKA_PORT
RECAP_ENGINES_KAFKA_SASL_BROKERS=$BIND:$KAFKA_SASL_PORT
RECAP_ENGINES_KAFKA_SASL_USERNAME=$KAFKA_SASL_USERNAME
RECAP_ENGINES_KAFKA_SASL_PASSWORD=$KAFKA_SASL_PASSWORD
RECAP_SCYLLA_NODES=$BIND:$CQL_PORT
RECAP_SCYLLA_USERNAME=$CQL_USERNAME
RECAP_SCYLLA_PASSWORD=$CQL_PASSWORD
RECAP_ENGINES_CASSANDRA_TLS_DIR=$ENGINES_HOME/cassandra-tls
RECAP_REDIS_URL=redis://$BIND:$REDIS_PORT"
printf '%s\n' "$settings" >"$ENGINES_HOME/env.tmp"
mv "$ENGINES_HOME/env.tmp" "$ENGINES_HOME/env"
log "all engines ready in $(elapsed "$started"); settings written to $ENGINES_HOME/env:"
echo "$settings" | tr '\n' ' ' | sed 's/ $/\n/'
