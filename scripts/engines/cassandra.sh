#!/usr/bin/env bash
# Apache Cassandra 5.0, the local stand-in for ScyllaDB (same CQL protocol, same driver),
# one node from cassandra-all and its dependencies on Maven Central (the binary tarball,
# apache-cassandra:tar.gz:bin, is not published there), with a cassandra.yaml written
# here. Java 17 needs Cassandra's module options (conf/jvm17-server.options) and the jamm
# agent. Heap 1 GiB, CQL on 127.0.0.1:9042, storage port 7000, JMX on 127.0.0.1:7199.
# Readiness is a real CQL query through the Python driver (PyPI cassandra-driver, a
# binary wheel, in a venv under the cache directory).
#
# As a production cluster would, the node asks every client to log in
# (PasswordAuthenticator; the login `recap` is created at start, common.sh) and takes
# TLS connections beside plain ones on the CQL port, from clients presenting a
# certificate of the local CA. That CA, the node's certificate (for 127.0.0.1) and a
# client's are made once with openssl and keytool into $ENGINES_HOME/cassandra-tls (`tls_material`),
# with a second CA the node does not trust, for tests of refusals.
#
# usage: cassandra.sh install|start|stop|restart|status|kill9|pause|resume
#        cassandra.sh cql "<statement>"   runs one statement, prints the rows
#        cassandra.sh sweep               drops the keyspaces of test and benchmark runs
#                                         that are gone (common.sh, left_by_gone_runs)
set -euo pipefail
ENGINE=cassandra
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

VERSION=${RECAP_CASSANDRA_VERSION:-5.0.9}
DRIVER_VERSION=3.30.1
HOME_DIR="$ENGINES_HOME/cassandra-$VERSION"
VENV="$ENGINES_HOME/cql-probe-$DRIVER_VERSION"
DIR="$RUN_DIR/cassandra"
PIDFILE="$DIR/cassandra.pid"
PID_MARKER="$DIR/cassandra.yaml"
PORTS=("$CQL_PORT" "$CASSANDRA_STORAGE_PORT" "$CASSANDRA_JMX_PORT")
LOG_FILES=("$DIR/logs/system.log" "$DIR/logs/stdout.log")

install() {
  resolve_jars "$HOME_DIR" "org.apache.cassandra:cassandra-all:$VERSION"
  [ -f "$VENV/.complete" ] || with_lock pip install_probe
  write_probe
}

install_probe() {
  [ -f "$VENV/.complete" ] && return 0
  log "installing the CQL probe: PyPI cassandra-driver $DRIVER_VERSION (binary wheel) in $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV" 2>/dev/null || {
    apt_install python3-venv
    python3 -m venv "$VENV"
  }
  "$VENV/bin/pip" install -q --disable-pip-version-check --only-binary=cassandra-driver "cassandra-driver==$DRIVER_VERSION" >&2 ||
    die "pip could not install cassandra-driver $DRIVER_VERSION"
  touch "$VENV/.complete"
}

# The probe itself, written on every install: a venv made by an earlier version of this
# script keeps its driver but gets this probe.
write_probe() {
  cat >"$VENV/cql.py.$$" <<'PY'
"""Runs CQL statements against one node as a login: cql.py <host> <port> <user> <password> <statement>..."""
import logging
import sys
import warnings

warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)
from cassandra.auth import PlainTextAuthProvider  # noqa: E402
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile  # noqa: E402
from cassandra.policies import WhiteListRoundRobinPolicy  # noqa: E402

host, port, user, password, statements = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([host]), request_timeout=10)
cluster = Cluster([host], port=port, connect_timeout=3, control_connection_timeout=3,
                  auth_provider=PlainTextAuthProvider(username=user, password=password),
                  execution_profiles={EXEC_PROFILE_DEFAULT: profile})
try:
    session = cluster.connect()
    for statement in statements:
        for row in session.execute(statement):
            print(" | ".join(str(value) for value in row))
finally:
    cluster.shutdown()
PY
  mv "$VENV/cql.py.$$" "$VENV/cql.py"
}

# The statements run as the superuser, which exists before recap's login does.
cql() { timeout 30 "$VENV/bin/python" "$VENV/cql.py" "$BIND" "$CQL_PORT" "$CQL_SUPERUSER" "$CQL_SUPERUSER_PASSWORD" "$@"; }

# Readiness: the native transport accepts connections and a CQL query answers, logged in.
ready() { port_open "$CQL_PORT" && cql "SELECT release_version FROM system.local" >/dev/null; }

TLS_DIR="$ENGINES_HOME/cassandra-tls"
# The node's key and trust stores are local test files, nothing to keep secret.
STORE_PASSWORD=recap-engines-tls

