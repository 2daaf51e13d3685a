#!/usr/bin/env bash
# Apache Cassandra 5.0 (the local stand-in for ScyllaDB: same CQL protocol, same driver)
# from cassandra-all and its dependencies on Maven Central (the binary tarball is not
# there), on Java 17 with Cassandra's jvm17 module options and the jamm agent, heap
# capped at 1 GiB, native protocol on 127.0.0.1:9042. Readiness is a real CQL query.
# usage: cassandra.sh install|start|stop|status|kill9
set -euo pipefail
source "$(dirname "$0")/common.sh"
VERSION=${RECAP_CASSANDRA_VERSION:-5.0.6}
HOME_DIR="$ENGINES_HOME/cassandra-$VERSION"; DIR="$RUN_DIR/cassandra"; PIDFILE="$DIR/cassandra.pid"
VENV="$ENGINES_HOME/venv"

install() {
  resolve_jars "$HOME_DIR" "org.apache.cassandra:cassandra-all:$VERSION"
  if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import cassandra" 2>/dev/null; then
    log "installing the CQL probe (PyPI cassandra-driver)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "cassandra-driver==3.29.2" >&2
  fi
}

ready() {
  "$VENV/bin/python" - <<'PY'
from cassandra.cluster import Cluster
cluster = Cluster(["127.0.0.1"], port=9042, connect_timeout=2, control_connection_timeout=2)
session = cluster.connect()
session.execute("SELECT release_version FROM system.local", timeout=2)
cluster.shutdown()
PY
}

configure() {
  mkdir -p "$DIR/data" "$DIR/commitlog" "$DIR/saved_caches" "$DIR/hints" "$DIR/cdc_raw" "$DIR/logs"
  cat > "$DIR/cassandra.yaml" <<YAML
cluster_name: recap-local
num_tokens: 1
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
data_file_directories: [ "$DIR/data" ]
commitlog_directory: "$DIR/commitlog"
saved_caches_directory: "$DIR/saved_caches"
hints_directory: "$DIR/hints"
cdc_raw_directory: "$DIR/cdc_raw"
commitlog_sync: periodic
commitlog_sync_period: 10000ms
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:7000"
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
storage_port: 7000
native_transport_port: 9042
start_native_transport: true
endpoint_snitch: SimpleSnitch
concurrent_reads: 8
concurrent_writes: 8
concurrent_counter_writes: 4
concurrent_materialized_view_writes: 4
memtable_allocation_type: heap_buffers
auto_snapshot: false
snapshot_before_compaction: false
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
read_request_timeout: 5000ms
write_request_timeout: 2000ms
YAML
  cat > "$DIR/logback.xml" <<XML
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>$DIR/logs/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="FILE"/></root>
  <logger name="org.apache.cassandra.service.CassandraDaemon" level="INFO"/>
</configuration>
XML
}

start() {
  install
  if pid_alive "$PIDFILE" && ready >/dev/null 2>&1; then return 0; fi
  configure
  local jamm
  jamm=$(ls "$HOME_DIR"/libs/jamm-*.jar | head -1)
  # Cassandra's conf/jvm17-server.options, which Java 17 needs.
  local modules=(
    -Djdk.attach.allowAttachSelf=true
    --add-exports java.base/jdk.internal.misc=ALL-UNNAMED --add-exports java.base/jdk.internal.ref=ALL-UNNAMED
    --add-exports java.base/sun.nio.ch=ALL-UNNAMED --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
    --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
    --add-exports java.sql/java.sql=ALL-UNNAMED --add-opens java.base/java.lang.module=ALL-UNNAMED
    --add-opens java.base/jdk.internal.loader=ALL-UNNAMED --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
    --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED --add-opens java.base/jdk.internal.math=ALL-UNNAMED
    --add-opens java.base/jdk.internal.module=ALL-UNNAMED --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
    --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED
    --add-opens java.base/java.io=ALL-UNNAMED --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/java.lang=ALL-UNNAMED
    --add-opens java.base/java.util=ALL-UNNAMED --add-opens java.base/java.util.concurrent=ALL-UNNAMED
    --add-opens java.base/java.util.concurrent.atomic=ALL-UNNAMED --add-opens java.base/java.lang.reflect=ALL-UNNAMED
    --add-opens java.base/java.net=ALL-UNNAMED
  )
  nohup java -Xms1g -Xmx1g -Xss512k -XX:+UseG1GC -XX:+AlwaysPreTouch "${modules[@]}" -javaagent:"$jamm" \
    -Dcassandra.config="file://$DIR/cassandra.yaml" -Dlogback.configurationFile="$DIR/logback.xml" \
    -Dcassandra.storagedir="$DIR" -Dcassandra.logdir="$DIR/logs" -Dcassandra-foreground=yes \
    -Dcassandra.skip_wait_for_gossip_to_settle=0 -Dcassandra.initial_token=0 -Dcassandra.jmx.local.port=7199 \
    -cp "$HOME_DIR/libs/*" org.apache.cassandra.service.CassandraDaemon >"$DIR/logs/stdout.log" 2>&1 &
  echo $! > "$PIDFILE"
  wait_until 180 cassandra ready || { tail -n 40 "$DIR/logs/system.log" "$DIR/logs/stdout.log" >&2; exit 1; }
  log "cassandra ready on 127.0.0.1:9042"
}

case "${1:-start}" in
  install) install ;;
  start) start ;;
  stop) stop_pidfile "$PIDFILE" ;;
  status) ready >/dev/null 2>&1 && echo "cassandra: ready" || { echo "cassandra: down"; exit 1; } ;;
  kill9) stop_pidfile "$PIDFILE" KILL ;;
  *) echo "usage: $0 install|start|stop|status|kill9" >&2; exit 2 ;;
esac