# tls_material: the local CA, the node's certificate for $BIND signed by it (ca.pem,
# node.p12 with its key), a client's (client.pem, client.key), the store of the CA the
# node checks clients' certificates against (truststore.p12), and a CA the node does not
# trust with a client certificate of its own (other-ca.pem, other-client.pem,
# other-client.key). Made once; P-256 keys, ten years.
tls_material() {
  [ -f "$TLS_DIR/.complete" ] && return 0
  command -v openssl >/dev/null 2>&1 || apt_install openssl
  local keytool
  keytool="$(dirname "$(readlink -f "$JAVA17")")/keytool"
  [ -x "$keytool" ] || die "no keytool beside $JAVA17 (resolved: $(readlink -f "$JAVA17"))"
  log "making the TLS material in $TLS_DIR"
  rm -rf "$TLS_DIR"
  mkdir -p "$TLS_DIR"
  (
    # Every step must succeed: a subshell on the left of || runs without errexit.
    cd "$TLS_DIR" || exit 1
    key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" || exit 1; }
    # sign <name> <ca> <extensions>: <name>.pem, for <name>.key, signed by <ca>.pem/<ca>.key.
    sign() {
      openssl req -new -key "$1.key" -subj "/CN=recap-engines-$1" -out "$1.csr" || exit 1
      printf '%s\n' "$3" >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 3650 -extfile "$1.ext" -out "$1.pem" || exit 1
      rm -f "$1.csr" "$1.ext"
    }
    for ca in ca other-ca; do
      key "$ca.key"
      openssl req -x509 -new -key "$ca.key" -subj "/CN=recap-engines-$ca" -days 3650 -out "$ca.pem" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign || exit 1
    done
    key node.key
    sign node ca "subjectAltName=IP:$BIND
extendedKeyUsage=serverAuth"
    key client.key
    sign client ca "extendedKeyUsage=clientAuth"
    key other-client.key
    sign other-client other-ca "extendedKeyUsage=clientAuth"
    openssl pkcs12 -export -in node.pem -inkey node.key -certfile ca.pem -name node -out node.p12 -passout "pass:$STORE_PASSWORD" || exit 1
    "$keytool" -importcert -noprompt -alias ca -file ca.pem -keystore truststore.p12 -storetype PKCS12 -storepass "$STORE_PASSWORD" >/dev/null || exit 1
    for file in ca.pem node.p12 truststore.p12 client.pem client.key other-ca.pem other-client.pem other-client.key; do
      [ -s "$file" ] || { echo "$file is missing or empty" >&2; exit 1; }
    done
  ) >"$TLS_DIR.log" 2>&1 || die "making the TLS material in $TLS_DIR failed: $(tail -n 5 "$TLS_DIR.log")"
  touch "$TLS_DIR/.complete"
}

# recap's login, made once by the superuser (AllowAllAuthorizer: any login may do
# anything, as recap's migrate needs to). bcrypt's work factor is the smallest
# (`-Dcassandra.auth_bcrypt_gensalt_log2_rounds=4`): the node checks the password of every
# connection the tests open, which at the default factor costs tens of milliseconds each.
# A login made at an earlier start gets its password set again, so that a change of it
# in common.sh takes; a new one is only made. Cassandra refuses a role's password change
# within 5 s of the last (making the role counts), so a start right after another waits
# that long and sets it again. No login is tried before: a refused one would stay in
# the node's credentials cache (credentials_validity) after the password is set.
ensure_login() {
  local existing
  existing=$(cql "SELECT role FROM system_auth.roles WHERE role = '$CQL_USERNAME'") ||
    die "could not read the roles"
  if [ -z "$existing" ]; then
    cql "CREATE ROLE IF NOT EXISTS $CQL_USERNAME WITH PASSWORD = '$CQL_PASSWORD' AND LOGIN = true" >/dev/null ||
      die "could not create the login $CQL_USERNAME"
    return
  fi
  local alter="ALTER ROLE $CQL_USERNAME WITH PASSWORD = '$CQL_PASSWORD' AND LOGIN = true"
  cql "$alter" >/dev/null 2>&1 || { sleep 5 && cql "$alter" >/dev/null; } ||
    die "could not set the password of the login $CQL_USERNAME"
}

configure() {
  mkdir -p "$DIR/data" "$DIR/commitlog" "$DIR/saved_caches" "$DIR/hints" "$DIR/cdc_raw" "$DIR/logs"
  # One node, lean: one token (initial_token matches it, so a restart keeps the ring and
  # the data), small thread pools and caches, no hints, snapshots or user functions. The
  # commit log syncs every second (periodic, as ScyllaDB does, which syncs every 10 s by
  # default), so a kill -9 loses at most the last second of writes. Memtables are unslabbed:
  # heap_buffers reserves 1 MiB slabs per written table (about 2 MiB of heap per table in
  # all, against 0.4 MiB unslabbed), and recap's tests create a keyspace of 26 tables each.
  cat >"$DIR/cassandra.yaml" <<YAML
cluster_name: recap-local
num_tokens: 1
initial_token: 0
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
data_file_directories: [ "$DIR/data" ]
commitlog_directory: "$DIR/commitlog"
saved_caches_directory: "$DIR/saved_caches"
hints_directory: "$DIR/hints"
cdc_raw_directory: "$DIR/cdc_raw"
commitlog_sync: periodic
commitlog_sync_period: 1000ms
commitlog_segment_size: 32MiB
commitlog_total_space: 256MiB
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "$BIND:$CASSANDRA_STORAGE_PORT"
listen_address: $BIND
rpc_address: $BIND
storage_port: $CASSANDRA_STORAGE_PORT
native_transport_port: $CQL_PORT
start_native_transport: true
native_transport_max_threads: 32
endpoint_snitch: SimpleSnitch
authenticator: PasswordAuthenticator
authorizer: AllowAllAuthorizer
role_manager: CassandraRoleManager
roles_validity: 600000ms
credentials_validity: 600000ms
client_encryption_options:
  enabled: true
  optional: true
  keystore: "$TLS_DIR/node.p12"
  keystore_password: "$STORE_PASSWORD"
  truststore: "$TLS_DIR/truststore.p12"
  truststore_password: "$STORE_PASSWORD"
  store_type: PKCS12
  require_client_auth: true
concurrent_reads: 8
concurrent_writes: 8
concurrent_counter_writes: 4
concurrent_materialized_view_writes: 2
concurrent_compactors: 1
compaction_throughput: 64MiB/s
memtable_allocation_type: unslabbed_heap_buffers
memtable_heap_space: 256MiB
file_cache_size: 64MiB
networking_cache_size: 32MiB
key_cache_size: 16MiB
hinted_handoff_enabled: false
auto_snapshot: false
snapshot_before_compaction: false
user_defined_functions_enabled: false
read_request_timeout: 5000ms
range_request_timeout: 10000ms
write_request_timeout: 2000ms
request_timeout: 10000ms
YAML
  cat >"$DIR/logback.xml" <<XML
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.rolling.RollingFileAppender">
    <file>$DIR/logs/system.log</file>
    <rollingPolicy class="ch.qos.logback.core.rolling.FixedWindowRollingPolicy">
      <fileNamePattern>$DIR/logs/system.log.%i</fileNamePattern><minIndex>1</minIndex><maxIndex>2</maxIndex>
    </rollingPolicy>
    <triggeringPolicy class="ch.qos.logback.core.rolling.SizeBasedTriggeringPolicy"><maxFileSize>20MB</maxFileSize></triggeringPolicy>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
XML
}

# Cassandra's conf/jvm17-server.options (module access for Java 17) plus its Netty options.
JVM17_OPTIONS=(
  -Djdk.attach.allowAttachSelf=true
  --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
  --add-exports java.base/jdk.internal.ref=ALL-UNNAMED
  --add-exports java.base/sun.nio.ch=ALL-UNNAMED
  --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
  --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED
  --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
  --add-exports java.sql/java.sql=ALL-UNNAMED
  --add-exports java.base/java.lang.ref=ALL-UNNAMED
  --add-exports jdk.unsupported/sun.misc=ALL-UNNAMED
  --add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
  --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED
  --add-opens java.base/java.lang.module=ALL-UNNAMED
  --add-opens java.base/jdk.internal.loader=ALL-UNNAMED
  --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
  --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED
  --add-opens java.base/jdk.internal.math=ALL-UNNAMED
  --add-opens java.base/jdk.internal.module=ALL-UNNAMED
  --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
  --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
  --add-opens java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens java.base/java.io=ALL-UNNAMED
  --add-opens java.base/java.nio=ALL-UNNAMED
  --add-opens java.base/java.lang.reflect=ALL-UNNAMED
  --add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED
  --add-opens java.base/java.lang=ALL-UNNAMED
  --add-opens java.base/java.util=ALL-UNNAMED
  --add-opens java.base/java.util.concurrent=ALL-UNNAMED
  --add-opens java.base/java.util.concurrent.atomic=ALL-UNNAMED
  --add-opens java.base/java.net=ALL-UNNAMED
  -Dio.netty.tryReflectionSetAccessible=true
  -Dio.netty.allocator.useCacheForAllThreads=true
  -Dio.netty.allocator.maxOrder=11
)

launch() {
  local jamm
  refuse_foreign_ports
  need_java17
  tls_material
  configure
  jamm=$(ls "$HOME_DIR"/libs/jamm-*.jar | head -n 1)
  log "starting Cassandra $VERSION on $BIND:$CQL_PORT"
  # The bin/cassandra launcher (which wants -R as root) is not used: the daemon class is
  # started directly, in the foreground of its own process.
  nohup "$JAVA17" -Xms256m -Xmx1g -Xss512k -XX:+UseG1GC -XX:+ParallelRefProcEnabled -XX:MaxTenuringThreshold=1 \
    -XX:MaxGCPauseMillis=300 -XX:MaxDirectMemorySize=512m -XX:+ExitOnOutOfMemoryError -XX:+PerfDisableSharedMem \
    "${JVM17_OPTIONS[@]}" -javaagent:"$jamm" -Djava.net.preferIPv4Stack=true \
    -Dcassandra.config="file://$DIR/cassandra.yaml" -Dlogback.configurationFile="$DIR/logback.xml" \
    -Dcassandra.storagedir="$DIR" -Dcassandra.logdir="$DIR/logs" -Dcassandra-foreground=yes \
    -Dcassandra.skip_wait_for_gossip_to_settle=0 -Dcassandra.jmx.local.port="$CASSANDRA_JMX_PORT" \
    -Dcassandra.superuser_setup_delay_ms=0 -Dcassandra.auth_bcrypt_gensalt_log2_rounds=4 \
    -cp "$HOME_DIR/libs/*" org.apache.cassandra.service.CassandraDaemon \
    </dev/null >"$DIR/logs/stdout.log" 2>&1 9>&- &
  echo $! >"$PIDFILE"
}

_start() {
  local started
  started=$(now_ms)
  # A node started by an earlier version of this script asks for no login: it is
  # restarted with this configuration (the data stays).
  if engine_pid >/dev/null && ! grep -q '^authenticator: PasswordAuthenticator' "$DIR/cassandra.yaml" 2>/dev/null; then
    log "the running node asks for no login: restarting it with this configuration"
    stop_engine TERM 90
  fi
  adopt_or_launch 180 || die "Cassandra did not become ready (logs: $DIR/logs; should they show a corrupt schema or data, after a full disk for instance, \`make down-purge\` resets the engines' data)"
  ensure_login
  log "ready on $BIND:$CQL_PORT in $(elapsed "$started") (pid $(engine_pid), RSS $(rss_of_engine))"
  local keyspaces
  keyspaces=$(cql "SELECT keyspace_name FROM system_schema.keyspaces" 2>/dev/null | grep -vc '^system' || true)
  if [ "$keyspaces" -gt 40 ]; then
    log "note: $keyspaces keyspaces left by earlier runs (each costs heap and start-up time); \`make down-purge\` resets the data"
  fi
}

start() {
  install
  with_lock cassandra _start
}

# Drops the keyspaces of test and benchmark runs that are gone (common.sh,
# left_by_gone_runs), ten to a CQL session.
sweep() {
  local gone count
  gone=$(cql "SELECT keyspace_name FROM system_schema.keyspaces" | left_by_gone_runs recap_)
  count=$(grep -c . <<<"$gone" || true)
  if [ "$count" -eq 0 ]; then log "no keyspaces left by runs that are gone"; return 0; fi
  log "dropping $count keyspaces left by test and benchmark runs that are gone"
  local statements=()
  while IFS= read -r keyspace; do
    statements+=("DROP KEYSPACE IF EXISTS \"$keyspace\"")
    if [ ${#statements[@]} -eq 10 ]; then
      cql "${statements[@]}" >/dev/null || die "dropping keyspaces failed"
      statements=()
    fi
  done <<<"$gone"
  [ ${#statements[@]} -eq 0 ] || cql "${statements[@]}" >/dev/null || die "dropping keyspaces failed"
  log "dropped $count keyspaces"
}

status() {
  local pid
  if ! pid=$(engine_pid); then echo "cassandra: down"; return 1; fi
  if engine_paused; then echo "cassandra: paused (pid $pid)"; return 1; fi
  if ready 2>/dev/null; then echo "cassandra: ready on $BIND:$CQL_PORT (pid $pid, RSS $(rss_of_engine))"; else echo "cassandra: running but not ready (pid $pid)"; return 1; fi
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) with_lock cassandra stop_engine TERM 90 ;;
  restart) with_lock cassandra stop_engine TERM 90 && start ;;
  status) status ;;
  kill9) with_lock cassandra stop_engine KILL 10 ;;
  pause) pause_engine ;;
  resume) resume_engine ;;
  cql) shift; cql "$@" ;;
  sweep) sweep ;;
  *) engine_usage ;;
esac
